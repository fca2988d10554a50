import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// The ``QuotaLedger`` as the service uses it from every event loop: one
/// lock around the value, the monotonic clock, the refusal counter
/// `liverelay_quota_refused_total{app, quota}`, and the RPC errors.
///
/// Every check is a dictionary lookup and a little arithmetic under the lock,
/// before the call reaches the store: a tenant over its quota costs the
/// others nothing but that.
public final class QuotaGate: Sendable {
    private let ledger: NIOLockedValueBox<QuotaLedger>
    private let metrics = MetricHandlers()
    private let uptime: @Sendable () -> NIODeadline
    /// How often ``QuotaUsageRefresher`` reads the store's counts: the hint a count refusal carries.
    public let refreshInterval: TimeAmount

    /// - Parameters:
    ///   - apps: the configured app ids, whose counts are read from the first refresh on.
    ///   - uptime: the monotonic clock; tests pass one they move.
    public init(
        settings: QuotaSettings = QuotaSettings(), apps: [String] = [], refreshInterval: TimeAmount = .seconds(2),
        uptime: @escaping @Sendable () -> NIODeadline = { .now() }
    ) {
        var ledger = QuotaLedger(settings: settings)
        ledger.track(apps)
        self.ledger = NIOLockedValueBox(ledger)
        self.refreshInterval = refreshInterval
        self.uptime = uptime
    }

    /// The apps whose store counts are read from the next refresh on (the registry's apps).
    public func track(apps: [String]) {
        ledger.withLockedValue { $0.track(apps) }
    }

    public var settings: QuotaSettings {
        get { ledger.withLockedValue { $0.settings } }
        set { ledger.withLockedValue { $0.settings = newValue } }
    }

    /// What ``admitCall(appID:pushes:adding:)`` decided.
    public enum CallAdmission: Sendable {
        case refused(RPCError)
        /// Admitted; `countQuota` is the count quota the call's addition would
        /// break, nil while the app is below it (or the call adds nothing).
        case admitted(countQuota: CountQuota?)
    }

    /// The call's rate and, for calls that push, the app's pushes of the last
    /// hour (one call taken from the app's bucket when admitted); for a call
    /// that adds a token or a live activity, also the count quota the rule
    /// needs. One hold of the lock for both: every event loop's calls take it,
    /// so each hold is a cache line another core wrote last.
    public func admitCall(appID: String, pushes: Bool, adding kind: CountQuota.Kind?) -> CallAdmission {
        let now = uptime()
        let (refusal, countQuota): (QuotaRefusal?, CountQuota?) = ledger.withLockedValue { ledger in
            if let refusal = ledger.admitCall(appID: appID, pushes: pushes, now: now) { return (refusal, nil) }
            return (nil, kind.flatMap { Self.countQuota($0, appID: appID, in: &ledger) })
        }
        guard let refusal else { return .admitted(countQuota: countQuota) }
        counter(appID: appID, kind: refusal.kind).increment()
        return .refused(Self.rpcError(refusal, appID: appID))
    }

    /// The quota a call adding a token or live activity would break, for the
    /// rule to refuse such an addition; nil while the app is below it.
    private static func countQuota(_ kind: CountQuota.Kind, appID: String, in ledger: inout QuotaLedger) -> CountQuota? {
        // An app seen with a count quota (on a server whose apps are not all known) is read from then on.
        if ledger.settings.quota(of: appID).countsInStore { ledger.track(CollectionOfOne(appID)) }
        return ledger.countQuota(kind, appID: appID)
    }

    /// The store accepted a call: what it added and what it will push.
    public func accepted(appID: String, pushes: Int, added: CountQuota.Kind?) {
        let now = uptime()
        ledger.withLockedValue { ledger in
            ledger.chargePushes(appID: appID, count: pushes, now: now)
            if let added { ledger.noteAdded(added, appID: appID) }
        }
    }

    /// A rule refused an addition over a count quota: counted like the other refusals.
    public func refusedByRule(appID: String, _ quota: CountQuota) {
        counter(appID: appID, kind: quota.kind == .tokens ? .tokens : .liveActivities).increment()
    }

    /// Reads the counts of every app with a count quota from the store.
    public func refresh(from store: any ActivityStore, now: UnixTime, on eventLoop: any EventLoop) async throws {
        let due = ledger.withLockedValue { $0.readStarting() }
        guard !due.isEmpty else { return }
        let usage = try await store.usage(of: due, now: now, on: eventLoop).get()
        ledger.withLockedValue { $0.noteStored(usage) }
    }

    /// What `appID` uses as this node sees it (tests, diagnostics, app stats).
    public func usage(of appID: String) -> (pushesLastHour: Int, counts: AppUsage) {
        let now = uptime()
        return ledger.withLockedValue { $0.usage(of: appID, now: now) }
    }

    static func rpcError(_ refusal: QuotaRefusal, appID: String) -> RPCError {
        let details = ErrorDetails(retryAfterMS: UInt32(clamping: refusal.retryAfterMS), reason: refusal.kind.rawValue)
        let message: String
        switch refusal.kind {
        case .callRate:
            message =
                "app \"\(appID)\" is over its call rate (\(Self.format(refusal.limit)) calls per second on this node); "
                + "retry after \(refusal.retryAfterMS) ms"
        case .pushesPerHour:
            message =
                "app \"\(appID)\" has used its push quota (\(Int(refusal.limit)) pushes in the last hour on this node); "
                + "retry after \(refusal.retryAfterMS) ms"
        case .tokens, .liveActivities:
            message = "app \"\(appID)\" is over its \(refusal.kind.rawValue) quota"
        }
        return RPCError(.resourceExhausted, message, details: details)
    }

    private static func format(_ rate: Double) -> String {
        rate == rate.rounded() ? String(Int(rate)) : String((rate * 100).rounded() / 100)
    }

    private func counter(appID: String, kind: QuotaKind) -> Counter {
        metrics.counter("liverelay_quota_refused_total", app: appID, [("quota", kind.label)])
    }
}

extension QuotaKind {
    /// The metric's label value.
    var label: String {
        switch self {
        case .callRate: "calls_per_second"
        case .pushesPerHour: "pushes_per_hour"
        case .tokens: "max_tokens"
        case .liveActivities: "max_live_activities"
        }
    }
}

/// Reads the store's counts for the count quotas every
/// ``QuotaGate/refreshInterval`` (and once at start), until graceful
/// shutdown. Between reads each node adds what it stored itself, so a node
/// is exact about its own additions and late by at most one interval about
/// the other nodes'.
public struct QuotaUsageRefresher: Service {
    private let gate: QuotaGate
    private let store: any ActivityStore
    private let clock: any WallClock
    private let logger: Logger
    private let eventLoop: any EventLoop

    public init(gate: QuotaGate, store: any ActivityStore, clock: any WallClock, logger: Logger, on eventLoop: any EventLoop) {
        self.gate = gate
        self.store = store
        self.clock = clock
        self.logger = logger
        self.eventLoop = eventLoop
    }

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    do {
                        try await gate.refresh(from: store, now: clock.now(), on: eventLoop)
                    } catch {
                        logger.warning("cannot read the apps' counts for their quotas", metadata: ["error": "\(error)"])
                    }
                    try await Task.sleep(nanoseconds: UInt64(gate.refreshInterval.nanoseconds))
                }
            }
        } catch is CancellationError {
            // Graceful shutdown.
        }
    }
}
