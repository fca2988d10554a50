/// A client-chosen number that ties a reply to its request.
///
/// A dedicated type keeps request ids from being mixed up with lengths, codes
/// and other `UInt32` fields of the same frames. Id 0 is reserved for
/// connection-level frames, so a request id is never 0; ids on a connection
/// strictly increase, which lets the server detect a reused id with one
/// comparison instead of remembering every id it has seen.
public struct RequestID: RawRepresentable, Hashable, Comparable, Sendable, ExpressibleByIntegerLiteral,
    CustomStringConvertible
{
    public var rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    public init(_ rawValue: UInt32) {
        self.rawValue = rawValue
    }

    public init(integerLiteral value: UInt32) {
        self.rawValue = value
    }

    /// The id of connection-level frames (HELLO, WELCOME, PING, PONG, GOAWAY),
    /// and the `last_request_id` of a GOAWAY sent before any request was seen.
    public static let connection = RequestID(0)

    /// The last id a client may use; a client that reaches it opens a new connection.
    public static let max = RequestID(UInt32.max)

    public var isConnectionLevel: Bool { self.rawValue == 0 }

    public static func < (lhs: RequestID, rhs: RequestID) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    public var description: String { String(self.rawValue) }
}
