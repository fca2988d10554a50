/// What to do with a push that asked for a priority, given the hourly
/// priority-10 budgets of its activity and channel.
public enum PriorityDecision: Hashable, Sendable {
    /// Send at the priority asked for.
    case send(priority: Int)
    /// Over budget: send at priority 5 instead (APNs delivers it when the
    /// device sees fit, and does not count it against the budget).
    case downgrade
    /// Over budget in strict mode: refuse the call (RESOURCE_EXHAUSTED,
    /// reason "PriorityBudgetExhausted"); a priority-10 send fits again after
    /// `retryAfterMS`.
    case refuse(retryAfterMS: UInt32)
}

/// The priority-10 sends of every Live Activity and broadcast channel in a
/// sliding hour, and the decision each new priority-10 push gets: a value,
/// no I/O, the time always passed in (a monotonic uptime, so that a wall
/// clock step cannot open or close the window; tests pass their own).
///
/// ## Why
/// APNs counts priority-10 Live Activity pushes against an hourly budget per
/// activity whose size Apple does not publish, and throttles an activity over
/// it (updates arrive late or not at all). An app configures a budget it
/// knows to be safe (``PriorityBudgets``); past it LiveRelay sends at
/// priority 5 (downgrade) or, in strict mode, refuses, so that the caller
/// decides. A call counts once against its activity and once against its
/// channel if it names one, and is over budget when either is.
///
/// ## The window
/// Sends are counted per minute: a send in minute `m` (of the uptime) counts
/// until minute `m + 61` begins, so between 60 and 61 minutes, never less
/// than an hour (erring towards the budget). A refusal's retry time is when
/// enough of the oldest minutes have left for one more send to fit, which is
/// when the oldest send leaves unless the budget was lowered.
///
/// ## Memory, at a million activities
/// A key is a 64-bit keyed hash of (kind, app, id), not the strings: an
/// activity id is 36 bytes or more on the heap, the hash 8 inline. The
/// hash is Swift's `Hasher`, seeded at random per process, so nobody can
/// aim two ids at one key; two keys that collide by chance (odds of about 3 in
/// 10^8 at a million keys) share one budget and are downgraded early, never late.
/// A key costs its dictionary slot (8 bytes of key, 16 of window, at most
/// 4/3 of that with the load factor: about 32 bytes) while it sent in one
/// minute of the last hour, plus 8 bytes for each further minute it sent in,
/// which leave with their minute.
///
/// Keys live in ``tableCount`` tables by hash. Each ``decide(app:activityID:channelID:priority:budget:strict:now:)``
/// or ``record(app:activityID:channelID:priority:budget:now:)`` sweeps one
/// table when one is due, in turn, so that every table is swept about once a
/// minute and a key whose last send left the window goes within a minute or
/// so, without a pause that walks every key at once. With no calls at all
/// nothing sweeps: ``sweep(now:)`` does all the tables (a timer's job).
public struct PriorityBudgetLedger: Sendable {
    /// How long a send counts (at least; see "The window").
    public static let window: Duration = .seconds(3600)
    static let minutesInWindow: UInt32 = 60
    static let tableCount = 64
    /// Every table is swept once in this time, while calls come.
    static let sweepRound: Duration = .seconds(60)

    /// The sends of one minute.
    struct Bucket: Hashable, Sendable {
        var minute: UInt32
        var count: UInt32
    }

    /// One key's minutes with sends still in the window. The newest is inline:
    /// a key that sent in a single minute owns no heap at all.
    struct Window: Hashable, Sendable {
        var newest: Bucket
        /// Older minutes, oldest first.
        var older: [Bucket] = []

        var total: Int { older.reduce(Int(newest.count)) { $0 + Int($1.count) } }

        /// The window without the minutes that left it by `minute`; nil when none is left.
        func pruned(at minute: UInt32) -> Window? {
            let oldest = minute >= PriorityBudgetLedger.minutesInWindow ? minute - PriorityBudgetLedger.minutesInWindow : 0
            guard newest.minute >= oldest else { return nil }
            guard let first = older.first, first.minute < oldest else { return self }
            var window = self
            // A fresh array, not removeFirst: that would keep the capacity of the busiest minute.
            let kept = older.drop { $0.minute < oldest }
            window.older = kept.isEmpty ? [] : Array(kept)
            return window
        }

        /// When a send fits again under `budget`: the start of the minute in
        /// which enough of the oldest sends have left.
        func fits(under budget: Int) -> Duration? {
            var remaining = total
            for bucket in older + [newest] {
                remaining -= Int(bucket.count)
                if remaining < budget {
                    return .seconds(Int64(bucket.minute) + Int64(PriorityBudgetLedger.minutesInWindow) + 1) * 60
                }
            }
            return nil
        }
    }

    enum Kind: UInt8 {
        case activity = 1
        case channel = 2
    }

    private var tables: [[UInt64: Window]]
    private var nextTable = 0
    private var nextSweep: Duration?

    public init() {
        tables = Array(repeating: [:], count: Self.tableCount)
    }

    /// Keys with sends in the window (and, until their table's sweep, a few whose last send just left it).
    public var trackedKeys: Int { tables.reduce(0) { $0 + $1.count } }

    static func key(_ kind: Kind, app: String, id: String) -> UInt64 {
        var hasher = Hasher()
        hasher.combine(kind.rawValue)
        hasher.combine(app)
        hasher.combine(id)
        return UInt64(truncatingIfNeeded: hasher.finalize())
    }

    static func minute(_ now: Duration) -> UInt32 {
        UInt32(clamping: max(0, now.components.seconds) / 60)
    }

    private static func keys(app: String, activityID: String?, channelID: String?) -> [UInt64] {
        var keys: [UInt64] = []
        if let activityID { keys.append(key(.activity, app: app, id: activityID)) }
        if let channelID { keys.append(key(.channel, app: app, id: channelID)) }
        return keys
    }

    /// The decision for a push at `priority` of the activity (and channel)
    /// under `budget` priority-10 sends an hour (nil: no guard). Only
    /// priority 10 is ever downgraded or refused. Counts nothing: call
    /// ``record(app:activityID:channelID:priority:budget:now:)`` with the
    /// priority sent once the call is accepted.
    public mutating func decide(
        app: String, activityID: String?, channelID: String?, priority: Int, budget: Int?, strict: Bool, now: Duration
    ) -> PriorityDecision {
        sweepIfDue(now: now)
        guard priority == 10, let budget else { return .send(priority: priority) }
        let minute = Self.minute(now)
        var fitsAt: Duration?
        for key in Self.keys(app: app, activityID: activityID, channelID: channelID) {
            let table = Self.table(of: key)
            guard let window = tables[table][key]?.pruned(at: minute) else {
                tables[table][key] = nil
                continue
            }
            tables[table][key] = window
            guard window.total >= budget else { continue }
            // Over: the call fits when both of its keys do. A budget below 1 never fits: a window from now.
            let at = window.fits(under: budget) ?? now + Self.window
            fitsAt = max(fitsAt ?? at, at)
        }
        guard let fitsAt else { return .send(priority: 10) }
        guard strict else { return .downgrade }
        let milliseconds = (fitsAt - now) / .milliseconds(1)
        return .refuse(retryAfterMS: UInt32(clamping: max(1, Int64(milliseconds.rounded(.up)))))
    }

    /// Counts an accepted push sent at `priority`: once against the activity
    /// and once against the channel if any. Priority 5 (asked for, or a
    /// downgrade) and pushes without a budget count nothing.
    public mutating func record(app: String, activityID: String?, channelID: String?, priority: Int, budget: Int?, now: Duration) {
        sweepIfDue(now: now)
        guard priority == 10, budget != nil else { return }
        let minute = Self.minute(now)
        for key in Self.keys(app: app, activityID: activityID, channelID: channelID) {
            let table = Self.table(of: key)
            guard var window = tables[table][key]?.pruned(at: minute) else {
                tables[table][key] = Window(newest: Bucket(minute: minute, count: 1))
                continue
            }
            if window.newest.minute >= minute {
                // This minute (or, should the clock ever step back, the newest there is).
                if window.newest.count < .max { window.newest.count += 1 }
            } else {
                window.older.append(window.newest)
                window.newest = Bucket(minute: minute, count: 1)
            }
            tables[table][key] = window
        }
    }

    /// Forgets every key whose sends have all left the window, and the minutes
    /// that left it from the others; returns how many keys it forgot.
    @discardableResult
    public mutating func sweep(now: Duration) -> Int {
        (0..<tables.count).reduce(0) { $0 + sweep(table: $1, minute: Self.minute(now)) }
    }

    /// One key's window as stored (tests).
    func window(of key: UInt64) -> Window? { tables[Self.table(of: key)][key] }

    private static func table(of key: UInt64) -> Int { Int(key % UInt64(tableCount)) }

    @discardableResult
    private mutating func sweep(table: Int, minute: UInt32) -> Int {
        let before = tables[table].count
        tables[table] = tables[table].compactMapValues { $0.pruned(at: minute) }
        return before - tables[table].count
    }

    /// One table in turn, each ``sweepRound`` / ``tableCount``.
    private mutating func sweepIfDue(now: Duration) {
        guard let due = nextSweep else {
            nextSweep = now + Self.sweepRound / Self.tableCount
            return
        }
        guard now >= due else { return }
        sweep(table: nextTable, minute: Self.minute(now))
        nextTable = (nextTable + 1) % tables.count
        nextSweep = now + Self.sweepRound / Self.tableCount
    }
}
