import NIOCore

@testable import LiveRelayWire

/// Bytes from a hex string; spaces, newlines and `|` separators are ignored.
func hex(_ string: String) -> [UInt8] {
    let digits = string.filter { $0.isHexDigit }
    precondition(digits.count % 2 == 0, "odd number of hex digits")
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        bytes.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { hexByte($0) }.joined(separator: " ")
}

func buffer(_ bytes: [UInt8]) -> ByteBuffer {
    ByteBuffer(bytes: bytes)
}

func buffer(_ string: String) -> ByteBuffer {
    ByteBuffer(string: string)
}

func encoded(_ frames: Frame...) -> [UInt8] {
    encoded(frames)
}

func encoded(_ frames: [Frame]) -> [UInt8] {
    var out = ByteBuffer()
    let encoder = FrameEncoder()
    for frame in frames {
        encoder.encode(frame, into: &out)
    }
    return Array(out.readableBytesView)
}

/// Feeds `chunks` to a decoder and returns every frame, or the first error.
func decodeAll(
    _ chunks: [[UInt8]],
    expectPreface: Bool = false,
    maxFrameSize: UInt32 = Setting.defaultMaxFrameSize
) -> (frames: [Frame], error: FrameDecodingError?) {
    var decoder = FrameDecoder(expectPreface: expectPreface, maxFrameSize: maxFrameSize)
    var frames: [Frame] = []
    do {
        for chunk in chunks {
            decoder.append(buffer(chunk))
            while let frame = try decoder.nextFrame() {
                frames.append(frame)
            }
        }
        try decoder.finish()
    } catch {
        return (frames, error)
    }
    return (frames, nil)
}

/// The bytes a list of actions writes, to compare with what the peer gets back.
func writtenBytes(_ actions: [ServerConnectionStateMachine.Action]) -> [UInt8] {
    encoded(actions.compactMap { if case .write(let frame) = $0 { return frame } else { return nil } })
}

func t(_ milliseconds: Int64) -> NIODeadline {
    .uptimeNanoseconds(UInt64(1_000_000_000 + milliseconds * 1_000_000))
}

let pingMethod = "/liverelay.v1.LiveRelay/Ping"

func request(
    _ id: RequestID, timeout: UInt32 = 0, method: String = pingMethod, payload: [UInt8] = [0x0A, 0x01, 0x78]
)
    -> Frame
{
    .request(id, Frame.Request(timeoutMilliseconds: timeout, method: method, payload: buffer(payload)))
}

func errorFrame(_ id: RequestID, _ status: StatusCode, _ message: String) -> Frame {
    .error(id, Frame.RequestError(status: status, message: message))
}

func goAwayFrame(_ last: RequestID, _ code: GoAwayCode, _ reason: String) -> Frame {
    .goAway(Frame.GoAway(lastRequestID: last, code: code, reason: reason))
}
