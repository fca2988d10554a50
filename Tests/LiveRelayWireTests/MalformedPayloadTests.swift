import NIOCore
import Testing

@testable import LiveRelayWire

/// Every way a known frame type's payload can break its layout, and the exact reason reported.
@Suite struct MalformedPayloadTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var type: FrameType
        var id: UInt32
        var payload: [UInt8]
        var reason: String
        var testDescription: String { "\(type): \(reason)" }
    }

    static let cases: [Case] = [
        // HELLO
        Case(type: .hello, id: 0, payload: hex("00 01 00 01 00"), reason: "5 bytes, need at least 6"),
        Case(type: .hello, id: 0, payload: hex("00 02 00 01 00 01 6B 00"), reason: "min_version 2 is above max_version 1"),
        Case(type: .hello, id: 0, payload: hex("00 01 00 01 00 00 00"), reason: "api_key_length 0 is not in 1...512"),
        Case(
            type: .hello, id: 0, payload: hex("00 01 00 01 02 01") + [UInt8](repeating: 0x6B, count: 513) + [0],
            reason: "api_key_length 513 is not in 1...512"),
        Case(type: .hello, id: 0, payload: hex("00 01 00 01 00 05 6B 6B"), reason: "api_key_length 5 exceeds the 2 bytes left"),
        Case(type: .hello, id: 0, payload: hex("00 01 00 01 00 01 6B"), reason: "missing client_name_length"),
        Case(
            type: .hello, id: 0, payload: hex("00 01 00 01 00 01 6B 04 61 62"),
            reason: "client_name length 4 exceeds the 2 bytes left"),
        Case(type: .hello, id: 0, payload: hex("00 01 00 01 00 01 6B 02 C3 28"), reason: "client_name is not valid UTF-8"),
        Case(
            type: .hello, id: 0, payload: hex("00 01 00 01 00 01 6B 00 00 01 00 00 40"),
            reason: "settings length 5 is not a multiple of 6"),
        Case(
            type: .hello, id: 0, payload: hex("00 01 00 01 00 01 6B 00 | 00 01 00 00 3F FF"),
            reason: "MAX_FRAME_SIZE 16383 is outside 16384...16777215"),
        Case(
            type: .hello, id: 0, payload: hex("00 01 00 01 00 01 6B 00 | 00 01 01 00 00 00"),
            reason: "MAX_FRAME_SIZE 16777216 is outside 16384...16777215"),
        // WELCOME
        Case(type: .welcome, id: 0, payload: hex("00"), reason: "1 bytes, need at least 2"),
        Case(type: .welcome, id: 0, payload: hex("00 01 00 02 00 00 00"), reason: "settings length 5 is not a multiple of 6"),
        Case(type: .welcome, id: 0, payload: hex("00 01 | 00 02 00 00 00 00"), reason: "MAX_REQUESTS_IN_FLIGHT must be at least 1"),
        // REQUEST
        Case(type: .request, id: 1, payload: hex("00 00 00 00"), reason: "4 bytes, need at least 5"),
        Case(type: .request, id: 1, payload: hex("00 00 00 00 00 0A"), reason: "method_length is 0"),
        Case(type: .request, id: 1, payload: hex("00 00 00 00 05 2F 61"), reason: "method_length 5 exceeds the 2 bytes left"),
        Case(type: .request, id: 1, payload: hex("00 00 00 00 03 2F 20 61"), reason: "method is not printable ASCII"),
        Case(type: .request, id: 1, payload: hex("00 00 00 00 02 2F C3"), reason: "method is not printable ASCII"),
        // ERROR
        Case(type: .error, id: 1, payload: hex("05 00"), reason: "2 bytes, need at least 3"),
        Case(type: .error, id: 1, payload: hex("00 00 00"), reason: "status code 0 is not in 1...16"),
        Case(type: .error, id: 1, payload: hex("11 00 00"), reason: "status code 17 is not in 1...16"),
        Case(type: .error, id: 1, payload: hex("05 00 03 6E 6F"), reason: "message length 3 exceeds the 2 bytes left"),
        Case(type: .error, id: 1, payload: hex("05 00 01 FF"), reason: "message is not valid UTF-8"),
        // CANCEL
        Case(type: .cancel, id: 1, payload: hex("00"), reason: "payload must be empty, got 1 bytes"),
        // PING, PONG
        Case(type: .ping, id: 0, payload: hex("01 02 03 04 05 06 07"), reason: "payload must be exactly 8 bytes, got 7"),
        Case(type: .ping, id: 0, payload: hex("01 02 03 04 05 06 07 08 09"), reason: "payload must be exactly 8 bytes, got 9"),
        Case(type: .pong, id: 0, payload: [], reason: "payload must be exactly 8 bytes, got 0"),
        // GOAWAY
        Case(type: .goAway, id: 0, payload: hex("00 00 00 01 00 00 00 00 00"), reason: "9 bytes, need at least 10"),
        Case(type: .goAway, id: 0, payload: hex("00 00 00 01 00 00 00 00 00 04 61"), reason: "reason length 4 exceeds the 1 bytes left"),
        Case(type: .goAway, id: 0, payload: hex("00 00 00 01 00 00 00 00 00 01 61 62"), reason: "1 bytes after the reason"),
        Case(type: .goAway, id: 0, payload: hex("00 00 00 01 00 00 00 00 00 01 80"), reason: "reason is not valid UTF-8"),
    ]

    @Test(arguments: cases)
    func malformed(_ testCase: Case) {
        let bytes = rawFrame(type: testCase.type.rawValue, id: testCase.id, payload: testCase.payload)
        let result = decodeAll([bytes])
        #expect(result.error == .malformedPayload(testCase.type, reason: testCase.reason))
        #expect(result.error?.goAwayCode == .protocolError)
        #expect(result.error?.description == "malformed \(testCase.type) frame: \(testCase.reason)")
        // The same one byte at a time.
        #expect(decodeAll(bytes.map { [$0] }).error == .malformedPayload(testCase.type, reason: testCase.reason))
    }

    @Test func unknownSettingsAreKeptAndIgnored() throws {
        let bytes = rawFrame(type: 0x02, payload: hex("00 01 | 7F 00 FF FF FF FF | 00 02 00 00 00 05"))
        let result = decodeAll([bytes])
        #expect(result.error == nil)
        guard case .welcome(let welcome) = result.frames.first else {
            Issue.record("expected WELCOME")
            return
        }
        #expect(welcome.settings == [Setting(SettingID(rawValue: 0x7F00), 0xFFFF_FFFF), Setting(.maxRequestsInFlight, 5)])
        let settings = try ServerSettings(validating: welcome.settings)
        #expect(settings == ServerSettings(maxFrameSize: 1_048_576, maxRequestsInFlight: 5, idleTimeoutMilliseconds: 0))
    }

    @Test func emptyDetailsAndEmptyTexts() {
        let result = decodeAll([rawFrame(type: 0x05, id: 3, payload: hex("0D 00 00"))])
        #expect(result.frames == [errorFrame(3, .internal, "")])
    }

    @Test func unknownGoAwayCodeIsKept() {
        let result = decodeAll([rawFrame(type: 0x09, payload: hex("00 00 00 02 00 00 01 00 00 00"))])
        #expect(result.frames == [goAwayFrame(2, GoAwayCode(rawValue: 256), "")])
        #expect(GoAwayCode(rawValue: 256).description == "GOAWAY_CODE_256")
    }
}
