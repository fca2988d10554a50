import LiveRelayMessages
import LiveRelayService
import Metrics
import NIOConcurrencyHelpers
import NIOCore

/// The ``AdmissionController`` as the service uses it from every event loop:
/// one lock around the value, the monotonic clock, and the refusal counter
/// `liverelay_admission_refused_total{app, reason}`.
///
/// The lock is held for a dictionary update, twice per call (admit, finish),
/// far less than the call's decoding; a refusal is decided without touching
/// the store or the sink, so an app over its limit is answered at once.
public final class AdmissionGate: Sendable {
    private let controller: NIOLockedValueBox<AdmissionController>
    private let metrics = MetricHandlers()
    private let uptime: @Sendable () -> NIODeadline

    /// - Parameters:
    ///   - uptime: the monotonic clock deadlines are on; tests pass one they move.
    public init(limits: AdmissionLimits = AdmissionLimits(), uptime: @escaping @Sendable () -> NIODeadline = { .now() }) {
        self.controller = NIOLockedValueBox(AdmissionController(limits: limits))
        self.uptime = uptime
    }

    public var limits: AdmissionLimits { controller.withLockedValue { $0.limits } }

    /// The controller's state now (tests and diagnostics).
    public var snapshot: AdmissionController { controller.withLockedValue { $0 } }

    /// The ticket of an admitted call, or the RPC error the caller gets.
    public func admit(appID: String, deadline: NIODeadline?) -> Result<AdmissionTicket, RPCError> {
        let now = uptime()
        let decision = controller.withLockedValue { $0.admit(appID: appID, deadline: deadline, now: now) }
        switch decision {
        case let .success(ticket):
            return .success(ticket)
        case let .failure(refusal):
            counter(appID: appID, reason: refusal.reason).increment()
            return .failure(Self.rpcError(refusal, appID: appID))
        }
    }

    /// The call's store write is answered and its pushes handed on: its slot is free.
    public func finish(_ ticket: AdmissionTicket) {
        let now = uptime()
        controller.withLockedValue { $0.finish(ticket, now: now) }
    }

    /// RESOURCE_EXHAUSTED over a limit (retry later, and slower), UNAVAILABLE for a
    /// deadline that cannot be met (the call was not processed; a longer deadline or
    /// a retry after the hint may succeed). Both say nothing was done.
    static func rpcError(_ refusal: AdmissionRefusal, appID: String) -> RPCError {
        let details = ErrorDetails(retryAfterMS: refusal.retryAfterMS, reason: refusal.reason.rawValue)
        switch refusal.reason {
        case .appOverloaded:
            return RPCError(
                .resourceExhausted,
                "app \"\(appID)\" has \(refusal.inFlight) calls in progress, its limit is \(refusal.limit) now; "
                    + "retry after \(refusal.retryAfterMS) ms",
                details: details)
        case .serverOverloaded:
            return RPCError(
                .resourceExhausted,
                "the server has \(refusal.inFlight) calls in progress, its limit is \(refusal.limit); "
                    + "retry after \(refusal.retryAfterMS) ms",
                details: details)
        case .deadlineUnreachable:
            let remaining = refusal.remaining.map { "\(max(0, $0.nanoseconds / 1_000_000)) ms" } ?? "no time"
            let estimate = refusal.estimate.map { "\($0.nanoseconds / 1_000_000) ms" } ?? "unknown"
            return RPCError(
                .unavailable,
                "the call's deadline leaves \(remaining), calls currently take about \(estimate) to be answered; it was not processed",
                details: details)
        }
    }

    private func counter(appID: String, reason: AdmissionRefusal.Reason) -> Counter {
        metrics.counter("liverelay_admission_refused_total", app: appID, [("reason", reason.rawValue)])
    }
}
