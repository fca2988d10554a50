import NIOCore
import NIOHTTP2

/// One client stream's request as its frames arrive: the pure part of the mock's
/// stream plumbing, so the assembly is tested without a socket.
struct MockAPNsStreamRequest {
    /// What one frame changed.
    struct Progress: Equatable {
        /// The stream's first HEADERS: the connection policy applies now.
        var began = false
        /// END_STREAM on a request not yet complete: it is ready to be judged (once).
        var completed = false
    }

    private(set) var method: String?
    private(set) var path: String?
    /// Regular headers in arrival order, duplicates kept (the validator rejects duplicates).
    private(set) var headers: [(name: String, value: String)] = []
    /// The body, at most ``MockAPNsRecorder/maxRecordedBodyBytes``: a longer one is still
    /// over APNs's 4096 bytes, so 413 stays exact without holding all of it.
    private(set) var body: [UInt8] = []
    private(set) var sawHeaders = false
    /// Judged, or given up (its connection is being dropped): later frames change nothing.
    private(set) var isComplete = false

    init() {}

    /// Takes one frame of the stream. Trailers are read for END_STREAM only, as before.
    mutating func receive(_ payload: HTTP2Frame.FramePayload) -> Progress {
        var progress = Progress()
        switch payload {
        case .headers(let frame):
            if !sawHeaders {
                sawHeaders = true
                progress.began = true
                for field in frame.headers {
                    switch field.name {
                    case ":method": method = field.value
                    case ":path": path = field.value
                    case _ where field.name.hasPrefix(":"): break
                    default: headers.append((field.name, field.value))
                    }
                }
            }
            progress.completed = frame.endStream && finish()
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data {
                let room = MockAPNsRecorder.maxRecordedBodyBytes - body.count
                if room > 0 { body.append(contentsOf: buffer.readableBytesView.prefix(room)) }
            }
            progress.completed = frame.endStream && finish()
        default:
            break
        }
        return progress
    }

    /// The stream is given up (a dropped connection): no END_STREAM will complete it.
    mutating func abandon() { isComplete = true }

    /// Frees the headers and body once judged and recorded: the stream stays open until
    /// its answer is written, and only needs to be known as open until then.
    mutating func release() {
        headers = []
        body = []
    }

    private mutating func finish() -> Bool {
        guard !isComplete else { return false }
        isComplete = true
        return true
    }

    var request: MockAPNsRequest { MockAPNsRequest(method: method, path: path, headers: headers, body: body) }
}

/// Inbound flow control, which the frame-mode HTTP/2 handler leaves to its user (the
/// stream multiplexer the mock used before did it): top a window back up to `target`
/// once it has fallen to half of it, as nio-http2's own window manager does.
enum MockAPNsInboundWindow {
    /// The WINDOW_UPDATE increment for a window now at `windowSize`, nil while it is above half of `target`.
    static func increment(windowSize: Int, target: Int) -> Int? {
        guard windowSize < target else { return nil }
        if windowSize < 0 { return min(-windowSize + target, Int(Int32.max)) }
        let increment = target - windowSize
        return increment >= windowSize ? increment : nil
    }
}

/// The ids the mock makes up.
enum MockAPNsIDs {
    /// A version 4 UUID in lowercase, as APNs generates when a request has no `apns-id`.
    static func randomUUID() -> String {
        // Two 64-bit draws rather than sixteen byte draws: each draw may be a getrandom(2) call.
        var generator = SystemRandomNumberGenerator()
        let (high, low) = (generator.next(), generator.next())
        var bytes = (0..<16).map { i in UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> UInt64(8 * (i % 8))) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
