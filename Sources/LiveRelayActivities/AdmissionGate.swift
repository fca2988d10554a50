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
///
/// A flood is mostly refusals of one app for one reason with the same figures,
/// so each (app, reason) keeps its counter and its last answer: a refusal whose
/// figures did not change reuses that answer instead of looking the counter up
/// by its labels and formatting the message again (together most of a
/// refusal's cost in the service).
public final class AdmissionGate: Sendable {
    private struct State {
        var controller: AdmissionController
        var refusals: [RefusalKey: RecentRefusal] = [:]
    }

    private struct RefusalKey: Hashable {
        var appID: String
        var reason: AdmissionRefusal.Reason
    }

    /// The figures a refusal's answer quotes, and that answer.
    private struct RecentRefusal {
        let counter: Counter
        let figures: Figures
        let error: RPCError
    }

    /// What ``rpcError(_:appID:)`` quotes, as it quotes it: equal figures, equal answers.
    private struct Figures: Equatable {
        var inFlight: Int
        var limit: Int
        var retryAfterMS: UInt32
        /// Quoted by `deadlineUnreachable` only, in whole milliseconds; nil for the other reasons.
        var remainingMS: Int64?
        var estimateMS: Int64?

        init(_ refusal: AdmissionRefusal) {
            inFlight = refusal.inFlight
            limit = refusal.limit
            retryAfterMS = refusal.retryAfterMS
            guard refusal.reason == .deadlineUnreachable else { return }
            remainingMS = refusal.remaining.map { max(0, $0.nanoseconds / 1_000_000) }
            estimateMS = refusal.estimate.map { $0.nanoseconds / 1_000_000 }
        }
    }

    /// The most (app, reason) pairs kept: every app of a bounded metric label set, each
    /// refused for any reason. Past it, refusals of further pairs are answered uncached.
    static let maxRecentRefusals = (MetricHandlers.maxApps + 1) * AdmissionRefusal.Reason.allCases.count

    private let state: NIOLockedValueBox<State>
    private let metrics: MetricHandlers
    private let uptime: @Sendable () -> NIODeadline

    /// - Parameters:
    ///   - uptime: the monotonic clock deadlines are on; tests pass one they move.
    ///   - metricsFactory: where the refusal counters are made; nil: the bootstrapped system.
    public init(
        limits: AdmissionLimits = AdmissionLimits(), uptime: @escaping @Sendable () -> NIODeadline = { .now() },
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.state = NIOLockedValueBox(State(controller: AdmissionController(limits: limits)))
        self.uptime = uptime
        self.metrics = MetricHandlers(factory: metricsFactory)
    }

    public var limits: AdmissionLimits { state.withLockedValue { $0.controller.limits } }

    /// The controller's state now (tests and diagnostics).
    public var snapshot: AdmissionController { state.withLockedValue { $0.controller } }

    /// The (app, reason) pairs whose last refusal is kept (tests).
    var recentRefusalCount: Int { state.withLockedValue { $0.refusals.count } }

    /// The ticket of an admitted call, or the RPC error the caller gets.
    public func admit(appID: String, deadline: NIODeadline?) -> Result<AdmissionTicket, RPCError> {
        let now = uptime()
        let decision = state.withLockedValue { state -> Decision in
            switch state.controller.admit(appID: appID, deadline: deadline, now: now) {
            case let .success(ticket):
                return .admitted(ticket)
            case let .failure(refusal):
                let (counter, error) = Self.answer(refusal, appID: appID, state: &state, metrics: metrics)
                return .refused(counter, error)
            }
        }
        switch decision {
        case let .admitted(ticket):
            return .success(ticket)
        case let .refused(counter, error):
            // Counted once the other event loops may take the lock again.
            counter.increment()
            return .failure(error)
        }
    }

    private enum Decision {
        case admitted(AdmissionTicket)
        case refused(Counter, RPCError)
    }

    /// The refusal's counter and answer: the answer kept for its app and reason when it
    /// quotes the same figures, else a new one, kept for the next.
    private static func answer(
        _ refusal: AdmissionRefusal, appID: String, state: inout State, metrics: MetricHandlers
    ) -> (Counter, RPCError) {
        let key = RefusalKey(appID: appID, reason: refusal.reason)
        let figures = Figures(refusal)
        let kept = state.refusals[key]
        let counter =
            kept?.counter ?? metrics.counter("liverelay_admission_refused_total", app: appID, [("reason", refusal.reason.rawValue)])
        if let kept, kept.figures == figures { return (counter, kept.error) }
        let error = rpcError(refusal, appID: appID)
        if kept != nil || state.refusals.count < maxRecentRefusals {
            state.refusals[key] = RecentRefusal(counter: counter, figures: figures, error: error)
        }
        return (counter, error)
    }

    /// The call's store write is answered and its pushes handed on: its slot is free.
    public func finish(_ ticket: AdmissionTicket) {
        let now = uptime()
        state.withLockedValue { $0.controller.finish(ticket, now: now) }
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
}
