import LiveRelayDomain
import NIOCore

/// What one app may use. `nil` is no limit.
///
/// Rates are per node: a deployment of N nodes gives each node
/// ``QuotaSettings/nodes`` and every node enforces its 1/N share, so the
/// whole deployment holds the quota within one share's burst, with no shared
/// counter on the call's path. Counts (tokens, live activities) are the
/// store's, shared by every node.
public struct AppQuota: Hashable, Sendable {
    /// RPC calls per second (RegisterToken, StartActivity, UpdateActivity,
    /// EndActivity), refilled continuously: a token bucket.
    public var callsPerSecond: Double?
    /// How many calls may come at once after a quiet spell: the bucket's size
    /// (default: one second's worth, at least 1).
    public var burst: Int?
    /// Pushes per sliding hour, counted by the targets of each accepted call.
    public var pushesPerHour: Int?
    /// Registered tokens of every kind.
    public var maxTokens: Int?
    /// Activities started and not yet ended or expired.
    public var maxLiveActivities: Int?
    /// Priority-10 sends per hour per activity and per channel, enforced by
    /// ``PriorityBudgetGate`` (not split over the nodes: an activity's calls
    /// are rarely spread over them). Unset by default: Apple publishes no
    /// number, and a guessed one would downgrade pushes an app may send.
    public var priorityBudgetPerHour: Int?

    public init(
        callsPerSecond: Double? = nil, burst: Int? = nil, pushesPerHour: Int? = nil, maxTokens: Int? = nil,
        maxLiveActivities: Int? = nil, priorityBudgetPerHour: Int? = nil
    ) {
        self.callsPerSecond = callsPerSecond
        self.burst = burst
        self.pushesPerHour = pushesPerHour
        self.maxTokens = maxTokens
        self.maxLiveActivities = maxLiveActivities
        self.priorityBudgetPerHour = priorityBudgetPerHour
    }

    /// No limit at all.
    public static let unlimited = AppQuota()

    /// What the Braze API allows its customers per workspace: the default of a production config.
    public static let defaultPushesPerHour = 250_000

    /// Whether the store's counts are needed at all.
    public var countsInStore: Bool { maxTokens != nil || maxLiveActivities != nil }
}

/// Every app's quota: the defaults, each app's overrides, and how many nodes share the rates.
public struct QuotaSettings: Hashable, Sendable {
    public var defaults: AppQuota
    /// An app's whole quota where it differs from ``defaults``.
    public var perApp: [String: AppQuota]
    /// Nodes serving the same apps: each enforces 1/`nodes` of every rate.
    public var nodes: Int

    public init(defaults: AppQuota = .unlimited, perApp: [String: AppQuota] = [:], nodes: Int = 1) {
        self.defaults = defaults
        self.perApp = perApp
        self.nodes = max(1, nodes)
    }

    public func quota(of appID: String) -> AppQuota {
        perApp[appID] ?? defaults
    }
}

/// Which quota refused a call, as `ErrorDetails.reason` and the metric's label.
public enum QuotaKind: String, Hashable, Sendable, CaseIterable {
    case callRate = "CallRateExceeded"
    case pushesPerHour = "PushQuotaExceeded"
    case tokens = "TokenQuotaExceeded"
    case liveActivities = "LiveActivityQuotaExceeded"
}

/// A call over a quota: which one, its limit on this node, and when to try again.
public struct QuotaRefusal: Hashable, Sendable {
    public var kind: QuotaKind
    /// The limit this node enforces (its share of a rate).
    public var limit: Double
    public var retryAfterMS: Int64
}

/// The quota rules as a value, on a monotonic clock the caller passes in, so
/// tests drive time by hand: a token bucket per app for calls, a sliding hour
/// of one-minute buckets per app for pushes, and the store's counts (with the
/// tokens and activities this node added since it last read them) for the
/// count quotas.
///
/// A call is admitted while the app's pushes of the last hour are below the
/// limit; its fan-out is charged once the store has resolved it (the targets
/// are not known before), so one call may overshoot the hour's limit by its
/// own fan-out, as a queue's capacity may be overshot (README, "queue_capacity").
public struct QuotaLedger: Sendable {
    public var settings: QuotaSettings

    struct Bucket: Sendable {
        var tokens: Double
        var refilledAt: NIODeadline
    }

    /// Pushes per minute over the last 60 minutes: a ring, minute `m` (since
    /// the clock's origin) at `counts[m % 60]`.
    struct Hour: Sendable {
        static let minutes = 60
        var counts = [Int](repeating: 0, count: Hour.minutes)
        /// The newest minute counted; older slots of the ring are the minutes before it.
        var latestMinute: Int64 = 0
        var total = 0

        mutating func advance(to minute: Int64) {
            guard minute > latestMinute else { return }
            let steps = min(Int64(Hour.minutes), minute - latestMinute)
            for step in 1...steps {
                let slot = Int((latestMinute + step) % Int64(Hour.minutes))
                total -= counts[slot]
                counts[slot] = 0
            }
            latestMinute = minute
        }

        mutating func add(_ pushes: Int, at minute: Int64) {
            advance(to: minute)
            counts[Int(minute % Int64(Hour.minutes))] += pushes
            total += pushes
        }

        /// Milliseconds from `now` until the oldest minute still counted leaves the window.
        func millisecondsUntilOldestLeaves(now: NIODeadline) -> Int64 {
            for age in stride(from: Hour.minutes - 1, through: 0, by: -1) {
                let minute = latestMinute - Int64(age)
                guard minute >= 0, counts[Int(minute % Int64(Hour.minutes))] > 0 else { continue }
                let leavesAt = (minute + Int64(Hour.minutes)) * 60_000
                return max(1, leavesAt - now.uptimeNanoseconds.millisecondsSinceOrigin)
            }
            return 1
        }
    }

    struct Counts: Sendable {
        var stored = AppUsage()
        /// Added by this node since `stored` was read.
        var added = AppUsage()
        /// `added` when the read in progress began: what that read is sure to have seen.
        var addedAtReadStart = AppUsage()
        var current: AppUsage {
            AppUsage(tokens: stored.tokens + added.tokens, liveActivities: stored.liveActivities + added.liveActivities)
        }
    }

    private var buckets: [String: Bucket] = [:]
    private var hours: [String: Hour] = [:]
    private var counts: [String: Counts] = [:]
    private var tracked: Set<String> = []

    public init(settings: QuotaSettings) {
        self.settings = settings
    }

    /// Checks a call's rate (and, for calls that push, the app's pushes of the
    /// last hour) and takes one call from the bucket when it is admitted.
    public mutating func admitCall(appID: String, pushes: Bool, now: NIODeadline) -> QuotaRefusal? {
        let quota = settings.quota(of: appID)
        let nodes = Double(settings.nodes)
        if pushes, let perHour = quota.pushesPerHour {
            let limit = max(1, perHour / settings.nodes)
            var hour = hours[appID] ?? Hour()
            hour.advance(to: now.uptimeNanoseconds.millisecondsSinceOrigin / 60_000)
            hours[appID] = hour
            if hour.total >= limit {
                return QuotaRefusal(
                    kind: .pushesPerHour, limit: Double(limit), retryAfterMS: hour.millisecondsUntilOldestLeaves(now: now))
            }
        }
        guard let perSecond = quota.callsPerSecond else { return nil }
        let rate = perSecond / nodes
        let size = max(1, Double(quota.burst ?? Int(perSecond.rounded(.up))) / nodes)
        var bucket = buckets[appID] ?? Bucket(tokens: size, refilledAt: now)
        let elapsed = Double(max(0, (now - bucket.refilledAt).nanoseconds)) / 1e9
        bucket.tokens = min(size, bucket.tokens + elapsed * rate)
        bucket.refilledAt = now
        defer { buckets[appID] = bucket }
        guard bucket.tokens >= 1 else {
            let wait = (1 - bucket.tokens) / rate
            return QuotaRefusal(kind: .callRate, limit: rate, retryAfterMS: max(1, Int64((wait * 1000).rounded(.up))))
        }
        bucket.tokens -= 1
        return nil
    }

    /// An accepted call's fan-out, counted against the app's hour.
    public mutating func chargePushes(appID: String, count: Int, now: NIODeadline) {
        guard count > 0, settings.quota(of: appID).pushesPerHour != nil else { return }
        hours[appID, default: Hour()].add(count, at: now.uptimeNanoseconds.millisecondsSinceOrigin / 60_000)
    }

    /// The count quota a call would break by adding a token (`kind` `.tokens`)
    /// or a live activity, or nil while the app is below it.
    public func countQuota(_ kind: CountQuota.Kind, appID: String) -> CountQuota? {
        let quota = settings.quota(of: appID)
        // The counts are looked up only for an app with such a quota (most have none).
        switch kind {
        case .tokens:
            guard let limit = quota.maxTokens else { return nil }
            let used = counts[appID]?.current.tokens ?? 0
            return used >= limit ? CountQuota(kind: .tokens, limit: limit, used: used) : nil
        case .liveActivities:
            guard let limit = quota.maxLiveActivities else { return nil }
            let used = counts[appID]?.current.liveActivities ?? 0
            return used >= limit ? CountQuota(kind: .liveActivities, limit: limit, used: used) : nil
        }
    }

    /// This node added a token or started an activity: counted until the next read of the store.
    public mutating func noteAdded(_ kind: CountQuota.Kind, appID: String) {
        switch kind {
        case .tokens: counts[appID, default: Counts()].added.tokens += 1
        case .liveActivities: counts[appID, default: Counts()].added.liveActivities += 1
        }
    }

    /// Apps whose store counts are read from the next read on (the registry's
    /// apps, and any other app seen with a count quota).
    public mutating func track(_ appIDs: some Sequence<String>) {
        tracked.formUnion(appIDs)
    }

    /// A read of the store's counts begins: the tracked apps that have a count
    /// quota, sorted; additions noted until now are committed, so it will see them.
    public mutating func readStarting() -> [String] {
        let due = tracked.filter { settings.quota(of: $0).countsInStore }.sorted()
        for appID in due { counts[appID, default: Counts()].addedAtReadStart = counts[appID]?.added ?? AppUsage() }
        return due
    }

    /// The store's counts, from a read begun at the last ``readStarting()``.
    /// Additions noted since that began are kept on top: the read may not
    /// have seen them, and counting one twice for a few seconds errs on the
    /// side of the quota.
    public mutating func noteStored(_ usage: [String: AppUsage]) {
        for (appID, stored) in usage {
            let previous = counts[appID] ?? Counts()
            counts[appID] = Counts(
                stored: stored,
                added: AppUsage(
                    tokens: previous.added.tokens - previous.addedAtReadStart.tokens,
                    liveActivities: previous.added.liveActivities - previous.addedAtReadStart.liveActivities))
        }
    }

    /// The app's use as this node sees it: pushes in the last hour (this node's), stored counts.
    public func usage(of appID: String, now: NIODeadline) -> (pushesLastHour: Int, counts: AppUsage) {
        var hour = hours[appID] ?? Hour()
        hour.advance(to: now.uptimeNanoseconds.millisecondsSinceOrigin / 60_000)
        return (hour.total, counts[appID]?.current ?? AppUsage())
    }
}

extension UInt64 {
    fileprivate var millisecondsSinceOrigin: Int64 { Int64(self / 1_000_000) }
}
