import CFuzzerDriver
import FuzzSupport
import LiveRelayHTTP2
import NIOCore

// A libFuzzer target (built with -sanitize=fuzzer,address -parse-as-library; see scripts/fuzz.sh).
// Input: a chunking byte, then the bytes a server sends. The session has three
// requests open before the first byte, submits one more after each chunk, and
// writes its output after each; nothing may crash, hang or leak, and every event
// must name a stream this client opened.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0, let session = try? HTTP2ClientSession(settings: .init(initialWindowSize: 65_535)) else { return 0 }
    var opened: Set<Int32> = []
    func submit() {
        if let id = try? session.submitRequest(HTTP2SessionSeeds.request, body: ByteBuffer(string: #"{"aps":{}}"#)) { opened.insert(id) }
    }
    var output = ByteBuffer()
    func exchange() {
        output.clear()
        guard (try? session.write(into: &output)) != nil else { return }
        if session.headersSentThrough > (opened.max() ?? 0) { fatalError("HEADERS sent for a stream never opened") }
        for event in session.takeEvents() {
            switch event {
            case .headerField(let id, _, _), .data(let id, _), .endOfStream(let id):
                if !opened.contains(id) { fatalError("an event for stream \(id), which this client never opened") }
            case .streamClosed(let id, _):
                if id != 0, !opened.contains(id) { fatalError("stream \(id) closed, which this client never opened") }
            case .settings, .pingAcknowledged, .goAway:
                break
            }
        }
    }
    for _ in 0..<3 { submit() }
    exchange()
    let chunk = max(1, Int(data[0]))
    var offset = 1
    while offset < size, !session.isFinished {
        let count = min(chunk, size - offset)
        guard (try? session.receive(ByteBuffer(bytes: UnsafeBufferPointer(start: data + offset, count: count)))) != nil else { break }
        offset += count
        exchange()
        submit()
        exchange()
    }
    return 0
}

/// A request's headers, and seeds: a server's usual bytes for the streams the target opens.
enum HTTP2SessionSeeds {
    static let request: HTTP2HeaderList = {
        var headers = HTTP2HeaderList()
        headers.append(name: ":method", value: "POST")
        headers.append(name: ":scheme", value: "https")
        headers.append(name: ":authority", value: "api.push.apple.com")
        headers.append(name: ":path", value: "/3/device/abcdef", indexable: false)
        headers.append(name: "apns-topic", value: "com.example.app.push-type.liveactivity")
        return headers
    }()

    static func frame(_ type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    static let settings = frame(4, flags: 0, stream: 0, [0, 3, 0, 0, 0x03, 0xE8])
    static let settingsAck = frame(4, flags: 1, stream: 0, [])
    static let ok = frame(1, flags: 0x5, stream: 1, [0x88])
    static let badRequest =
        frame(1, flags: 0x4, stream: 3, [0x8C]) + frame(0, flags: 0x1, stream: 3, Array(#"{"reason":"BadDeviceToken"}"#.utf8))

    static var all: [(String, [UInt8])] {
        [
            ("answers", [16] + settings + settingsAck + ok + badRequest),
            ("one-byte-chunks", [1] + settings + settingsAck + ok),
            (
                "ping-window-reset",
                [64] + settings + frame(6, flags: 0, stream: 0, [1, 2, 3, 4, 5, 6, 7, 8])
                    + frame(8, flags: 0, stream: 0, [0, 0, 0x10, 0]) + frame(3, flags: 0, stream: 5, [0, 0, 0, 7])
            ),
            (
                "settings-change-goaway",
                [32] + settings + frame(4, flags: 0, stream: 0, [0, 3, 0, 0, 0, 1, 0, 4, 0, 0, 0x10, 0])
                    + ok + frame(7, flags: 0, stream: 0, [0, 0, 0, 1, 0, 0, 0, 0])
            ),
            (
                "trailers-and-continuation",
                [255] + settings + frame(1, flags: 0x0, stream: 1, [0x88])
                    + frame(9, flags: 0x4, stream: 1, [0x40, 1, 0x78, 1, 0x79]) + frame(0, flags: 0, stream: 1, [0x41])
                    + frame(1, flags: 0x5, stream: 1, [0x40, 1, 0x74, 1, 0x75])
            ),
        ]
    }
}

/// With LIVERELAY_FUZZ_WRITE_SEEDS set, writes this target's seeds and exits.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(
    _ argc: UnsafeMutablePointer<Int32>?,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> Int32 {
    Seeds.writeIfRequested(target: "FuzzHTTP2Session", HTTP2SessionSeeds.all)
    return 0
}

/// The process entry point SwiftPM links in as main(): hands over to libFuzzer's driver.
@_cdecl("FuzzHTTP2Session_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput)
}
