/// The kind of a frame, the byte at offset 4 of its header.
///
/// Control frames have their own types (rather than riding in a metadata
/// block as in brpc) so a receiver knows from the 10-byte header alone what
/// the payload is, how large it may be and which kind of id it must carry.
public enum FrameType: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case hello = 0x01
    case welcome = 0x02
    case request = 0x03
    case response = 0x04
    case error = 0x05
    case cancel = 0x06
    case ping = 0x07
    case pong = 0x08
    case goAway = 0x09

    /// Request-level frames name a request (id ≥ 1); connection-level frames carry id 0.
    /// Checked from the header so a misrouted frame fails before its payload is buffered.
    public var isRequestLevel: Bool {
        switch self {
        case .request, .response, .error, .cancel: return true
        case .hello, .welcome, .ping, .pong, .goAway: return false
        }
    }

    public var description: String {
        switch self {
        case .hello: return "HELLO"
        case .welcome: return "WELCOME"
        case .request: return "REQUEST"
        case .response: return "RESPONSE"
        case .error: return "ERROR"
        case .cancel: return "CANCEL"
        case .ping: return "PING"
        case .pong: return "PONG"
        case .goAway: return "GOAWAY"
        }
    }
}
