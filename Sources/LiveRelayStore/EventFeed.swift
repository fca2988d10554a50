import LiveRelayAPNs
import LiveRelayDomain
import NIOConcurrencyHelpers
import NIOCore

/// A page of an app's event feed (``ActivityStore/events(appID:after:limit:on:)``).
public struct EventPage: Hashable, Sendable {
    /// After the cursor asked for, in cursor order.
    public var entries: [FeedEntry]
    /// The app's events up to this cursor were deleted by retention: a reader
    /// whose cursor is below it missed events, and is told so, never skipped
    /// past them silently.
    public var trimmedThrough: UInt64
    /// More events follow the last entry (the page was full).
    public var more: Bool
    /// The last cursor the read looked at, readable or not (0: none). Rows this build cannot read
    /// (a kind from a newer build) are left out of ``entries``; a reader moves its cursor here, so a
    /// page of nothing but such rows never holds it in place.
    public var scannedThrough: UInt64

    public init(entries: [FeedEntry] = [], trimmedThrough: UInt64 = 0, more: Bool = false, scannedThrough: UInt64 = 0) {
        self.entries = entries
        self.trimmedThrough = trimmedThrough
        self.more = more
        self.scannedThrough = scannedThrough
    }

    /// Where a reader goes on from after this page: past every row it looked at.
    public func nextCursor(after cursor: UInt64) -> UInt64 {
        max(cursor, entries.last?.cursor ?? 0, scannedThrough)
    }
}

/// How long the event feed keeps an app's events: the older of the two
/// bounds wins, so a busy app keeps its newest `maxPerApp` and a quiet one
/// its last `maxAge`.
public struct EventRetention: Hashable, Sendable {
    public var maxAge: UnixTime.Duration
    public var maxPerApp: Int

    public init(maxAge: UnixTime.Duration = .hours(72), maxPerApp: Int = 100_000) {
        self.maxAge = maxAge
        self.maxPerApp = max(1, maxPerApp)
    }
}

/// Tells waiting readers of a feed (long polls) that a commit added events to
/// an app's feed. A generation per app makes the wait race-free: a reader
/// takes the generation, reads the feed, and waits for a generation past it,
/// so an event committed between its read and its wait wakes it at once.
public final class EventCommitSignal: Sendable {
    private struct State {
        var generations: [String: UInt64] = [:]
        /// Added to every app's generation: ``wakeAll()`` moves them all at once, apps never signalled included.
        var epoch: UInt64 = 0
        /// Per app, the waits' promises by a number of their own (a timeout takes its own one out).
        var waiters: [String: [UInt64: EventLoopPromise<Bool>]] = [:]
        var nextWaiter: UInt64 = 0

        func generation(of appID: String) -> UInt64 { (generations[appID] ?? 0) &+ epoch }
    }
    private let state = NIOLockedValueBox(State())

    public init() {}

    /// The app's generation now: pass it to ``wait(appID:after:until:on:)`` after reading the feed.
    public func generation(of appID: String) -> UInt64 {
        state.withLockedValue { $0.generation(of: appID) }
    }

    /// A commit added events to these apps' feeds (none: nothing to do).
    public func committed(appIDs: Set<String>) {
        guard !appIDs.isEmpty else { return }
        let woken: [EventLoopPromise<Bool>] = state.withLockedValue { state in
            var woken: [EventLoopPromise<Bool>] = []
            for appID in appIDs {
                state.generations[appID, default: 0] &+= 1
                if let waiters = state.waiters.removeValue(forKey: appID) { woken += waiters.values }
            }
            return woken
        }
        // Outside the lock: a woken reader may read the feed and wait again at once.
        for promise in woken { promise.succeed(true) }
    }

    /// Commits may have gone unheard (a listener for other nodes' commits was
    /// reconnected): every app's generation moves and every waiter is woken to
    /// read its feed again.
    public func wakeAll() {
        let woken: [EventLoopPromise<Bool>] = state.withLockedValue { state in
            state.epoch &+= 1
            defer { state.waiters = [:] }
            return state.waiters.values.flatMap(\.values)
        }
        for promise in woken { promise.succeed(true) }
    }

    /// Succeeds with true once the app's generation passes `generation`, with false at `deadline`.
    public func wait(
        appID: String, after generation: UInt64, until deadline: NIODeadline, on eventLoop: any EventLoop
    )
        -> EventLoopFuture<Bool>
    {
        let promise = eventLoop.makePromise(of: Bool.self)
        let id: UInt64? = state.withLockedValue { state in
            guard state.generation(of: appID) == generation else { return nil }
            let id = state.nextWaiter
            state.nextWaiter &+= 1
            state.waiters[appID, default: [:]][id] = promise
            return id
        }
        guard let id else {
            promise.succeed(true)
            return promise.futureResult
        }
        let timeout = eventLoop.scheduleTask(deadline: deadline) {
            let removed = self.state.withLockedValue { state in
                guard state.waiters[appID]?.removeValue(forKey: id) != nil else { return false }
                if state.waiters[appID]?.isEmpty == true { state.waiters[appID] = nil }
                return true
            }
            if removed { promise.succeed(false) }
        }
        promise.futureResult.whenComplete { _ in timeout.cancel() }
        return promise.futureResult
    }

    /// Waiters in all (tests: a wait that ended left nothing behind).
    public var waiterCount: Int { state.withLockedValue { $0.waiters.values.reduce(0) { $0 + $1.count } } }
}

/// The event feeds of the memory store's state: per app, the events in
/// cursor order, the keys of those that carry one, and the retention mark.
struct InMemoryEventFeeds: Sendable {
    struct Feed: Sendable {
        /// In cursor order; `start` is the first live entry (trimmed ones are dropped in bulk).
        var entries: [FeedEntry] = []
        var start = 0
        var lastCursor: UInt64 = 0
        var trimmedThrough: UInt64 = 0
        var keys: [String: UInt64] = [:]

        var live: ArraySlice<FeedEntry> { entries[start...] }
    }

    private(set) var feeds: [String: Feed] = [:]

    mutating func append(_ event: FeedEvent) {
        var feed = feeds[event.appID] ?? Feed()
        defer { feeds[event.appID] = feed }
        if let key = event.dedupeKey, feed.keys[key] != nil { return }
        feed.lastCursor += 1
        feed.entries.append(FeedEntry(cursor: feed.lastCursor, event: event))
        if let key = event.dedupeKey { feed.keys[key] = feed.lastCursor }
    }

    func page(appID: String, after cursor: UInt64, limit: Int) -> EventPage {
        guard let feed = feeds[appID] else { return EventPage() }
        let live = feed.live
        // Binary search for the first entry after the cursor: cursors increase.
        var low = live.startIndex, high = live.endIndex
        while low < high {
            let mid = (low + high) / 2
            if live[mid].cursor <= cursor { low = mid + 1 } else { high = mid }
        }
        let end = min(live.endIndex, low + max(0, limit))
        return EventPage(
            entries: Array(live[low..<end]), trimmedThrough: feed.trimmedThrough, more: end < live.endIndex,
            scannedThrough: end > low ? live[end - 1].cursor : 0)
    }

    /// Deletes the app's events older than `before` and those beyond the newest `keep`; returns how many.
    mutating func trim(appID: String, before: UnixTime, keep: Int) -> Int {
        guard var feed = feeds[appID] else { return 0 }
        let live = feed.live
        var cut = live.startIndex
        let byCount = live.endIndex - max(0, keep)
        while cut < live.endIndex, cut < byCount || live[cut].event.time < before { cut += 1 }
        let removed = cut - live.startIndex
        guard removed > 0 else { return 0 }
        for entry in live[live.startIndex..<cut] {
            if let key = entry.event.dedupeKey, feed.keys[key] == entry.cursor { feed.keys[key] = nil }
        }
        feed.trimmedThrough = live[cut - 1].cursor
        feed.start = cut
        // Dropped in bulk once they are half the array: trimming stays amortised O(1) per event.
        if feed.start > feed.entries.count / 2 {
            feed.entries.removeFirst(feed.start)
            feed.start = 0
        }
        feeds[appID] = feed
        return removed
    }

    /// The last cursor the app's feed handed out (0: none).
    func lastCursor(appID: String) -> UInt64 { feeds[appID]?.lastCursor ?? 0 }

    var appIDs: Dictionary<String, Feed>.Keys { feeds.keys }
}
