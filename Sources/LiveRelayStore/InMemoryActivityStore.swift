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
/// Real, not a fake: dictionaries with the three hot indexes
/// (``InMemoryState``), and each `apply` plans and writes under one lock, so
/// check-and-apply is atomic. Its durability is the process's: "durable" in
/// the protocol's sense means applied, and a restart forgets everything.
/// Futures complete at once on the caller's loop (no thread hop), except
/// ``usage(of:now:on:)``'s, whose scan of every activity runs off the loop.
public final class InMemoryActivityStore: InMemoryStateStore, @unchecked Sendable {
    private let lock = AdaptiveLock()
    private var state: InMemoryState
    private var isClosed = false

    public init(state: InMemoryState = InMemoryState()) {
        self.state = state
    }

    /// A copy of the whole state, for tests and diagnostics.
    public var snapshot: InMemoryState { lock.withLock { state } }

    /// A tenth of the SQL stores': a pass holds the lock every call waits
    /// for, and deleting 10,000 due tokens held it 46–100 ms at a million
    /// tokens, 1,000 for 2–7 ms (docs/BENCHMARKS.md, "The token sweep's read").
    /// The sweeper runs passes until one finds nothing, so a mass expiry
    /// still clears in one turn, in short holds.
    public var sweepLimit: Int { 1_000 }

    public func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        eventLoop.makeCompletedFuture(locked(mutation, now: now))
    }

    /// No future: `body` runs at once on the caller's loop (or is handed to `eventLoop` from elsewhere), after the lock is released.
    /// The service calls it through `any ActivityStore`, so it runs unspecialized
    /// unless the mutation is one specialized here: RegisterToken, the most
    /// frequent call (rpc-register-token-memory: -1.7% instructions).
    @_specialize(where M == RegisterToken)
    public func apply<M: StoreMutation>(
        _ mutation: M, now: UnixTime, on eventLoop: any EventLoop,
        then body: @escaping @Sendable (Result<M.Outcome, any Error>) -> Void
    ) {
        let result = locked(mutation, now: now)
        if eventLoop.inEventLoop {
            body(result)
        } else {
            eventLoop.execute { body(result) }
        }
    }

    @_specialize(where M == RegisterToken)
    private func locked<M: StoreMutation>(_ mutation: M, now: UnixTime) -> Result<M.Outcome, any Error> {
        lock.withLock {
            if isClosed { return .failure(ActivityStoreError.closed) }
            do throws(DomainError) {
                return .success(try state.apply(mutation, now: now))
            } catch {
                return .failure(error)
            }
        }
    }

    /// At once: nothing the memory store holds is waiting for a disk.
    public func read<T: Sendable>(on eventLoop: any EventLoop, _ body: (InMemoryState) -> T) -> EventLoopFuture<T> {
        let result: Result<T, any Error> = lock.withLock {
            isClosed ? .failure(ActivityStoreError.closed) : .success(body(state))
        }
        return eventLoop.makeCompletedFuture(result)
    }

    /// Activities counted per lock hold by ``usage(of:now:on:)``: about 1.5 ms of
    /// scanning, so a quota refresh over a million activities (58 ms) does not
    /// hold up every call for its whole length.
    static let usageSlice = 16_384

    /// One scan of the activities for all of `appIDs`, in slices with the lock
    /// let go between them, off the event loop (the quota refresher runs it
    /// every few seconds). Token counts are kept per app, so they are exact;
    /// an activity started or ended during the scan may be counted or not.
    public func usage(of appIDs: [String], now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<[String: AppUsage]> {
        Self.usage(of: appIDs, now: now, on: eventLoop) { body in
            self.lock.withLock { self.isClosed ? nil : body(self.state) }
        }
    }

    /// The usage scan of a store whose state sits behind a lock (this one, the
    /// journaled one): `locked` runs its argument on the state under the lock,
    /// or returns nil once the store is closed.
    static func usage(
        of appIDs: [String], now: UnixTime, on eventLoop: any EventLoop,
        locked: @escaping @Sendable (_ body: (InMemoryState) -> Void) -> Void?
    ) -> EventLoopFuture<[String: AppUsage]> {
        let promise = eventLoop.makePromise(of: [String: AppUsage].self)
        DispatchQueue.global().async {
            var live = Dictionary(appIDs.map { ($0, 0) }, uniquingKeysWith: { first, _ in first })
            var next: Int? = 0
            while let start = next {
                let scanned: Void? = locked { next = $0.countLiveActivities(of: &live, at: now, from: start, limit: usageSlice) }
                guard scanned != nil else { return promise.fail(ActivityStoreError.closed) }
            }
            var usage: [String: AppUsage] = [:]
            guard locked({ usage = $0.usage(counted: live) }) != nil else { return promise.fail(ActivityStoreError.closed) }
            promise.succeed(usage)
        }
        return promise.futureResult
    }

    public func close() async throws {
        lock.withLock { isClosed = true }
    }
}
