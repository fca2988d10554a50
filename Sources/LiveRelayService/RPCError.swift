import LiveRelayMessages
import LiveRelayWire

/// A failed call as the caller will see it: a status code, a message for
/// people and details for programs (which field, which reason, when to retry).
public struct RPCError: Error, Hashable, Sendable, CustomStringConvertible {
    public var status: StatusCode
    public var message: String
    public var details: ErrorDetails

    public init(_ status: StatusCode, _ message: String, details: ErrorDetails = ErrorDetails()) {
        self.status = status
        self.message = message
        self.details = details
        // Every INVALID_ARGUMENT carries a reason (docs/PROTOCOL.md, section 7): a request
        // the rules refuse is `InvalidField` unless its maker named another (`PayloadTooLarge`).
        if status == .invalidArgument && details.reason.isEmpty { self.details.reason = Self.invalidFieldReason }
    }

    public static let invalidFieldReason = "InvalidField"

    /// INVALID_ARGUMENT naming the field that failed validation.
    public init(_ error: MessageError) {
        self.init(
            .invalidArgument,
            error.description,
            details: ErrorDetails(fieldViolations: [error.fieldViolation])
        )
    }

    public var description: String { "\(status): \(message)" }
}
