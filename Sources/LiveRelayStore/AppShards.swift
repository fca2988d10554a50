import Dispatch
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import Synchronization

/// One app's state in the memory store, and the lock it is read and changed under.
final class AppShard: @unchecked Sendable {
    let appID: String
    let lock = AdaptiveLock()
    /// Under `lock`.
    var state: InMemoryState
    /// Under `lock`: set by ``AppShards/close()``.
    var isClosed: Bool
    /// The app's calls planned off the caller's event loop, one at a time, in
    /// the order they came (``AppShards/applyOrQueue(_:scope:now:commit:)``).
    let queue = DispatchQueue(label: "liverelay.store.app")
    /// Calls handed to `queue` and not applied yet. While there are any, the
    /// app's later calls go to `queue` too, so none is applied before one that
    /// came first. Lowered under `lock`, as the call is applied.
    let queued = Atomic<Int>(0)

    init(appID: String, state: InMemoryState, isClosed: Bool) {
        self.appID = appID
        self.state = state
        self.isClosed = isClosed
    }
}

/// The state of the memory store, kept per app (``AppShard``), each app's
/// behind a lock of its own.
///
/// ## Why
/// Under one lock for the whole state, one app's large call would hold up
/// every app's: a 100,000-token fan-out reads its targets in about 30 ms under
/// it, a 100,000-token end 84–91 ms (docs/BENCHMARKS.md), and every other
/// app's calls, on every event loop, would wait as long. A call about one app
/// (``MutationScope/app(_:)``: registrations, starts, updates, ends, prunes,
/// a settle of one app's intents) takes that app's lock only.
///
/// ## Calls about every app
/// The sweep and the intent claims (``PollsAcrossApps``) are applied app by
/// app, one lock at a time, in each app they find work in, sharing the pass's
/// limit (``pollAppByApp(_:scope:now:commit:)``); a settle or a renewal of
/// several apps' intents (``SplitsByApp``) too. Any
/// other rule about every app (``MutationScope/allApps``) holds every app's
/// lock at once and reads through ``AllApps``, which merges the apps' answers
/// as one state would give them. Such calls take `everyAppLock` first, so two
/// of them never wait for each other's locks; a call about one app holds one
/// lock and waits for no other, so no cycle of waits can form.
final class AppShards: @unchecked Sendable {
    private let lock = AdaptiveLock()
    /// Under `lock`.
    private var shards: [String: AppShard]
    /// Under `lock`.
    private var isClosed = false
    private let everyAppLock = AdaptiveLock()
    private static let empty = InMemoryState()

    init() {
        shards = [:]
    }

    /// The app's shard, made when it has none (a write is about to need it).
    func shard(_ appID: String) -> AppShard {
        lock.withLock {
            if let shard = shards[appID] { return shard }
            let shard = AppShard(appID: appID, state: InMemoryState(), isClosed: isClosed)
            shards[appID] = shard
            return shard
        }
    }

    /// `body` on the app's state under its lock; nil once the store is closed.
    func withApp<T>(_ appID: String, _ body: (inout InMemoryState) -> T) -> T? {
        let shard = shard(appID)
        shard.lock.lock()
        defer { shard.lock.unlock() }
        return shard.isClosed ? nil : body(&shard.state)
    }

    /// `body` on the app's state under its lock, or on an empty state for an
    /// app that has none (no shard is made for a read); nil once closed.
    func read<T>(_ appID: String, _ body: (InMemoryState) -> T) -> T? {
        let found: AppShard?? = lock.withLock { isClosed ? nil : .some(shards[appID]) }
        guard let found else { return nil }
        guard let shard = found else { return body(Self.empty) }
        shard.lock.lock()
        defer { shard.lock.unlock() }
        return shard.isClosed ? nil : body(shard.state)
    }

    /// The apps that have a shard; nil once closed.
    func appIDs() -> [String]? { lock.withLock { isClosed ? nil : Array(shards.keys) } }

    /// Every app's shard; nil once closed.
    private func listed() -> [AppShard]? { lock.withLock { isClosed ? nil : Array(shards.values) } }

    /// `body` with every app's lock held (see the type's notes); nil once closed.
    func withAllApps<T>(_ body: (inout AllApps) -> T) -> T? {
        everyAppLock.lock()
        defer { everyAppLock.unlock() }
        guard let listed = listed() else { return nil }
        var all = AllApps(listed, shards: self)
        defer { all.held.forEach { $0.lock.unlock() } }
        // A close that began after the list was taken closes each shard under its lock.
        guard !all.held.contains(where: \.isClosed) else { return nil }
        return body(&all)
    }

    /// Plans `mutation` and applies its writes under the locks of `scope`
    /// (the mutation's), then runs `commit` with the writes and the decision
    /// while still holding them. nil once the store is closed.
    func apply<M: StoreMutation, R>(
        _ mutation: M, scope: MutationScope, now: UnixTime,
        commit: (_ writes: [StoreWrite], _ decided: Result<M.Outcome, any Error>) -> R
    ) -> R? {
        switch scope {
        case let .app(appID):
            return withApp(appID) { Self.run(mutation, on: &$0, appID: appID, now: now, commit: commit) }
        case .allApps:
            return withAllApps { Self.run(mutation, on: &$0, appID: nil, now: now, commit: commit) }
        }
    }

    /// Tokens a call about one app may read before it is planned off the caller's
    /// event loop (a dispatcher slice's worth: about 2 ms of planning).
    static let offloadAbove = 8_192

    /// What ``applyOrQueue(_:scope:now:commit:)`` did.
    enum Applied<R> {
        case applied(R)
        /// To be applied on `shard.queue` by ``applyQueued(_:in:now:commit:)``.
        case queued(_ shard: AppShard)
    }

    /// As ``apply(_:scope:now:commit:)``, except for a call about one app that
    /// reads more than ``offloadAbove`` tokens, or that comes while such a call
    /// of its app waits or runs: that one is left to the app's queue. The
    /// memory store plans on the caller's event loop, and a 100,000-token
    /// fan-out planned there (20–30 ms) would hold up every other call on
    /// that loop, every app's (docs/BENCHMARKS.md).
    func applyOrQueue<M: StoreMutation, R>(
        _ mutation: M, scope: MutationScope, now: UnixTime,
        commit: (_ writes: [StoreWrite], _ decided: Result<M.Outcome, any Error>) -> R
    ) -> Applied<R>? {
        guard case let .app(appID) = scope else { return apply(mutation, scope: scope, now: now, commit: commit).map { .applied($0) } }
        let shard = shard(appID)
        // Behind a queued call of its app without taking the lock the queued call may hold.
        if shard.queued.load(ordering: .acquiring) > 0 {
            shard.queued.add(1, ordering: .acquiringAndReleasing)
            return .queued(shard)
        }
        shard.lock.lock()
        defer { shard.lock.unlock() }
        guard !shard.isClosed else { return nil }
        if shard.queued.load(ordering: .acquiring) > 0
            || mutation.tokensRead(in: shard.state, upTo: Self.offloadAbove + 1) > Self.offloadAbove
        {
            shard.queued.add(1, ordering: .acquiringAndReleasing)
            return .queued(shard)
        }
        return .applied(Self.run(mutation, on: &shard.state, appID: appID, now: now, commit: commit))
    }

    /// Applies a call that ``applyOrQueue(_:scope:now:commit:)`` left to `shard.queue`, on it. nil once closed.
    func applyQueued<M: StoreMutation, R>(
        _ mutation: M, in shard: AppShard, now: UnixTime,
        commit: (_ writes: [StoreWrite], _ decided: Result<M.Outcome, any Error>) -> R
    ) -> R? {
        shard.lock.lock()
        defer { shard.lock.unlock() }
        defer { shard.queued.subtract(1, ordering: .acquiringAndReleasing) }
        guard !shard.isClosed else { return nil }
        return Self.run(mutation, on: &shard.state, appID: shard.appID, now: now, commit: commit)
    }

    private static func run<M: StoreMutation, R>(
        _ mutation: M, on state: inout some MutableState, appID: String?, now: UnixTime,
        commit: (_ writes: [StoreWrite], _ decided: Result<M.Outcome, any Error>) -> R
    ) -> R {
        do throws(DomainError) {
            let plan = try state.applyPlan(mutation, now: now)
            assert(
                appID == nil || plan.writes.allSatisfy { $0.appID == appID },
                "\(M.self) said it is about \(appID ?? "") only, and planned a write about another app")
            return commit(plan.writes, .success(plan.outcome))
        } catch {
            return commit([], .failure(error))
        }
    }

    /// The parts of a mutation about several apps that is applied app by app,
    /// each with the app it is about: a ``SplitsByApp``'s parts. nil for a
    /// mutation applied whole.
    func parts<M: StoreMutation>(of mutation: M, scope: MutationScope) -> [(appID: String, part: M)]? {
        guard case .allApps = scope else { return nil }
        if let split = mutation as? any SplitsByApp {
            return split.partsByApp.map { part in
                guard case let .app(appID) = part.scope else { preconditionFailure("a part of \(M.self) is about every app") }
                return (appID, part as! M)
            }
        }
        return nil
    }

    /// A poll across apps (``PollsAcrossApps``) applied app by app, one app's
    /// lock at a time: in each app whose state it finds work in, earliest work
    /// first, the poll with what is left of its limit, until the limit is used. `commit` gets each
    /// app's writes under that app's lock. nil for a mutation that is no such poll; a rule's error ends
    /// the pass (the apps before it keep their part), as a close does.
    func pollAppByApp<M: StoreMutation>(
        _ mutation: M, scope: MutationScope, now: UnixTime, commit: (_ writes: [StoreWrite]) -> Void
    ) -> Result<M.Outcome, any Error>? {
        guard case .allApps = scope, let poll = mutation as? any PollsAcrossApps else { return nil }
        return pollAppByApp(poll, answering: M.Outcome.self, now: now, commit: commit)
    }

    private func pollAppByApp<P: PollsAcrossApps, Outcome>(
        _ poll: P, answering: Outcome.Type, now: UnixTime, commit: (_ writes: [StoreWrite]) -> Void
    ) -> Result<Outcome, any Error> {
        guard let listed = listed() else { return .failure(ActivityStoreError.closed) }
        // Each app asked where its first piece of work falls, one lock at a time...
        var withWork: [(first: PollOrder, shard: AppShard)] = []
        for shard in listed {
            shard.lock.lock()
            defer { shard.lock.unlock() }
            guard !shard.isClosed else { return .failure(ActivityStoreError.closed) }
            if let first = poll.firstWork(in: shard.state, now: now) { withWork.append((first, shard)) }
        }
        // ...then the apps with work, earliest first, each with what is left of the limit.
        var outcome = poll.idleOutcome
        var left = poll.limit
        for (_, shard) in withWork.sorted(by: { $0.first < $1.first }) where left > 0 {
            shard.lock.lock()
            defer { shard.lock.unlock() }
            guard !shard.isClosed else { return .failure(ActivityStoreError.closed) }
            do throws(DomainError) {
                let plan = try shard.state.applyPlan(poll.limited(to: left), now: now)
                assert(
                    plan.writes.allSatisfy { $0.appID == shard.appID },
                    "\(P.self) planned a write about another app than the one it was applied to")
                commit(plan.writes)
                outcome = poll.merged(outcome, plan.outcome)
                left -= poll.work(of: plan.outcome)
            } catch {
                return .failure(error)
            }
        }
        return .success(outcome as! Outcome)
    }

    /// The outcome of a mutation applied in parts: a ``SplitsByApp`` answers nothing.
    static func partsOutcome<M: StoreMutation>(of _: M.Type) -> M.Outcome { () as! M.Outcome }

    /// Closes every shard: a call that holds an app's lock finishes first, every later one finds it closed.
    /// False when it was closed already.
    func close() -> Bool {
        let listed: [AppShard]? = lock.withLock {
            defer { isClosed = true }
            return isClosed ? nil : Array(shards.values)
        }
        guard let listed else { return false }
        for shard in listed { shard.lock.withLock { shard.isClosed = true } }
        return true
    }

    /// Every app's state, copied with every lock held (a value copy: each live
    /// state then copies only what is written to it afterwards).
    func copies() -> [String: InMemoryState]? { withAllApps { $0.states } }

    /// One state holding every app's: for tests and diagnostics.
    static func merged(_ states: [String: InMemoryState]) -> InMemoryState {
        var merged = InMemoryState()
        for state in states.values { state.forEachWrite { merged.apply($0) } }
        return merged
    }
}

/// What ``AppShards/apply(_:scope:now:commit:)`` plans against and writes to: one app's state, or every app's.
protocol MutableState: StateReader {
    /// Plans `mutation` against this state and applies its writes (``InMemoryState/applyPlan(_:now:)``).
    mutating func applyPlan<M: StoreMutation>(_ mutation: M, now: UnixTime) throws(DomainError) -> MutationPlan<M.Outcome>
}

extension InMemoryState: MutableState {}
