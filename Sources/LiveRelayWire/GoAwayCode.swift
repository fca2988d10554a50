/// Why a connection is ending, carried in a GOAWAY frame.
///
/// A struct rather than an enum: a newer peer may send a code this version
/// does not know, and the receiver must still act on the GOAWAY (the code is
/// informational; `last_request_id` drives what happens to calls).
public struct GoAwayCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// Graceful: the sender is shutting down or closing an idle connection on purpose.
    public static let noError = GoAwayCode(rawValue: 0)
    /// The peer broke a rule of the framing or of the connection's state.
    public static let protocolError = GoAwayCode(rawValue: 1)
    /// The sender failed in a way that is not the peer's fault.
    public static let internalError = GoAwayCode(rawValue: 2)
    /// A frame header announced a payload above the receiver's MAX_FRAME_SIZE.
    public static let frameSizeError = GoAwayCode(rawValue: 3)
    /// The HELLO's version range does not meet the server's.
    public static let unsupportedVersion = GoAwayCode(rawValue: 4)
    /// The HELLO's API key was not accepted.
    public static let unauthenticated = GoAwayCode(rawValue: 5)
    /// Nothing in flight and nothing received for IDLE_TIMEOUT.
    public static let idleTimeout = GoAwayCode(rawValue: 6)
    /// No HELLO arrived in time after the connection opened.
    public static let helloTimeout = GoAwayCode(rawValue: 7)
    /// The peer sent too many PINGs without doing any work.
    public static let enhanceYourCalm = GoAwayCode(rawValue: 8)
    /// The HELLO's API key is valid, but the key already has as many open
    /// connections as the server allows one key. Sent before WELCOME, so no
    /// request ran: a client retries later (after back-off, or once it has
    /// closed connections of its own), never on this connection.
    public static let tooManyConnections = GoAwayCode(rawValue: 9)

    public var description: String {
        switch self.rawValue {
        case 0: return "NO_ERROR"
        case 1: return "PROTOCOL_ERROR"
        case 2: return "INTERNAL_ERROR"
        case 3: return "FRAME_SIZE_ERROR"
        case 4: return "UNSUPPORTED_VERSION"
        case 5: return "UNAUTHENTICATED"
        case 6: return "IDLE_TIMEOUT"
        case 7: return "HELLO_TIMEOUT"
        case 8: return "ENHANCE_YOUR_CALM"
        case 9: return "TOO_MANY_CONNECTIONS"
        default: return "GOAWAY_CODE_\(self.rawValue)"
        }
    }
}
