import LiveRelayMessages
import LiveRelayService
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// Every app's priority-10 budget: sends per hour per activity and per
/// channel, as the tenant runtime resolves them from the registry (an app's
/// `quotas.priority_budget_per_hour` over the server's default).
///
/// Unset means no guard: Apple publishes no number, and a guessed default
/// would downgrade pushes an app has every right to send.
public struct PriorityBudgets: Hashable, Sendable {
    /// The budget of apps without their own; nil: no guard.
    public var defaultPerHour: Int?
    /// Apps' own budgets over the default: a number, or nil to lift the
    /// default for that app. Apps not in it have the default.
    public var perApp: [String: Int?]

    public init(defaultPerHour: Int? = nil, perApp: [String: Int?] = [:]) {
        self.defaultPerHour = defaultPerHour
        self.perApp = perApp
    }

    /// The budget `appID` has; nil: no guard.
    public func budget(of appID: String) -> Int? {
        perApp[appID] ?? defaultPerHour
    }
}

/// The ``PriorityBudgetLedger`` as the service uses it from every event
/// loop: one lock around the value, the monotonic clock, the budgets, the
/// counters `liverelay_priority_downgraded_total{app}` and
/// `liverelay_priority_refused_total{app}`, and the refusal's RPC error.
///
/// A call asks ``decide(appID:activityID:channelID:priority:strict:)`` before
/// it is accepted and, once it is, tells ``record(appID:activityID:channelID:priority:)``
/// the priority it is sent at. The two are apart on purpose (a call refused
/// later, by a rule or the store, must not spend the budget), so two calls of
/// one activity deciding at the same moment can both pass at the last slot:
/// the budget may be passed by the calls in flight at once, which for one
/// activity is rarely more than one.
public final class PriorityBudgetGate: Sendable {
    /// The reason of a refusal's ErrorDetails.
    public static let refusalReason = "PriorityBudgetExhausted"

    private let ledger = NIOLockedValueBox(PriorityBudgetLedger())
    private let settings: NIOLockedValueBox<PriorityBudgets>
    private let metrics = MetricHandlers()
    private let uptime: @Sendable () -> Duration

    /// - Parameter uptime: the monotonic clock; tests pass one they move.
    public init(
        budgets: PriorityBudgets = PriorityBudgets(),
        uptime: @escaping @Sendable () -> Duration = { .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds)) }
    ) {
        settings = NIOLockedValueBox(budgets)
        self.uptime = uptime
    }

    /// The budgets; a change applies from the next call on (the counts stay).
    public var budgets: PriorityBudgets {
        get { settings.withLockedValue { $0 } }
        set { settings.withLockedValue { $0 = newValue } }
    }

    /// The decision for a push at `priority` of the app's activity (and
    /// channel), counted in the metrics when it downgrades or refuses.
    public func decide(appID: String, activityID: String?, channelID: String?, priority: Int, strict: Bool) -> PriorityDecision {
        let budget = settings.withLockedValue { $0.budget(of: appID) }
        // Nothing to track without a budget or below priority 10: no lock taken.
        guard budget != nil, priority == 10 else { return .send(priority: priority) }
        let now = uptime()
        let decision = ledger.withLockedValue {
            $0.decide(
                app: appID, activityID: activityID, channelID: channelID, priority: priority, budget: budget, strict: strict, now: now)
        }
        switch decision {
        case .send: break
        case .downgrade: metrics.counter("liverelay_priority_downgraded_total", app: appID).increment()
        case .refuse: metrics.counter("liverelay_priority_refused_total", app: appID).increment()
        }
        return decision
    }

    /// Counts an accepted push sent at `priority` (only priority 10 counts).
    public func record(appID: String, activityID: String?, channelID: String?, priority: Int) {
        let budget = settings.withLockedValue { $0.budget(of: appID) }
        guard budget != nil, priority == 10 else { return }
        let now = uptime()
        ledger.withLockedValue {
            $0.record(app: appID, activityID: activityID, channelID: channelID, priority: priority, budget: budget, now: now)
        }
    }

    /// Forgets what left the window, every table at once: for a timer, since
    /// the calls' own sweeping stops when the calls do.
    @discardableResult
    public func sweep() -> Int {
        let now = uptime()
        return ledger.withLockedValue { $0.sweep(now: now) }
    }

    /// Keys tracked (tests, diagnostics).
    public var trackedKeys: Int { ledger.withLockedValue { $0.trackedKeys } }

    /// The error of a ``PriorityDecision/refuse(retryAfterMS:)``.
    public static func rpcError(appID: String, retryAfterMS: UInt32) -> RPCError {
        RPCError(
            .resourceExhausted,
            "app \"\(appID)\" has used the priority-10 budget of this activity or channel for the last hour; "
                + "send at priority 5, or retry after \(retryAfterMS) ms",
            details: ErrorDetails(retryAfterMS: retryAfterMS, reason: refusalReason))
    }
}

/// Forgets the priority-10 sends that left the hour, every `interval` until
/// graceful shutdown: the calls sweep as they come, but an idle server would
/// otherwise keep its last hour's keys for good.
public struct PriorityBudgetSweeper: Service {
    private let gate: PriorityBudgetGate
    private let interval: Duration

    public init(gate: PriorityBudgetGate, every interval: Duration = .seconds(60)) {
        self.gate = gate
        self.interval = interval
    }

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    try await Task.sleep(for: interval)
                    gate.sweep()
                }
            }
        } catch is CancellationError {
            // Graceful shutdown.
        }
    }
}
