import Dispatch
import LiveRelayAPNs
import LiveRelayDomain
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store of `liverelay serve --store memory` (forgotten on exit) and of tests.
///
/// Real, not a fake: each app's state is an ``InMemoryState`` (dictionaries
/// with the three hot indexes) behind a lock of its own (``AppShards``), and
/// each `apply` plans and writes under it, so check-and-apply is atomic and
/// one app's large call does not hold up another app's. Its durability is the
/// process's: "durable" in the protocol's sense means applied, and a restart
/// forgets everything. Calls are answered at once on the caller's loop (no
/// thread hop), except a call that reads many tokens (and its app's calls
/// that come while it runs), planned on its app's queue, and
/// ``usage(of:now:on:)``, whose scan of an app's activities runs off the loop.
public final class InMemoryActivityStore: ActivityStore, @unchecked Sendable {
    private let shards = AppShards()
    public let eventCommits = EventCommitSignal()

    public init() {}

    /// One state holding every app's, for tests and diagnostics.
    public var snapshot: InMemoryState { AppShards.merged(shards.copies() ?? [:]) }

    /// A tenth of the SQL stores': a pass holds an app's lock for its part,
    /// and deleting 10,000 due tokens held the store's one lock 46–100 ms at a
    /// million tokens, 1,000 for 2–7 ms (docs/BENCHMARKS.md, "Memory").
    /// The sweeper runs passes until one finds nothing, so a
    /// mass expiry still clears in one turn, in short holds.
    public var sweepLimit: Int { 1_000 }

    public func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        let promise = eventLoop.makePromise(of: M.Outcome.self)
        apply(mutation, now: now, on: eventLoop) { promise.completeWith($0) }
        return promise.futureResult
    }

    /// No future: `body` runs at once on the caller's loop (or is handed to `eventLoop` from elsewhere), after the lock is released.
    /// A call that reads many tokens is planned on its app's queue instead, and the app's
    /// calls after it wait their turn there (``AppShards/applyOrQueue(_:scope:now:commit:)``).
    /// The service calls it through `any ActivityStore`, so it runs unspecialized
    /// unless the mutation is one specialized here: RegisterToken, the most
    /// frequent call.
    @_specialize(where M == RegisterToken)
    public func apply<M: StoreMutation>(
        _ mutation: M, now: UnixTime, on eventLoop: any EventLoop,
        then body: @escaping @Sendable (Result<M.Outcome, any Error>) -> Void
    ) {
        // Nothing here but the call: the entry, which the specialization is chosen in, then
        // computes no type metadata first (for `Applied<Result<M.Outcome, _>>?`).
        answer(mutation, now: now, on: eventLoop, then: body)
    }

    @_specialize(where M == RegisterToken)
    private func answer<M: StoreMutation>(
        _ mutation: M, now: UnixTime, on eventLoop: any EventLoop,
        then body: @escaping @Sendable (Result<M.Outcome, any Error>) -> Void
    ) {
        let result: Result<M.Outcome, any Error>
        let scope = mutation.scope
        if case .allApps = scope {
            result = locked(mutation, now: now)
        } else {
            switch shards.applyOrQueue(mutation, scope: scope, now: now, commit: Self.decided) {
            case let .applied((applied, fed))?:
                result = applied
                eventCommits.committed(appIDs: fed)
            case nil:
                result = .failure(ActivityStoreError.closed)
            case let .queued(shard)?:
                shard.queue.async { [shards, eventCommits] in
                    let applied = shards.applyQueued(mutation, in: shard, now: now, commit: Self.decided)
                    eventCommits.committed(appIDs: applied?.fed ?? [])
                    let result = applied?.decided ?? .failure(ActivityStoreError.closed)
                    eventLoop.execute { body(result) }
                }
                return
            }
        }
        if eventLoop.inEventLoop {
            body(result)
        } else {
            eventLoop.execute { body(result) }
        }
    }

    /// The decision, and the apps whose feeds its writes added to: the feeds' readers are signalled
    /// once the app's lock is released, since a woken reader on this thread reads the feed under that
    /// lock at once.
    private static func decided<Outcome>(
        _ writes: [StoreWrite], _ decided: Result<Outcome, any Error>
    ) -> (decided: Result<Outcome, any Error>, fed: Set<String>) {
        (decided, writes.fedAppIDs)
    }

    /// A call about every app (a sweep, a claim, a settle or renewal in parts).
    private func locked<M: StoreMutation>(_ mutation: M, now: UnixTime) -> Result<M.Outcome, any Error> {
        let scope = mutation.scope
        if let parts = shards.parts(of: mutation, scope: scope) {
            for (appID, part) in parts {
                if case let .failure(error) = locked(part, scope: .app(appID), now: now) { return .failure(error) }
            }
            return .success(AppShards.partsOutcome(of: M.self))
        }
        var fed = Set<String>()
        defer { eventCommits.committed(appIDs: fed) }
        let polled = shards.pollAppByApp(mutation, scope: scope, now: now) { fed.formUnion($0.fedAppIDs) }
        if let polled { return polled }
        return locked(mutation, scope: scope, now: now)
    }

    private func locked<M: StoreMutation>(_ mutation: M, scope: MutationScope, now: UnixTime) -> Result<M.Outcome, any Error> {
        var fed = Set<String>()
        let decided = shards.apply(mutation, scope: scope, now: now) { writes, decided in
            fed = writes.fedAppIDs
            return decided
        }
        eventCommits.committed(appIDs: fed)
        return decided ?? .failure(ActivityStoreError.closed)
    }

    /// Runs `body` on the app's state under its lock and answers with its value,
    /// at once: nothing the memory store holds is waiting for a disk.
    public func read<T: Sendable>(app appID: String, on eventLoop: any EventLoop, _ body: (InMemoryState) -> T) -> EventLoopFuture<T> {
        eventLoop.makeCompletedFuture(shards.read(appID, body).map { .success($0) } ?? .failure(ActivityStoreError.closed))
    }

    /// Activities counted per lock hold by ``usage(of:now:on:)``: about 1.5 ms of
    /// scanning, so a quota refresh over an app's million activities (58 ms)
    /// does not hold up its calls for its whole length.
    static let usageSlice = 16_384

    /// Each app's activities scanned in slices, with its lock let go between
    /// them, off the event loop (the quota refresher runs it every few seconds).
    /// Token counts are kept per app, so they are exact; an activity started
    /// or ended during the scan may be counted or not.
    public func usage(of appIDs: [String], now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<[String: AppUsage]> {
        let shards = self.shards
        let promise = eventLoop.makePromise(of: [String: AppUsage].self)
        DispatchQueue.global().async {
            var usage: [String: AppUsage] = [:]
            for appID in Set(appIDs) {
                var live = [appID: 0]
                var next: Int? = 0
                var tokens = 0
                while let start = next {
                    let scanned: Void? = shards.read(appID) {
                        next = $0.countLiveActivities(of: &live, at: now, from: start, limit: Self.usageSlice)
                        if next == nil { tokens = $0.tokenCount(ofApp: appID) }
                    }
                    guard scanned != nil else { return promise.fail(ActivityStoreError.closed) }
                }
                usage[appID] = AppUsage(tokens: tokens, liveActivities: live[appID] ?? 0)
            }
            promise.succeed(usage)
        }
        return promise.futureResult
    }

    public func events(appID: String, after cursor: UInt64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<EventPage> {
        read(app: appID, on: eventLoop) { $0.events(appID: appID, after: cursor, limit: limit) }
    }

    public func lastEventCursor(appID: String, on eventLoop: any EventLoop) -> EventLoopFuture<UInt64> {
        read(app: appID, on: eventLoop) { $0.lastEventCursor(appID: appID) }
    }

    /// App by app, each under its own lock.
    public func trimEvents(_ retention: EventRetention, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<Int> {
        guard let appIDs = shards.appIDs() else { return eventLoop.makeFailedFuture(ActivityStoreError.closed) }
        var trimmed = 0
        for appID in appIDs {
            guard let count = shards.withApp(appID, { $0.trimEvents(retention, now: now) }) else {
                return eventLoop.makeFailedFuture(ActivityStoreError.closed)
            }
            trimmed += count
        }
        return eventLoop.makeSucceededFuture(trimmed)
    }

    public func close() async throws {
        _ = shards.close()
    }
}
