import LiveRelayMessages
import LiveRelayWire
import NIOCore

/// A failed call: the server's answer, or the client's own verdict when no
/// answer could come (deadline, cancellation, connection loss, no server).
///
/// It says whether the call ran, because that, not the status alone, decides
/// whether resending is safe: a call that never reached the server may always
/// be resent, one whose connection broke mid-flight only if it is idempotent.
public struct LiveRelayClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Whether the server acted on the call, as far as the client can know.
    public enum Processing: Hashable, Sendable {
        /// The server did not process it: resending is safe.
        case notProcessed
        /// Unknown: resend only with the same idempotency key.
        case mayHaveBeenProcessed
        /// The server answered with the status.
        case answered
    }

    public var status: StatusCode
    public var message: String
    /// Field violations, retry-after and a machine-readable reason, when the server sent them.
    public var details: ErrorDetails
    public var processing: Processing

    public init(status: StatusCode, message: String, details: ErrorDetails = ErrorDetails(), processing: Processing) {
        self.status = status
        self.message = message
        self.details = details
        self.processing = processing
    }

    /// Whether the same request may be sent again as is, idempotent or not:
    /// it was certainly not processed (UNAVAILABLE), or the server asked for
    /// a later retry (RESOURCE_EXHAUSTED, ABORTED; see `details.retryAfterMS`).
    public var isRetryable: Bool {
        switch self.status {
        case .unavailable: return self.processing != .mayHaveBeenProcessed
        case .resourceExhausted, .aborted: return self.processing != .mayHaveBeenProcessed
        default: return false
        }
    }

    /// Whether an idempotent request (same idempotency key) may be sent again.
    public var isRetryableIfIdempotent: Bool {
        if self.isRetryable { return true }
        guard self.processing == .mayHaveBeenProcessed else { return false }
        switch self.status {
        case .unavailable, .internal, .deadlineExceeded, .cancelled: return true
        default: return false
        }
    }

    public var description: String { "\(self.status): \(self.message)" }

    init(_ failure: ClientConnectionStateMachine.CallFailure) {
        let details =
            failure.details.readableBytes == 0
            ? ErrorDetails()
            : ((try? ErrorDetails(serializedBytes: failure.details)) ?? ErrorDetails(reason: "undecodable ErrorDetails"))
        let processing: Processing
        switch failure.disposition {
        case .notProcessed where details.reason == ErrorDetails.outcomeUnknownReason:
            // The one UNAVAILABLE that is not "not processed": the server's store lost track of a commit.
            processing = .mayHaveBeenProcessed
        case .notProcessed: processing = .notProcessed
        case .mayHaveBeenProcessed: processing = .mayHaveBeenProcessed
        case .answered: processing = .answered
        }
        self.init(status: failure.status, message: failure.message, details: details, processing: processing)
    }
}
