import NIOCore

/// How much work the service accepts before it refuses more (the config file's
/// `admission` section). A call is "in flight" from its admission until the
/// store has answered it and its pushes (if any) are handed to the sink: that
/// is the work a refusal can still avoid, and the store's queue is where an
/// overloaded server's calls wait.
public struct AdmissionLimits: Sendable, Hashable {
    /// Off: every call is admitted and only counted (for comparison runs; the
    /// app queues of the dispatcher still apply).
    public var enabled: Bool
    /// Calls of one app in flight at once while other apps are busy too (an app
    /// alone may use half of ``maxInFlight``). Over it: RESOURCE_EXHAUSTED, reason
    /// `AppOverloaded`. Small, because the store is one queue: every call in it
    /// makes every later one wait, whichever app it is for, and a commit takes
    /// longer the more calls it carries. 32 keeps the other apps' wait within
    /// about one commit of an idle store's (docs/BENCHMARKS.md, "Overload isolation").
    public var maxInFlightPerApp: Int
    /// Calls in flight over every app: the bound on work accepted but not yet
    /// done, hence on the store's queue and on the memory it holds. Over it:
    /// RESOURCE_EXHAUSTED, reason `ServerOverloaded`. An app alone may use half
    /// of it: what a single busy app gets when nobody else needs the store.
    public var maxInFlight: Int
    /// How long after its last call an app still counts as busy. Longer than the
    /// gap between a steady app's calls, so that its share does not come and go
    /// with each reply, and short, so that an app that went quiet gives its room back.
    public var busyWindow: TimeAmount
    /// The least `retry_after_ms` a refusal carries; it is longer when the
    /// store currently takes longer than that to answer a call.
    public var retryAfter: TimeAmount
    /// Refuse at once (UNAVAILABLE, reason `DeadlineUnreachable`) a call whose
    /// remaining deadline is below the current estimate of the service time,
    /// instead of doing work whose answer would come after the caller gave up.
    public var refuseUnreachableDeadlines: Bool
    /// The weight of a new sample in the moving average of the service time
    /// (0 < w ≤ 1): 0.2 follows a change of load within about ten calls while
    /// one slow commit moves the estimate by a fifth of its excess only.
    public var smoothing: Double

    public init(
        enabled: Bool = true, maxInFlightPerApp: Int = 32, maxInFlight: Int = 512, busyWindow: TimeAmount = .seconds(1),
        retryAfter: TimeAmount = .milliseconds(50), refuseUnreachableDeadlines: Bool = true, smoothing: Double = 0.2
    ) {
        self.enabled = enabled
        self.maxInFlightPerApp = max(1, maxInFlightPerApp)
        self.maxInFlight = max(1, maxInFlight)
        self.busyWindow = max(.milliseconds(1), busyWindow)
        self.retryAfter = max(.zero, retryAfter)
        self.refuseUnreachableDeadlines = refuseUnreachableDeadlines
        self.smoothing = min(1, max(0.001, smoothing))
    }

    /// A retry hint is never longer than this, whatever the estimate says: a client told
    /// to wait minutes would rather fail over, and the estimate recovers in a few calls.
    static let maxRetryAfter = TimeAmount.seconds(30)
}

/// An admitted call: hand it back to ``AdmissionController/finish(_:now:)`` exactly once.
public struct AdmissionTicket: Sendable, Hashable {
    public let appID: String
    public let admittedAt: NIODeadline
}

/// Why a call was turned away, with what the caller needs to back off.
public struct AdmissionRefusal: Sendable, Hashable, Error {
    public enum Reason: String, Sendable, Hashable, CaseIterable {
        /// The app has its share of calls in flight (RESOURCE_EXHAUSTED).
        case appOverloaded = "AppOverloaded"
        /// Every app together has the global bound in flight (RESOURCE_EXHAUSTED).
        case serverOverloaded = "ServerOverloaded"
        /// The call's deadline would pass before the store could answer it (UNAVAILABLE).
        case deadlineUnreachable = "DeadlineUnreachable"
    }

    public var reason: Reason
    /// The app's calls in flight for ``Reason/appOverloaded``, all calls in flight otherwise.
    public var inFlight: Int
    /// The limit that was reached (the app's current share, or the global bound).
    public var limit: Int
    /// When a retry may succeed.
    public var retryAfterMS: UInt32
    /// The service time estimate at the refusal (nil before the first answer).
    public var estimate: TimeAmount?
    /// For ``Reason/deadlineUnreachable``: what was left of the call's deadline.
    public var remaining: TimeAmount?
}

/// The service's admission rules as a value: no clock, no lock, no I/O. Every
/// step takes `now` (monotonic), so the rules are tested with a clock the test
/// moves, and ``AdmissionGate`` only adds a lock, the clock and the metrics.
///
/// A call is admitted when all of these hold, checked in this order:
/// 1. its app has fewer calls in flight than its share. An app is busy while it has
///    calls in flight and for ``AdmissionLimits/busyWindow`` after it last asked
///    (admitted or not). With `n` busy apps, the caller's included, the share is
///    `maxInFlight / 2` for an app alone, else ``AdmissionLimits/maxInFlightPerApp``
///    and at most `maxInFlight / (n + 1)`. Alone, an app gets the throughput of a
///    deep queue, as nobody waits behind it; once another app is busy, each gets a
///    small share, so that their calls wait behind few others. The `/ 2` and the
///    `+ 1` keep one share free for an app that has not asked yet: a newcomer is
///    admitted at once instead of finding the global bound full of another app's calls;
/// 2. fewer than ``AdmissionLimits/maxInFlight`` calls are in flight over every app;
/// 3. its deadline, if any, leaves at least the estimated service time, while
///    calls are in flight (with none in flight the call does not queue behind
///    anyone, and a past estimate says little about it).
///
/// The service time estimate is an exponentially weighted moving average of
/// the time from admission to ``finish(_:now:)`` over every app: the store is
/// one queue, so every app's call waits about as long as any other's.
public struct AdmissionController: Sendable {
    /// An app that is busy: its calls in flight, and when it last asked.
    private struct AppEntry: Sendable {
        var inFlight: Int
        var lastAsked: NIODeadline
    }

    public let limits: AdmissionLimits
    /// The busy apps. Apps idle for a window (and with nothing in flight) are swept
    /// out, so this holds the busy apps only (a stale one stays at most half a window
    /// longer). One entry per app, so that a call looks its app up once when admitted
    /// and once when finished: the string hashing was most of the gate's cost.
    private var apps: [String: AppEntry] = [:]
    public private(set) var inFlight = 0
    private var averageNanos: Double?
    private var nextSweep: NIODeadline?

    public init(limits: AdmissionLimits) {
        self.limits = limits
    }

    /// The current estimate of the time from admission to answer; nil before the first answer.
    public var estimate: TimeAmount? { averageNanos.map { .nanoseconds(Int64($0.rounded())) } }

    /// Calls of `appID` in flight.
    public func inFlight(appID: String) -> Int { apps[appID]?.inFlight ?? 0 }

    /// Apps that count as busy now.
    public var busyApps: Int { apps.count }

    /// How many calls `appID` may have in flight now, given the busy apps (`appID` counted as one).
    public func share(of appID: String) -> Int {
        share(busy: apps.count + (apps[appID] == nil ? 1 : 0))
    }

    private func share(busy: Int) -> Int {
        if busy == 1 { return max(1, limits.maxInFlight / 2) }
        return min(limits.maxInFlightPerApp, max(1, limits.maxInFlight / (busy + 1)))
    }

    /// Admits the call (counting it in flight) or says why not.
    public mutating func admit(appID: String, deadline: NIODeadline?, now: NIODeadline) -> Result<AdmissionTicket, AdmissionRefusal> {
        let entry = noteAsked(appID, now: now)
        if limits.enabled {
            let mine = apps.values[entry].inFlight
            // The app is among the busy ones now.
            let share = share(busy: apps.count)
            if mine >= share {
                return .failure(refusal(.appOverloaded, inFlight: mine, limit: share))
            }
            if inFlight >= limits.maxInFlight {
                return .failure(refusal(.serverOverloaded, inFlight: inFlight, limit: limits.maxInFlight))
            }
            if limits.refuseUnreachableDeadlines, inFlight > 0, let deadline, let estimate, deadline - now < estimate {
                var refused = refusal(.deadlineUnreachable, inFlight: inFlight, limit: limits.maxInFlight)
                refused.remaining = deadline - now
                return .failure(refused)
            }
        }
        apps.values[entry].inFlight += 1
        inFlight += 1
        return .success(AdmissionTicket(appID: appID, admittedAt: now))
    }

    /// The admitted call was answered (or failed): its slot is free and its time feeds the estimate.
    public mutating func finish(_ ticket: AdmissionTicket, now: NIODeadline) {
        guard let entry = apps.index(forKey: ticket.appID), apps.values[entry].inFlight > 0 else {
            assertionFailure("finished a ticket of \(ticket.appID) twice")
            return
        }
        apps.values[entry].inFlight -= 1
        inFlight -= 1
        let sample = Double(max(0, (now - ticket.admittedAt).nanoseconds))
        if let average = averageNanos {
            averageNanos = average + limits.smoothing * (sample - average)
        } else {
            averageNanos = sample
        }
    }

    /// Marks `appID` busy, and every half window forgets the apps that have not asked
    /// for a whole one (unless they still have calls in flight): the work is proportional
    /// to the busy apps, once per half window, not per call. Returns where the app's entry is.
    private mutating func noteAsked(_ appID: String, now: NIODeadline) -> Dictionary<String, AppEntry>.Index {
        var entry = apps.index(forKey: appID)
        if let entry {
            apps.values[entry].lastAsked = now
        } else {
            apps[appID] = AppEntry(inFlight: 0, lastAsked: now)
        }
        if nextSweep.map({ now >= $0 }) ?? true {
            let idleSince = now - limits.busyWindow
            apps = apps.filter { _, app in app.lastAsked > idleSince || app.inFlight > 0 }
            nextSweep = now + .nanoseconds(limits.busyWindow.nanoseconds / 2)
            entry = nil
        }
        // Found again only after an insertion or a sweep, which move entries.
        return entry ?? apps.index(forKey: appID)!
    }

    /// The hint: the configured least wait, or the current service time when longer
    /// (a slot frees when a call in flight is answered, which takes about that long).
    private func refusal(_ reason: AdmissionRefusal.Reason, inFlight: Int, limit: Int) -> AdmissionRefusal {
        let wait = min(AdmissionLimits.maxRetryAfter, max(limits.retryAfter, estimate ?? .zero))
        let milliseconds = (wait.nanoseconds + 999_999) / 1_000_000
        return AdmissionRefusal(
            reason: reason, inFlight: inFlight, limit: limit, retryAfterMS: UInt32(clamping: milliseconds), estimate: estimate)
    }
}
