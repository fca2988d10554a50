/// Why the bytes from a peer cannot be read as frames.
///
/// Every case is a connection error: after one, the byte stream cannot be
/// trusted to be aligned on frame boundaries, so the receiver sends GOAWAY
/// with `goAwayCode` and `reason` and reads no further frames.
public enum FrameDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The first bytes were not "LRPC\r\n\u{1a}\n"; `received` holds what came, up to the first mismatch.
    case badPreface(received: [UInt8])
    /// The header announced more payload than the receiver accepts. Detected
    /// from the header alone, so the payload is never buffered.
    case frameTooLarge(type: UInt8, length: UInt32, limit: UInt32)
    /// A type byte outside 0x01...0x09. Not skipped: extensions use versions and settings.
    case unknownFrameType(UInt8)
    /// A connection-level frame with a non-zero id, or a request-level frame with id 0.
    case wrongKindOfRequestID(FrameType, RequestID)
    /// A known frame type whose payload breaks its layout.
    case malformedPayload(FrameType, reason: String)
    /// The connection ended inside a frame (or inside the preface).
    case truncated(bufferedBytes: Int)

    /// The GOAWAY code this error is reported with.
    public var goAwayCode: GoAwayCode {
        switch self {
        case .frameTooLarge: return .frameSizeError
        case .badPreface, .unknownFrameType, .wrongKindOfRequestID, .malformedPayload, .truncated:
            return .protocolError
        }
    }

    /// The GOAWAY reason: specific enough that the peer's developer can find the bug.
    public var description: String {
        switch self {
        case .badPreface(let received):
            return "bad connection preface: expected 4C 52 50 43 0D 0A 1A 0A (LRPC\\r\\n\\x1a\\n), got "
                + received.map { hexByte($0) }.joined(separator: " ")
                + Self.prefaceHint(received)
        case .frameTooLarge(let type, let length, let limit):
            let name = FrameType(rawValue: type).map { "\($0)" } ?? "type 0x\(hexByte(type))"
            return "\(name) frame of \(length) bytes exceeds the limit of \(limit) bytes"
        case .unknownFrameType(let type):
            return "unknown frame type 0x\(hexByte(type))"
        case .wrongKindOfRequestID(let type, let id):
            if type.isRequestLevel {
                return "\(type) frame with request id 0 (request-level frames need an id >= 1)"
            }
            return "\(type) frame with request id \(id) (connection-level frames carry id 0)"
        case .malformedPayload(let type, let reason):
            return "malformed \(type) frame: \(reason)"
        case .truncated(let bufferedBytes):
            return "connection closed inside a frame (\(bufferedBytes) bytes of it received)"
        }
    }

    private static func prefaceHint(_ received: [UInt8]) -> String {
        guard let first = received.first else { return "" }
        if first == 0x16 { return " (a TLS ClientHello: is the server running without TLS?)" }
        if (0x41...0x5A).contains(first) { return " (text: an HTTP request or a plaintext protocol?)" }
        return ""
    }
}

@usableFromInline
func hexByte(_ byte: UInt8) -> String {
    let digits: [Character] = Array("0123456789ABCDEF")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
}
