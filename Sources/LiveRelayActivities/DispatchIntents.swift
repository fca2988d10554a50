import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// Keeps the promise of durable dispatch intents (docs/PROTOCOL.md,
/// "Delivery guarantees") for one node:
/// - as the sink the service hands its pushes to, in front of the dispatcher,
///   knows which intents the dispatcher holds: every durable batch from the
///   moment it is handed over until it settles;
/// - as the dispatcher's ``DispatchLedger``, deletes an intent once every
///   push of its batch is accounted for, keeping the batch's final account for
///   replays of the call (settlements that arrive while one store write is
///   under way go together in the next);
/// - renews, every third of a lease, the leases of the intents the
///   dispatcher holds, and only those: a row this node leased without handing
///   it over (the call's COMMIT answered with an unknown outcome, so the call
///   failed, yet landed; or a claim's did) runs out of lease and is claimed
///   again, so its pushes are sent while this node lives;
/// - claims intents nobody works on (at start every one left by an earlier
///   process when `takeOverAtStart`, the single-node SQLite case; then those
///   whose lease ran out: another node died, or this node never held them)
///   and hands their pushes to the sink again.
///
/// In the server's `ServiceGroup` it starts before the dispatcher, so it stops
/// after it: the settlements of the dispatcher's drain are written, then
/// (with `releaseAtShutdown`) this node's leases are given up, so another
/// node takes the unsent work over at once instead of after the lease.
public final class DispatchIntents: DispatchLedger, PushSink, Service, @unchecked Sendable {
    public struct Configuration: Sendable {
        public var lease: IntentLease
        /// Claim every intent another process left, leased or not: only for a
        /// store that no other node uses (SQLite).
        public var takeOverAtStart: Bool
        /// How often to look for intents to claim.
        public var claimInterval: Duration
        /// Intents per claim (one store transaction).
        public var claimLimit: Int
        /// At graceful shutdown, end this node's leases (for stores shared by several nodes).
        public var releaseAtShutdown: Bool

        public init(
            lease: IntentLease, takeOverAtStart: Bool, claimInterval: Duration = .seconds(1), claimLimit: Int = 100,
            releaseAtShutdown: Bool = false
        ) {
            self.lease = lease
            self.takeOverAtStart = takeOverAtStart
            self.claimInterval = claimInterval
            self.claimLimit = max(1, claimLimit)
            self.releaseAtShutdown = releaseAtShutdown
        }
    }

    private let configuration: Configuration
    private let store: any ActivityStore
    private let clock: any WallClock
    private let logger: Logger
    private let eventLoop: any EventLoop
    private let sink = NIOLockedValueBox<(any PushSink)?>(nil)

    private struct Settling {
        var pending: [SettledIntent] = []
        var writing = false
        var idle: [CheckedContinuation<Void, Never>] = []
    }
    private let settling = NIOLockedValueBox(Settling())
    /// The intents whose batches the sink holds: handed over and not settled.
    private let held = NIOLockedValueBox(Set<IntentKey>())
    /// Whether this node can send an app's pushes; nil: every app.
    private let servable = NIOLockedValueBox<(@Sendable (String) -> Bool)?>(nil)

    public init(
        configuration: Configuration, store: any ActivityStore, clock: any WallClock = SystemClock(), logger: Logger,
        on eventLoop: any EventLoop
    ) {
        self.configuration = configuration
        self.store = store
        self.clock = clock
        self.logger = logger
        self.eventLoop = eventLoop
    }

    /// The sink that every batch goes on to, the service's and the claimed
    /// intents': set once the dispatcher exists (it needs this ledger when it
    /// is built, so it cannot be passed here).
    public func attach(_ sink: any PushSink) { self.sink.withLockedValue { $0 = sink } }

    /// The intents the sink holds now (tests, diagnostics).
    public var heldIntents: Set<IntentKey> { held.withLockedValue { $0 } }

    /// Hands on only the pushes of apps `isServable` says this node can send. An app whose
    /// APNs key only some nodes can read (a `file:` or `env:` key source) is not this node's
    /// to fail: its intents are left unheld, so they run out of lease and a node that has
    /// the key claims them.
    public func serveOnly(where isServable: @escaping @Sendable (String) -> Bool) {
        servable.withLockedValue { $0 = isServable }
    }

    private func canServe(_ appID: String) -> Bool {
        servable.withLockedValue { $0 }?(appID) ?? true
    }

    // MARK: PushSink

    public func admit(appID: String) -> PushAdmission {
        sink.withLockedValue { $0 }?.admit(appID: appID) ?? .shuttingDown
    }

    public var isShuttingDown: Bool { sink.withLockedValue { $0 }?.isShuttingDown ?? true }

    public func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
        enqueue(batch, options: EnqueueOptions(), on: eventLoop)
    }

    /// Notes a durable batch as held before it reaches the sink: its settlement may come before this returns.
    public func enqueue(_ batch: PushBatch, options: EnqueueOptions, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
        guard let sink = sink.withLockedValue({ $0 }) else {
            return eventLoop.makeFailedFuture(DispatchIntentsError.noSink)
        }
        if batch.durable {
            guard canServe(batch.appID) else {
                // Recorded, and left for a node that can send it: the call is answered with its pushes queued.
                logger.debug("leaving a dispatch intent for a node that can send the app's pushes", metadata: ["app": "\(batch.appID)"])
                return eventLoop.makeSucceededFuture(EnqueueResult(queued: batch.targets.count))
            }
            held.withLockedValue { _ = $0.insert(IntentKey(batch)) }
        }
        return sink.enqueue(batch, options: options, on: eventLoop)
    }

    // MARK: DispatchLedger

    public func settled(_ batch: SettledBatch) {
        held.withLockedValue { _ = $0.remove(IntentKey(appID: batch.appID, activityID: batch.activityID, timestamp: batch.timestamp)) }
        let start: [SettledIntent]? = settling.withLockedValue { state in
            state.pending.append(SettledIntent(batch))
            guard !state.writing else { return nil }
            state.writing = true
            defer { state.pending.removeAll() }
            return state.pending
        }
        if let start { write(start) }
    }

    public func dispatchHold(appID: String, reason: String?) {
        DispatchHoldRecorder(store: store, clock: clock, logger: logger, on: eventLoop).dispatchHold(appID: appID, reason: reason)
    }

    /// One store write at a time; what settled meanwhile goes in the next.
    private func write(_ settled: [SettledIntent]) {
        store.apply(SettleIntents(settled), now: clock.now(), on: eventLoop).whenComplete { result in
            if case let .failure(error) = result {
                // The intents stay: they are sent again (at least once) when claimed, and settled then.
                self.logger.warning(
                    "could not delete settled dispatch intents", metadata: ["count": "\(settled.count)", "error": "\(error)"])
            }
            let next: (settled: [SettledIntent]?, idle: [CheckedContinuation<Void, Never>]) = self.settling.withLockedValue { state in
                if state.pending.isEmpty {
                    state.writing = false
                    defer { state.idle.removeAll() }
                    return (nil, state.idle)
                }
                defer { state.pending.removeAll() }
                return (state.pending, [])
            }
            if let settled = next.settled { self.write(settled) }
            for waiter in next.idle { waiter.resume() }
        }
    }

    /// Returns once every settlement reported so far is written (or failed).
    public func flush() async {
        await withCheckedContinuation { continuation in
            let done = settling.withLockedValue {
                if !$0.writing { return true }
                $0.idle.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    // MARK: Service

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                // Two loops, so that a long claim (a large backlog taken page by page) never holds
                // back the renewals: this node's own leases would lapse, and another node resend them.
                try await withThrowingTaskGroup(of: Void.self) { loops in
                    loops.addTask {
                        var first = true
                        while true {
                            _ = try await self.claimUntilClear(evenIfLeased: first && self.configuration.takeOverAtStart)
                            first = false
                            try await Task.sleep(for: self.configuration.claimInterval)
                        }
                    }
                    loops.addTask {
                        while true {
                            try await Task.sleep(for: self.configuration.lease.duration / 3)
                            await self.renew()
                        }
                    }
                    try await loops.waitForAll()
                }
            }
        } catch is CancellationError {
            // Graceful shutdown.
        }
        await flush()
        if configuration.releaseAtShutdown { await release() }
    }

    /// Claims and resends until a claim finds nothing (or the sink refuses an
    /// app: the rest waits for the next turn). Returns the batches handed to the sink.
    @discardableResult
    public func claimUntilClear(evenIfLeased: Bool = false) async throws -> Int {
        guard let sink = sink.withLockedValue({ $0 }) else { return 0 }
        var resent = 0
        while true {
            if case .shuttingDown = sink.admit(appID: "") { return resent }
            let claim = ClaimIntents(lease: configuration.lease, evenIfLeased: evenIfLeased, limit: configuration.claimLimit)
            // Every page may look past other nodes' leases: a claim never finds this node's own.
            let claimed: ClaimedIntents
            do {
                claimed = try await store.apply(claim, now: clock.now(), on: eventLoop).get()
            } catch {
                logger.error("claiming dispatch intents failed", metadata: ["error": "\(error)"])
                return resent
            }
            report(claimed)
            var refused = false
            for batch in claimed.batches {
                // Held already: its lease lapsed while the dispatcher worked on it (renewals failing for a
                // whole lease); the claim has renewed it, and a second copy would send its pushes twice.
                if held.withLockedValue({ $0.contains(IntentKey(batch)) }) { continue }
                guard canServe(batch.appID) else {
                    logger.warning(
                        "left a dispatch intent for a node that can send the app's pushes (this node cannot read its APNs key)",
                        metadata: ["intent": "\(IntentKey(batch))"])
                    continue
                }
                if case .queueFull = sink.admit(appID: batch.appID) { refused = true }
                _ = enqueue(batch, on: eventLoop)
                resent += 1
            }
            if claimed.isEmpty || refused { return resent }
            try Task.checkCancellation()
        }
    }

    private func report(_ claimed: ClaimedIntents) {
        for dropped in claimed.dropped {
            logger.error(
                "dropped a dispatch intent that cannot be sent",
                metadata: ["intent": "\(dropped.key)", "reason": "\(dropped.reason)"])
        }
        for left in claimed.left {
            logger.warning(
                "left a dispatch intent of a format version this build does not read, for a node that does",
                metadata: ["intent": "\(left)"])
        }
        if !claimed.expired.isEmpty {
            logger.warning("dispatch intents expired before they could be resumed", metadata: ["count": "\(claimed.expired.count)"])
        }
        if !claimed.batches.isEmpty {
            logger.info(
                "resuming dispatch intents",
                metadata: [
                    "intents": "\(claimed.batches.count)", "pushes": "\(claimed.batches.reduce(0) { $0 + $1.targets.count })",
                ])
        }
    }

    /// Extends the leases of the intents the sink holds; a failure is logged (the leases may run out and
    /// another node resend).
    public func renew() async {
        let keys = held.withLockedValue { Array($0) }
        guard !keys.isEmpty else { return }
        do {
            try await store.apply(RenewIntents(lease: configuration.lease, keys: keys), now: clock.now(), on: eventLoop).get()
        } catch {
            logger.error("renewing dispatch intent leases failed", metadata: ["error": "\(error)"])
        }
    }

    /// Ends the leases of the intents the sink still holds (what the dispatcher gave up at shutdown), so
    /// another node claims them at once; the rows this node does not hold have run out of lease already.
    public func release() async {
        let keys = held.withLockedValue { Array($0) }
        guard !keys.isEmpty else { return }
        var ended = configuration.lease
        ended.duration = .zero
        do {
            try await store.apply(RenewIntents(lease: ended, keys: keys), now: UnixTime(milliseconds: 0), on: eventLoop).get()
        } catch {
            logger.error("releasing dispatch intent leases failed", metadata: ["error": "\(error)"])
        }
    }
}

/// Why ``DispatchIntents`` could not take a batch.
public enum DispatchIntentsError: Error, Hashable, Sendable {
    /// Asked before ``DispatchIntents/attach(_:)``: a wiring error.
    case noSink
}
