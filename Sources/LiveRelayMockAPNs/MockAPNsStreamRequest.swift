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

/// The ids the mock makes up.
enum MockAPNsIDs {
    /// A version 4 UUID in lowercase, as APNs generates when a request has no `apns-id`.
    static func randomUUID() -> String {
        var generator = SystemRandomNumberGenerator()
        return randomUUID(using: &generator)
    }

    /// The same from `generator`: a connection draws from its own ``Generator`` so that an id
    /// costs no getrandom(2) call (two per push were 3% of the mock's CPU under h2load).
    /// Written straight into the string's storage: it runs for every push without an id.
    static func randomUUID<G: RandomNumberGenerator>(using generator: inout G) -> String {
        var high: UInt64 = generator.next()
        var low: UInt64 = generator.next()
        high = (high & ~(0xF0 << 48)) | (0x40 << 48)  // byte 6: version 4
        low = (low & ~0xC0) | 0x80  // byte 8: the RFC 4122 variant
        return String(unsafeUninitializedCapacity: 36) { out in
            let hex: StaticString = "0123456789abcdef"
            var o = 0
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    out[o] = UInt8(ascii: "-")
                    o += 1
                }
                let byte = UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> UInt64(8 * (i % 8)))
                out[o] = hex.utf8Start[Int(byte >> 4)]
                out[o + 1] = hex.utf8Start[Int(byte & 0x0F)]
                o += 2
            }
            return o
        }
    }

    /// xoshiro256** seeded from the system's generator once per connection: ids need to be
    /// unique and unpredictable enough for a test peer, not secret.
    struct Generator: RandomNumberGenerator {
        private var state: (UInt64, UInt64, UInt64, UInt64)

        init() {
            var system = SystemRandomNumberGenerator()
            state = (system.next(), system.next(), system.next(), system.next())
            if state == (0, 0, 0, 0) { state.0 = 1 }  // the one state xoshiro never leaves
        }

        mutating func next() -> UInt64 {
            let result = rotate(state.1 &* 5, 7) &* 9
            let t = state.1 << 17
            state.2 ^= state.0
            state.3 ^= state.1
            state.1 ^= state.2
            state.0 ^= state.3
            state.2 ^= t
            state.3 = rotate(state.3, 45)
            return result
        }

        private func rotate(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
    }
}
