import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import Logging

// How the service words its failures: a refusal of the rules, the store or the
// sink as the RPC status and details the caller gets. Static, with what it
// needs passed in, so a call's callbacks capture those and not the whole service.
extension ActivityService {
    /// Maps a refusal to its status; anything unexpected is logged and reported without its text.
    static func rpcError(_ error: any Error, call: String, quotas: QuotaGate, logger: Logger) -> RPCError {
        switch error {
        case let error as RPCError:
            return error
        case let error as DomainError:
            var details = ErrorDetails(reason: error.reason)
            if case let .invalidField(field, detail) = error, !field.isEmpty {
                details.fieldViolations = [FieldViolation(field: field, description: detail)]
            }
            switch error.code {
            case .invalidArgument: return RPCError(.invalidArgument, error.message, details: details)
            case .notFound: return RPCError(.notFound, error.message, details: details)
            case .alreadyExists: return RPCError(.alreadyExists, error.message, details: details)
            case .failedPrecondition: return RPCError(.failedPrecondition, error.message, details: details)
            case .resourceExhausted:
                if case let .quotaExceeded(appID, quota) = error { quotas.refusedByRule(appID: appID, quota) }
                // The counts are read again after this long: the earliest a removal elsewhere can show.
                details.retryAfterMS = UInt32(clamping: quotas.refreshInterval.nanoseconds / 1_000_000)
                return RPCError(.resourceExhausted, error.message, details: details)
            }
        case let error as DeliveryDeadlineExceeded:
            let a = error.account
            return RPCError(
                .deadlineExceeded,
                "deadline passed with \(a.queued) of \(a.total) pushes not final (delivered \(a.delivered), failed \(a.failed), "
                    + "pruned \(a.pruned), superseded \(a.superseded), expired \(a.expired)); the call itself took effect",
                details: ErrorDetails(reason: "DeliveryIncomplete"))
        case ActivityStoreError.closed:
            return RPCError(.unavailable, "the store is closed (server shutting down)")
        case let ActivityStoreError.unavailable(what):
            // Nothing was committed: the same call may be sent again (with its idempotency key, as always).
            logger.warning("store unavailable", metadata: ["call": "\(call)", "error": "\(what)"])
            return RPCError(
                .unavailable, "\(call) was not applied: the store did not answer in time; send it again",
                details: ErrorDetails(retryAfterMS: 1_000, reason: ActivityStoreError.unavailableReason))
        case let ActivityStoreError.outcomeUnknown(what):
            // UNAVAILABLE alone promises that nothing happened (PROTOCOL.md, section 7):
            // the reason withdraws that promise, and clients resend only with the same idempotency key.
            logger.warning("store outcome unknown", metadata: ["call": "\(call)", "error": "\(what)"])
            return RPCError(
                .unavailable,
                "\(call) may or may not have taken effect (the store lost track of its commit); "
                    + "resend it with the same idempotency key to learn its outcome",
                details: ErrorDetails(reason: ErrorDetails.outcomeUnknownReason))
        default:
            logger.error("store failure", metadata: ["call": "\(call)", "error": "\(error)"])
            return RPCError(.internal, "internal error in \(call)")
        }
    }
}
