import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import LiveRelayOps

struct StructuredLogHandlerTests {
    /// Lines the handler wrote, through a real `Logger` as the server logs.
    final class Lines: Sendable {
        private let lines = NIOLockedValueBox<[String]>([])
        var all: [String] { lines.withLockedValue { $0 } }
        func append(_ line: String) { lines.withLockedValue { $0.append(line) } }
    }

    func logger(_ format: LogFormat, _ lines: Lines) -> Logger {
        var logger = Logger(label: "liverelay") { label in
            StructuredLogHandler(label: label, format: format, write: { lines.append($0) })
        }
        logger[metadataKey: "node"] = "a"
        return logger
    }

    @Test func jsonLinesParseAndCarryEveryFieldByName() throws {
        let lines = Lines()
        let log = logger(.json, lines)
        log.info(
            "pushes queued \"now\"\n", metadata: ["request_id": "42", "app": "dev.app", "apns_id": "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab"])
        log.debug("dropped: below the level")
        #expect(lines.all.count == 1)
        let line = try #require(lines.all.first)
        #expect(line.hasSuffix("}\n") && line.filter { $0 == "\n" }.count == 1, "one line, the message's newline escaped")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["msg"] == "pushes queued \"now\"\n")
        #expect(object["level"] == "info")
        #expect(object["logger"] == "liverelay")
        #expect(object["request_id"] == "42")
        #expect(object["app"] == "dev.app")
        #expect(object["apns_id"] == "0f1e2d3c-aaaa-bbbb-cccc-0123456789ab")
        #expect(object["node"] == "a", "the handler's own metadata too")
        #expect(object["source"] == "LiveRelayOpsTests")
        let ts = try #require(object["ts"])
        #expect(ts.count == 24 && ts.hasSuffix("Z"), "RFC 3339 with milliseconds: \(ts)")
    }

    @Test func logfmtQuotesOnlyWhatNeedsIt() throws {
        let lines = Lines()
        logger(.logfmt, lines).warning("store outcome unknown", metadata: ["call": "RegisterToken", "error": "a=b \"c\"", "empty": ""])
        let line = try #require(lines.all.first)
        #expect(line.contains(#" level=warning logger=liverelay msg="store outcome unknown" call=RegisterToken empty="" "#))
        #expect(line.contains(#"error="a=b \"c\"""#))
        #expect(line.hasPrefix("ts=") && line.hasSuffix(" source=LiveRelayOpsTests\n"))
    }

    @Test func controlCharactersAreEscaped() {
        #expect(StructuredLogHandler.jsonString("a\u{1}b\tc") == #""a\u0001b\tc""#)
        #expect(StructuredLogHandler.logfmtValue("plain") == "plain")
        #expect(StructuredLogHandler.timestamp(Date(timeIntervalSince1970: 1_795_000_000.042)) == "2026-11-18T11:06:40.042Z")
    }
}
