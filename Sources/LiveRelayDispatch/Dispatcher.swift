import LiveRelayAPNs
import LiveRelayPushOutlet
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The APNs dispatcher pool as a ``PushSink``: it runs a ``DispatchScheduler``
/// and does what its actions say (write requests to transports, answer
/// waiting calls, prune tokens, log and count), nothing more.
///
/// The scheduler is behind a lock rather than confined to one loop because
/// its callers are on every loop (the service's calls, the transports'
/// answers) and admission must answer synchronously before a store write.
/// Actions run outside the lock, one step at a time in the order the
/// scheduler produced them: an answer that arrives while actions run (a
/// transport that answers at once) is queued, not recursed into, so a fan-out
/// of 100k pushes does not grow the stack.
///
/// Time comes from `eventLoop`: its `now` and its scheduled tasks drive
/// retries, deadlines and the drain; a test passes a
/// `NIOAsyncTestingEventLoop` and moves time itself. The wall `clock` only
/// turns a batch's `expiresAt` (wall-clock UNIX time) into a deadline on the loop.
public final class Dispatcher: PushSink, @unchecked Sendable {
    private let eventLoop: any EventLoop
    private let clock: any WallClock
    private let pruner: any TokenPruner
    private let ledger: (any DispatchLedger)?
    private let logger: Logger
    private let metrics: DispatchMetrics
    private let replyMargin: TimeAmount
    private let apnsIDInstance: UInt32
    let drainGracePeriod: TimeAmount
    private let transports: any APNsTransportProvider

    private let lock = NIOLock()
    // Guarded by `lock`.
    private var scheduler: DispatchScheduler
    private var waiters: [CallID: EventLoopPromise<EnqueueResult>] = [:]
    private var outbox: [DispatchActions] = []
    private var performing = false
    private var wakeup: (at: NIODeadline, task: Scheduled<Void>)?
    private var shutdownPromise: EventLoopPromise<Void>?

    /// - Parameters:
    ///   - transports: the APNs client (its pools by route); the dispatcher
    ///     looks a route's transport up per send and never shuts it down.
    ///   - ledger: told when every push of a durable batch is final.
    public init(
        configuration: DispatcherConfiguration,
        transports: any APNsTransportProvider,
        eventLoop: any EventLoop,
        clock: any WallClock = SystemClock(),
        pruner: any TokenPruner,
        ledger: (any DispatchLedger)? = nil,
        logger: Logger
    ) {
        self.ledger = ledger
        self.eventLoop = eventLoop
        self.clock = clock
        self.pruner = pruner
        self.logger = logger
        self.metrics = DispatchMetrics(knownApps: Set(configuration.apps.map(\.appID)))
        self.replyMargin = configuration.replyMargin
        self.apnsIDInstance = configuration.apnsIDInstance
        self.drainGracePeriod = configuration.drainGracePeriod
        self.transports = transports
        self.scheduler = DispatchScheduler(configuration: configuration)
    }

    // MARK: PushSink

    public var isShuttingDown: Bool { lock.withLock { scheduler.phase != .running } }

    /// See ``DispatchScheduler/admit(appID:)`` for the exact rule.
    public func admit(appID: String) -> PushAdmission {
        let admission = lock.withLock { scheduler.admit(appID: appID) }
        if case .queueFull = admission { metrics.refused(appID: appID) }
        return admission
    }

    public func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
        enqueue(batch, options: EnqueueOptions(), on: eventLoop)
    }

    public func enqueue(_ batch: PushBatch, options: EnqueueOptions, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
        let now = self.eventLoop.now
        var replyBy: NIODeadline?
        var sendBy: NIODeadline?
        if options.waitForDelivery, let deadline = options.deadline {
            // A waiting call with pushes still in flight is answered DEADLINE_EXCEEDED
            // DeliveryIncomplete half the margin before its deadline: at the deadline itself
            // the connection answers a plain DEADLINE_EXCEEDED first, without the account.
            // A push not sent by the whole margin before it is not sent at all, since its
            // answer could not come back in time.
            replyBy = deadline - .nanoseconds(replyMargin.nanoseconds / 2)
            sendBy = deadline - replyMargin
        }
        // A call that does not wait has been answered "queued" long before its
        // pushes leave: their life is theirs, bounded by the batch's expiry (and
        // the app's maximum push lifetime, which the scheduler applies), never by
        // the RPC's deadline, so a busy queue or an APNs outage delays them
        // instead of expiring them silently after a CLI's 10 s.
        if let expiresAt = batch.expiresAt {
            let expires = now + .milliseconds(expiresAt.milliseconds - clock.now().milliseconds)
            sendBy = min(sendBy ?? expires, expires)
        }
        // The promise is registered under the lock, before any answer can complete the call.
        let (call, more, future): (CallID, Bool, EventLoopFuture<EnqueueResult>) = lock.withLock {
            let step = scheduler.beginEnqueue(
                batch, waitForDelivery: options.waitForDelivery, sendBy: sendBy, replyBy: replyBy, now: now)
            outbox.append(step.actions)
            if let immediate = step.immediate { return (step.call, step.more, eventLoop.makeSucceededFuture(immediate)) }
            let promise = eventLoop.makePromise(of: EnqueueResult.self)
            waiters[step.call] = promise
            return (step.call, step.more, promise.futureResult)
        }
        logger.debug(
            "pushes queued",
            metadata: [
                "request_id": "\(options.requestID.map(String.init) ?? "-")", "app": "\(batch.appID)",
                "activity": "\(batch.activityID)", "targets": "\(batch.targets.count)",
                "apns_id": "\(APNsCallID(instance: apnsIDInstance, call: call.raw))-*",
            ])
        run()
        if more { takeMoreLater(call) }
        return future
    }

    /// Takes the call's next slice on the dispatcher's loop in its next tick:
    /// a task run now (`execute`) would run in this tick, after the one before
    /// it, and the loop's I/O (other calls, APNs's answers) would wait for the
    /// whole fan-out again.
    private func takeMoreLater(_ call: CallID) {
        eventLoop.scheduleTask(in: .microseconds(100)) { self.takeMore(call) }
    }

    /// Takes the next slice of a large fan-out (``DispatchScheduler/continueEnqueue(_:now:)``).
    private func takeMore(_ call: CallID) {
        let now = eventLoop.now
        let (more, answered): (Bool, (EventLoopPromise<EnqueueResult>?, EnqueueResult)?) = lock.withLock {
            let step = scheduler.continueEnqueue(call, now: now)
            outbox.append(step.actions)
            return (step.more, step.immediate.map { (waiters.removeValue(forKey: call), $0) })
        }
        run()
        if let (promise, result) = answered { promise?.succeed(result) }
        if more { takeMoreLater(call) }
    }

    // MARK: Configuration, queries and shutdown

    /// Adds an app or changes one while the server runs (``DispatchScheduler/configure(_:)``);
    /// pushes it already has queued go out by its new route at once.
    public func configure(_ app: DispatchApp) {
        metrics.know(app.appID)
        let now = eventLoop.now
        lock.withLock {
            outbox.append(scheduler.configure(app))
            outbox.append(scheduler.tick(now: now))
        }
        run()
    }

    /// The app's totals, or nil for an app the configuration does not know.
    public func counters(appID: String) -> DispatchCounters? { lock.withLock { scheduler.counters(appID: appID) } }

    /// The app's current route (nil for an app it does not know).
    public func route(appID: String) -> APNsRoute? { lock.withLock { scheduler.route(appID: appID) } }

    /// What APNs last said about the app's credentials, if it ever rejected them.
    public func credentialError(appID: String) -> CredentialError? {
        lock.withLock { scheduler.credentialError(appID: appID) }
    }

    /// Pushes not final yet, over every app.
    public var unfinishedCount: Int { lock.withLock { scheduler.unfinishedCount } }

    /// Every app's queue depth and capacity (``DispatchScheduler/queueLevels``).
    public var queueLevels: [QueueLevel] { lock.withLock { scheduler.queueLevels } }

    /// Stops admitting (new calls get UNAVAILABLE), sends what is queued for
    /// up to `gracePeriod`, fails the rest with `ShuttingDown` and waits for
    /// the answers in flight. Every waiting call is answered with its full
    /// account before the future succeeds. The transports stay open: their
    /// owner (the APNs client) closes them after this.
    public func shutdown(gracePeriod: TimeAmount = .seconds(10)) -> EventLoopFuture<Void> {
        let now = eventLoop.now
        let promise: EventLoopPromise<Void> = lock.withLock {
            if let existing = shutdownPromise { return existing }
            let promise = eventLoop.makePromise(of: Void.self)
            shutdownPromise = promise
            outbox.append(scheduler.beginShutdown(now: now, drainUntil: now + gracePeriod))
            return promise
        }
        run()
        return promise.futureResult
    }

    // MARK: Running actions

    /// Performs queued actions until none are left; only one thread does so at a time.
    private func run() {
        let owner: Bool = lock.withLock {
            if performing { return false }
            performing = true
            return true
        }
        guard owner else { return }
        while true {
            let steps: [DispatchActions] = lock.withLock {
                let steps = outbox
                outbox.removeAll()
                if steps.isEmpty {
                    performing = false
                    rescheduleLocked()
                }
                return steps
            }
            if steps.isEmpty { return }
            for step in steps { perform(step) }
        }
    }

    private func perform(_ actions: DispatchActions) {
        if !actions.sends.isEmpty { send(actions.sends) }
        if !actions.replies.isEmpty {
            let promises = lock.withLock { actions.replies.map { (waiters.removeValue(forKey: $0.call), $0.result) } }
            for (promise, result) in promises {
                // Only a waiting call's deadline answers it with pushes still in flight.
                if result.queued > 0 { promise?.fail(DeliveryDeadlineExceeded(account: result)) } else { promise?.succeed(result) }
            }
        }
        for dead in actions.prunes {
            logger.info(
                "pruning a token APNs declared dead",
                metadata: [
                    "app": "\(dead.appID)", "reason": "\(dead.reason)",
                ])
            pruner.prune(dead, on: eventLoop).whenFailure { error in
                self.logger.error("pruning failed", metadata: ["app": "\(dead.appID)", "error": "\(error)"])
            }
        }
        for (appID, error) in actions.credentialRejections {
            switch error.reason {
            case DispatchFailure.massDeviceTokenNotForTopic, DispatchFailure.massBadDeviceToken:
                // Not a dead device each: a configuration error that pruning would turn into lost tokens.
                logger.error(
                    "APNs rejected most of the app's tokens; none is pruned, and its pushes are held until a probe is accepted",
                    metadata: [
                        "app": "\(appID)", "reason": "\(error.reason)", "likely_wrong": "bundle id, key or APNs environment",
                        "probe_in_ms": "\(max(0, (error.suspendedUntil - eventLoop.now).nanoseconds / 1_000_000))",
                    ])
            default:
                logger.error(
                    "APNs rejected the app's credentials; its pushes are held (each until its send-by time) until a probe is accepted or the credentials change",
                    metadata: [
                        "app": "\(appID)", "status": "\(error.status)", "reason": "\(error.reason)",
                        "probe_in_ms": "\(max(0, (error.suspendedUntil - eventLoop.now).nanoseconds / 1_000_000))",
                    ])
            }
            metrics.credentialsRejected(appID: appID, reason: error.reason)
        }
        for (appID, held) in actions.holdChanges {
            if !held { logger.notice("the app's credentials work again: its held pushes are sent", metadata: ["app": "\(appID)"]) }
            metrics.appHeld(appID: appID, held)
            ledger?.dispatchHold(appID: appID, reason: held ? credentialError(appID: appID)?.reason ?? "CredentialsRejected" : nil)
        }
        if let ledger { for batch in actions.settled { ledger.settled(batch) } }
        for (route, transition) in actions.circuitChanges {
            switch transition {
            case let .opened(until):
                let cooldown = until - eventLoop.now
                logger.warning(
                    "APNs route failing: its circuit breaker opened; its pushes wait (and still expire on time)",
                    metadata: ["route": "\(route)", "cooldown_ms": "\(max(cooldown.nanoseconds, 0) / 1_000_000)"])
            case .halfOpened:
                logger.debug("APNs route circuit breaker half-open: sending one probe", metadata: ["route": "\(route)"])
            case .closed:
                logger.info("APNs route recovered: its circuit breaker closed", metadata: ["route": "\(route)"])
            }
            metrics.circuitTransition(route: route, transition)
        }
        metrics.record(outcomes: actions.outcomes, retries: actions.retries, sends: actions.sends)
        if actions.shutdownComplete { finishShutdown() }
    }

    /// Hands each route's sends to its transport in one batch (one transport
    /// lookup and one pool step per route, not per push); answers come back to
    /// ``received(_:)``.
    private func send(_ sends: [DispatchSend]) {
        var start = 0
        while start < sends.count {
            // Runs of one route: a step's sends are nearly always one app's, one route's.
            let route = sends[start].route
            var end = start + 1
            while end < sends.count, sends[end].route == route { end += 1 }
            let run = sends[start..<end]
            start = end
            guard let transport = transports.transport(for: route) else {
                let error = DispatchAnswer.transportError(.connectFailed("no transport for \(route)"))
                answer(run.map { ($0.push, error) })
                continue
            }
            transport.send(run.map { APNsTaggedRequest(tag: $0.push.raw, request: $0.request) }, to: self)
        }
    }

    private func answer(_ answers: [(PushID, DispatchAnswer)]) {
        let now = eventLoop.now
        lock.withLock { outbox.append(scheduler.answered(answers, now: now)) }
        run()
    }

    private func tick() {
        let now = eventLoop.now
        lock.withLock {
            wakeup = nil
            outbox.append(scheduler.tick(now: now))
        }
        run()
    }

    /// Keeps one scheduled task at the scheduler's next wake-up time. Called with `lock` held.
    private func rescheduleLocked() {
        let next = scheduler.nextWakeup
        if wakeup?.at == next { return }
        wakeup?.task.cancel()
        wakeup = nil
        guard let next else { return }
        let task = eventLoop.scheduleTask(deadline: next) { self.tick() }
        wakeup = (next, task)
    }

    private func finishShutdown() {
        let promise = lock.withLock { shutdownPromise }
        logger.info("dispatcher stopped")
        promise?.succeed()
    }
}

extension Dispatcher: APNsAnswerSink {
    /// The answers of one read of a connection: one scheduler step for all of them.
    public func received(_ answers: [APNsAnswer]) {
        answer(
            answers.map { answer in
                switch answer.result {
                case let .success(response): (PushID(raw: answer.tag), .response(response))
                case let .failure(error): (PushID(raw: answer.tag), .transportError(error))
                }
            })
    }
}
