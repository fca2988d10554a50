import LiveRelayAPNs
import LiveRelayDomain
import NIOCore

/// Where tokens and activities live.
///
/// Stores know nothing of the rules: they offer atomic ``apply(_:now:on:)`` of
/// a ``StoreMutation`` (read through ``StateReader``, decide, write the plan)
/// and a few reads. So SQLite and PostgreSQL get the domain's exact semantics
/// by implementing `StateReader` over their tables and each of the eleven
/// ``StoreWrite`` cases as statements, and the same behavioural suite checks them.
///
/// ## The durability contract
/// A future from `apply` succeeds only once the plan's writes are durable
/// (for SQLite: committed and fsynced in WAL mode; for PostgreSQL: committed
/// with `synchronous_commit` on). A reply built from it may therefore be
/// acknowledged to the caller, and a crash after that loses nothing. A plan
/// with no writes (a replay, an unchanged registration) needs no commit.
///
/// ## Batching
/// A store is expected to group concurrent `apply` calls: run their plans one
/// after another inside one transaction (each plan sees the writes of those
/// before it), commit once, then complete every future. A plan that throws
/// writes nothing and fails only its own future. Many concurrent
/// RegisterToken calls thus share one fsync.
///
/// ## Futures
/// Every future is completed on (or hopped to) the `eventLoop` passed in, the
/// caller's connection loop, so the service continues without another hop.
/// Refusals fail with ``DomainError``; anything else (I/O, a closed store, a
/// commit of unknown outcome: ``ActivityStoreError``) is a store failure the
/// service reports as UNAVAILABLE or INTERNAL.
///
/// ## Indexes
/// The hot lookups must stay fast at millions of rows: an activity's update
/// tokens, an attributes type's push-to-start tokens, a user's push-to-start
/// tokens (by app, user and type); plus the rotation slot, the expiring
/// tokens and ``Activity/sweepDeadline`` for the sweeper.
public protocol ActivityStore: Sendable {
    /// Applies `mutation` atomically with `now` as the time of the decision.
    func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome>

    /// ``apply(_:now:on:)`` with the outcome handed to `body` on `eventLoop`
    /// instead of completing a future: the same contract (atomic, durable
    /// before `body` sees a success), one future fewer for a caller that would
    /// only register a callback on it. By default exactly that; the memory
    /// store, which decides at once, calls `body` without making a future
    /// (a future's allocation, callback list and generic teardown).
    func apply<M: StoreMutation>(
        _ mutation: M, now: UnixTime, on eventLoop: any EventLoop,
        then body: @escaping @Sendable (Result<M.Outcome, any Error>) -> Void)

    /// Reads outside any mutation (dispatch, tools): a consistent snapshot of
    /// one lookup, not atomic with later writes.
    func token(_ key: TokenKey, on eventLoop: any EventLoop) -> EventLoopFuture<Token?>
    func activity(_ key: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<Activity?>
    func updateTokens(of activity: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]>
    func pushToStartTokens(appID: String, attributesType: String, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]>
    func pushToStartTokens(
        appID: String, externalUserIDs: [String], attributesType: String, on eventLoop: any EventLoop
    ) -> EventLoopFuture<[Token]>

    /// What each app keeps (tokens, live activities at `now`), for quotas: a
    /// count per app over the app's own rows (the primary key's prefix), so
    /// its cost grows with the app's size; read every few seconds, never per call.
    func usage(of appIDs: [String], now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<[String: AppUsage]>

    /// A page of the app's event feed (docs/PROTOCOL.md, "Event feed"): the
    /// events committed after `cursor` (0: from the oldest kept), at most `limit`.
    func events(appID: String, after cursor: UInt64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<EventPage>

    /// The app's last cursor (0: it never had an event): at least every cursor committed before
    /// the call, so an event committed after it has a higher one. Where a new webhook starts.
    func lastEventCursor(appID: String, on eventLoop: any EventLoop) -> EventLoopFuture<UInt64>

    /// Deletes from every app's feed what `retention` no longer keeps at `now`; answers how many events went.
    func trimEvents(_ retention: EventRetention, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<Int>

    /// Signalled after each commit that added events to a feed, with the feed's app.
    var eventCommits: EventCommitSignal { get }

    /// How often a long poll of the feed reads it again though nothing was
    /// signalled: nil when every commit to the feeds happens in this process
    /// (and so is signalled); a store shared by several nodes polls for theirs.
    var eventPollInterval: TimeAmount? { get }

    /// Flushes and releases the store; calls after it fail.
    func close() async throws

    /// How many activities and tokens one sweep pass (``LiveRelayDomain/Sweep``)
    /// should take: a pass is one mutation, so one transaction of a SQL store
    /// and one hold of the memory store's lock. 10,000 by default.
    var sweepLimit: Int { get }

    /// Why the store can no longer work until the process starts again (a
    /// SQLite store whose fsync failed: what is on the disk is unknown until
    /// it is reopened), or nil. The server then exits after a short drain, so
    /// a supervisor restarts it, and `/healthz` fails meanwhile.
    var permanentFailure: String? { get }
}

extension ActivityStore {
    public func close() async throws {}

    public var sweepLimit: Int { 10_000 }

    public var permanentFailure: String? { nil }

    public var eventPollInterval: TimeAmount? { nil }

    public func apply<M: StoreMutation>(
        _ mutation: M, now: UnixTime, on eventLoop: any EventLoop,
        then body: @escaping @Sendable (Result<M.Outcome, any Error>) -> Void
    ) {
        apply(mutation, now: now, on: eventLoop).whenComplete(body)
    }
}

/// Failures of the store itself, as opposed to a rule's refusal.
public enum ActivityStoreError: Error, Hashable, Sendable {
    /// The reason of the UNAVAILABLE a caller gets for ``unavailable(_:)``.
    public static let unavailableReason = "StoreUnavailable"

    case closed
    /// The commit was sent but its answer never came (the connection broke, or
    /// the statement timed out): the writes may or may not be durable, and
    /// only the caller, resending with its idempotency key, can find out. It
    /// must not be reported as a plain failure, which says nothing happened.
    case outcomeUnknown(String)
    /// The store could not be reached, did not answer in time, or kept losing
    /// races, before anything was committed: nothing was written, and the same
    /// call may succeed when sent again. Never an internal error.
    case unavailable(String)
}
