import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import LiveRelayWire
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The service behind the four activity RPCs and Ping: the domain's rules,
/// applied atomically by a store, with the resulting pushes handed to a sink.
///
/// Order of a mutating call: permission and app check; the sink's admission
/// (a full app queue is RESOURCE_EXHAUSTED here, before anything is stored, so
/// a refused call has no effect at all); the service's own admission
/// (``AdmissionGate``: calls in flight per app and in all, and whether the
/// deadline can still be met; RegisterToken too, it has no queue of its own
/// but waits in the store's like every call); the rule runs inside the store (so a
/// payload above 4,096 bytes, a finished activity or a reused key is refused
/// before anything is stored or queued); the store's future succeeds once the
/// new state is durable; only then are the pushes handed to the sink, and the
/// reply reports the sink's account of them.
///
/// `wait_for_delivery` is passed to the sink with the call's deadline: the
/// dispatcher answers once every push is final (`complete = true`), or fails
/// the call with DEADLINE_EXCEEDED at its deadline if pushes are still in
/// flight then; test doubles that deliver nothing answer at once (their
/// pushes stay `queued`).
/// Counts are never made up: each comes from the sink's ``EnqueueResult``.
public struct ActivityService: LiveRelayService {
    /// The version Ping reports.
    public static let version = "1.0"

    let store: any ActivityStore
    /// The source of "now" for every rule (the sweeper reads it too).
    public let clock: any WallClock
    let logger: Logger
    let sink: any PushSink
    /// Replaced whole when the tenant registry changes (``reconfigure(apps:)``): a call reads it once.
    let apps: NIOLockedValueBox<AppDirectory>
    private let serverVersion: String
    private let intents: IntentLease?
    private let pushToStartRetention: UnixTime.Duration?
    let admission: AdmissionGate
    let quotas: QuotaGate
    /// Internal for tests (which apps have a label of their own).
    let metrics = AppCallMetrics()
    /// The apps' broadcast channels; nil on a server that keeps none (a request naming one is FAILED_PRECONDITION).
    let channels: ChannelService?
    /// The priority-10 budgets of activities and channels.
    private let priorityBudget: PriorityBudgetGate

    /// - Parameters:
    ///   - store: where state lives (SQLite, PostgreSQL, or memory).
    ///   - clock: the source of "now" for every rule, timestamp and Ping.
    ///   - sink: where accepted pushes go: the dispatcher.
    ///   - apps: which app ids exist and their bundle ids; every id by default.
    ///   - intents: record each accepted call's pushes as a durable intent
    ///     leased to this node (``DispatchIntents`` settles and resumes them); nil records none.
    ///   - pushToStartRetention: how long a push-to-start token registered
    ///     without `expires_at` lives after its last registration; nil keeps it until removed.
    ///   - admission: how much work is accepted before calls are refused (``AdmissionLimits``' defaults unless given).
    ///   - quotas: each app's quotas (none unless given).
    ///   - channels: the apps' broadcast channels.
    ///   - priorityBudget: the apps' hourly priority-10 budgets (none unless given).
    public init(
        store: any ActivityStore,
        clock: any WallClock = SystemClock(),
        logger: Logger,
        sink: any PushSink,
        apps: AppDirectory = .open,
        serverVersion: String = ActivityService.version,
        intents: IntentLease? = nil,
        pushToStartRetention: UnixTime.Duration? = nil,
        admission: AdmissionGate = AdmissionGate(),
        quotas: QuotaGate = QuotaGate(),
        channels: ChannelService? = nil,
        priorityBudget: PriorityBudgetGate = PriorityBudgetGate()
    ) {
        self.channels = channels
        self.priorityBudget = priorityBudget
        self.quotas = quotas
        self.intents = intents
        self.pushToStartRetention = pushToStartRetention
        self.admission = admission
        self.store = store
        self.clock = clock
        self.logger = logger
        self.sink = sink
        self.apps = NIOLockedValueBox(apps)
        self.serverVersion = serverVersion
    }

    // MARK: LiveRelayService

    /// Counted in the app's call metrics where it is answered, not through ``measured(_:appID:context:_:)``:
    /// the most frequent call saves that wrapper's callback on the reply's future (its
    /// closure and callback node).
    public func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        let start = NIODeadline.now()
        let appID = request.appID
        let tokenQuota: CountQuota?
        let ticket: AdmissionTicket
        do throws(RPCError) {
            if case let .failure(error) = admit(appID: appID, context: context) { throw error }
            switch quotas.admitCall(appID: appID, pushes: false, adding: .tokens) {
            case let .refused(refusal): throw refusal
            case let .admitted(countQuota): tokenQuota = countQuota
            }
            ticket = try admission.admit(appID: appID, deadline: context.deadline).get()
        } catch {
            metrics.record(appID: callLabel(appID, context: context), method: "RegisterToken", status: error.status, since: start)
            return context.fail(error)
        }
        let mutation = RegisterToken(request, pushToStartRetention: pushToStartRetention, tokenQuota: tokenQuota)
        // One future (the reply's) and one callback, not the store's future with a `map` and a
        // `flatMapErrorThrowing` after the bookkeeping (a future and a callback each, and each
        // future costly to make and tear down), and the callback holds the references
        // it needs, not a copy of the whole service.
        let replied = context.eventLoop.makePromise(of: RegisterTokenReply.self)
        store.apply(mutation, now: clock.now(), on: context.eventLoop) { [admission, quotas, logger, metrics] result in
            // The slot is free before the caller sees the answer.
            admission.finish(ticket)
            switch result {
            case let .success(plan):
                if case .created = plan.result { quotas.accepted(appID: appID, pushes: 0, added: .tokens) }
                metrics.record(appID: appID, method: "RegisterToken", status: .ok, since: start)
                replied.succeed(Self.reply(to: plan.result))
            case let .failure(error):
                let failed = Self.rpcError(error, call: "RegisterToken", quotas: quotas, logger: logger)
                metrics.record(appID: appID, method: "RegisterToken", status: failed.status, since: start)
                replied.fail(failed)
            }
        }
        return replied.futureResult
    }

    public func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        let activityID = request.activityID ?? ""
        // The channel is looked up only to refuse one the app does not have: the start names it in its payload.
        return withChannel(request.channelID, appID: request.appID, method: "StartActivity", context: context) { _ in
            activityCall(
                "StartActivity", appID: request.appID, wait: request.waitForDelivery, adds: .liveActivities,
                // The start goes to push-to-start tokens, not through the channel it subscribes to.
                ask: PriorityAsk(
                    activityID: activityID, channelID: nil, priority: request.priority.apnsPriority,
                    strict: request.strictPriorityBudget == true, idempotent: request.idempotencyKey?.isEmpty == false),
                context: context
            ) { app, quota, priority in
                var start = StartActivity(request, app: app, intents: intents, activityQuota: quota)
                start.command.priority = priority
                return start
            }
        }
        .map {
            StartActivityReply(
                activityID: activityID, timestamp: $0.timestamp, summary: $0.summary,
                replayed: $0.replayed, state: $0.state.proto)
        }
    }

    public func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        change(
            "UpdateActivity", appID: request.appID, activityID: request.activityID, channelID: request.channelID,
            priority: request.priority, strict: request.strictPriorityBudget, idempotencyKey: request.idempotencyKey,
            wait: request.waitForDelivery, context: context
        ) { ChangeActivity(request, app: $0, intents: intents) }
        .map {
            UpdateActivityReply(
                timestamp: $0.timestamp, summary: $0.summary, replayed: $0.replayed,
                state: $0.state.proto)
        }
    }

    public func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        change(
            "EndActivity", appID: request.appID, activityID: request.activityID, channelID: request.channelID,
            priority: request.priority, strict: request.strictPriorityBudget, idempotencyKey: request.idempotencyKey,
            wait: request.waitForDelivery, context: context
        ) { ChangeActivity(request, app: $0, intents: intents) }
        .map {
            EndActivityReply(
                timestamp: $0.timestamp, summary: $0.summary, replayed: $0.replayed,
                state: $0.state.proto)
        }
    }

    /// Update's and End's path: the channel they name (if any) resolved, the
    /// priority the budget allows, then the one path of every activity call.
    private func change(
        _ call: String, appID: String?, activityID: String?, channelID: String?, priority: Priority?, strict: Bool?,
        idempotencyKey: String?, wait: Bool?, context: CallContext, _ make: @escaping @Sendable (App) -> ChangeActivity
    ) -> EventLoopFuture<CallReply> {
        withChannel(channelID, appID: appID, method: call, context: context) { channel in
            activityCall(
                call, appID: appID, wait: wait,
                ask: PriorityAsk(
                    activityID: activityID ?? "", channelID: channel?.id, priority: priority.apnsPriority, strict: strict == true,
                    idempotent: idempotencyKey?.isEmpty == false),
                context: context
            ) { app, _, priority in
                var change = make(app)
                change.channel = channel?.target
                change.priority = priority
                return change
            }
        }
    }

    /// The one path of Start, Update and End: admit the caller, check the
    /// app's quotas, ask the sink for room, apply the rule in the store, hand
    /// the pushes to the sink, map refusals to statuses. `adds` names what an
    /// accepted call adds to the app's count quotas (a Start: a live activity);
    /// the rule gets that quota when the app is at it. (Its caller, ``withChannel``, counts it in the metrics.)
    private func activityCall<M: StoreMutation>(
        _ call: String, appID: String?, wait: Bool?, adds: CountQuota.Kind? = nil, ask: PriorityAsk, context: CallContext,
        mutation: (App, CountQuota?, Int) -> M
    ) -> EventLoopFuture<CallReply> where M.Outcome == ActivityCallOutcome {
        switch admit(appID: appID ?? "", context: context) {
        case let .failure(error):
            return context.fail(error)
        case let .success(app):
            let countQuota: CountQuota?
            switch quotas.admitCall(appID: app.id, pushes: true, adding: adds) {
            case let .refused(refusal): return context.fail(refusal)
            case let .admitted(quota): countQuota = quota
            }
            if let refusal = Self.refusal(sink.admit(appID: app.id), appID: app.id) { return context.fail(refusal) }
            // Over the hour's priority-10 budget: priority 5 instead, or a refusal in strict mode.
            var priority = ask.priority
            switch priorityBudget.decide(
                appID: app.id, activityID: ask.activityID, channelID: ask.channelID, priority: ask.priority, strict: ask.strict)
            {
            case .send: break
            case .downgrade: priority = 5
            case let .refuse(retryAfterMS):
                let refusal = PriorityBudgetGate.rpcError(appID: app.id, retryAfterMS: retryAfterMS)
                // A resent call replays whatever the budget says now (its first attempt was accepted): only a new one is refused.
                guard ask.idempotent else { return context.fail(refusal) }
                return replay(mutation(app, nil, priority), or: refusal, context: context)
            }
            let downgraded = priority != ask.priority
            let ticket: AdmissionTicket
            switch admission.admit(appID: app.id, deadline: context.deadline) {
            case let .success(admitted): ticket = admitted
            case let .failure(error): return context.fail(error)
            }
            let options = EnqueueOptions(
                waitForDelivery: wait ?? false, deadline: context.deadline,
                requestID: UInt64(context.requestID.rawValue))
            let stored = store.apply(mutation(app, countQuota, priority), now: clock.now(), on: context.eventLoop)
            // The slot is freed before the caller can see the answer, so a caller's next call never
            // finds its previous one still counted. Registered first: it runs before the failure reaches the caller.
            stored.whenFailure { [admission] _ in admission.finish(ticket) }
            return stored.flatMap { outcome in
                if case let .accepted(accepted) = outcome {
                    self.quotas.accepted(appID: app.id, pushes: accepted.batch.targets.count, added: adds)
                    self.priorityBudget.record(
                        appID: app.id, activityID: ask.activityID, channelID: ask.channelID, priority: priority)
                }
                var answered = self.finish(outcome, options: options, context: context)
                if downgraded, outcome.accepted != nil {
                    // Every push of the call went at priority 5 instead of the 10 asked for.
                    answered = answered.map {
                        var reply = $0
                        reply.summary.downgraded = reply.summary.targeted
                        return reply
                    }
                }
                // The pushes are with the sink now: a call that waits for delivery leaves
                // admission here, and the dispatcher's queue bounds its pushes.
                self.admission.finish(ticket)
                return answered
            }
            .flatMapErrorThrowing { throw Self.rpcError($0, call: call, quotas: self.quotas, logger: self.logger) }
        }
    }

    /// The first reply if `mutation` replays an accepted call, else `refusal`; nothing is written either way.
    private func replay<M: StoreMutation>(
        _ mutation: M, or refusal: RPCError, context: CallContext
    ) -> EventLoopFuture<CallReply> where M.Outcome == ActivityCallOutcome {
        store.apply(ReplayOnly(mutation: mutation), now: clock.now(), on: context.eventLoop)
            .flatMapErrorThrowing { _ in throw refusal }
            .flatMapThrowing { stored in
                guard let stored else { throw refusal }
                return CallReply(timestamp: stored.timestamp, summary: Self.replayed(stored), replayed: true, state: stored.state)
            }
    }

    /// Counts the call in `liverelay_app_calls_total` and times it, whatever its outcome.
    func measured<Reply>(
        _ method: String, appID: String, context: CallContext, _ call: () -> EventLoopFuture<Reply>
    ) -> EventLoopFuture<Reply> {
        let start = NIODeadline.now()
        let future = call()
        future.whenComplete { result in
            switch result {
            case .success:
                // A call that succeeded got past ``admit(appID:context:)``: the app is the label.
                metrics.record(appID: appID, method: method, status: .ok, since: start)
            case let .failure(error):
                metrics.record(
                    appID: callLabel(appID, context: context), method: method,
                    status: (error as? RPCError)?.status ?? .internal, since: start)
            }
        }
        return future
    }

    /// The `app` label of a refused call: the app's id when the key may act
    /// for it and the server has it (disabled or not), else
    /// ``MetricHandlers/otherApp``. The per-app labels are bounded, first come
    /// first named; a key naming made-up apps, or apps it may not act for,
    /// must not use them up and leave the real apps unnamed.
    func callLabel(_ appID: String, context: CallContext) -> String {
        guard context.principal.mayActFor(appID: appID) else { return MetricHandlers.otherApp }
        let directory = apps.withLockedValue { $0 }
        return directory.app(appID) != nil || directory.isDisabled(appID) ? appID : MetricHandlers.otherApp
    }

    public func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        context.eventLoop.makeSucceededFuture(
            PingReply(payload: request.payload, serverTimeMS: clock.now().milliseconds, serverVersion: serverVersion))
    }

    /// The apps that exist from now on (an app created, changed or removed
    /// while serving); calls already past their app check are not affected.
    public func reconfigure(apps: AppDirectory) {
        self.apps.withLockedValue { $0 = apps }
    }

    // MARK: Housekeeping

    /// One expiry sweep (at most `limit` activities and tokens; by default the store's
    /// ``ActivityStore/sweepLimit``) at `now`, by default the clock's (``ActivitySweeper`` passes
    /// its ``SweepClock``'s).
    public func sweep(limit: Int? = nil, at now: UnixTime? = nil, on eventLoop: any EventLoop) -> EventLoopFuture<SweepReport> {
        let swept = store.apply(Sweep(limit: limit ?? store.sweepLimit), now: now ?? clock.now(), on: eventLoop).map { report in
            if !report.isEmpty {
                self.logger.info(
                    "swept activities and tokens",
                    metadata: [
                        "expired": "\(report.expired.count)", "dismissed": "\(report.dismissed.count)",
                        "purged": "\(report.purged.count)", "tokens_deleted": "\(report.deletedTokens.count)",
                    ])
            }
            return report
        }
        swept.whenFailure { error in self.logger.error("sweep failed", metadata: ["error": "\(error)"]) }
        return swept
    }

    // MARK: Internals

    /// What a Start, Update or End asks of the priority-10 budget: its activity, its channel, the priority asked for.
    struct PriorityAsk {
        var activityID: String
        var channelID: String?
        var priority: Int
        var strict: Bool
        /// The request has an idempotency key: it may be a resend of a call accepted before.
        var idempotent: Bool
    }

    /// The parts of a reply the three activity RPCs share.
    private struct CallReply {
        var timestamp: Int64
        var summary: DeliverySummary
        var replayed: Bool
        var state: Activity.State
    }

    /// PERMISSION_DENIED, NOT_FOUND for an unknown app, and no new work for a
    /// call that is already cancelled or past its deadline.
    func admit(appID: String, context: CallContext) -> Result<App, RPCError> {
        if let error = context.principal.checkApp(appID) { return .failure(error) }
        if context.cancellation.isCancelled { return .failure(RPCError(.cancelled, "call cancelled")) }
        if let deadline = context.deadline, deadline <= .now() {
            return .failure(RPCError(.deadlineExceeded, "deadline passed before the call started"))
        }
        let directory = apps.withLockedValue { $0 }
        if directory.isDisabled(appID) {
            return .failure(
                RPCError(
                    .failedPrecondition, "app \"\(appID)\" is disabled; an operator may enable it again",
                    details: ErrorDetails(reason: "AppDisabled")))
        }
        guard let app = directory.app(appID) else {
            return .failure(
                RPCError(
                    .notFound, DomainError.unknownApp(appID: appID).message,
                    details: ErrorDetails(reason: DomainError.unknownApp(appID: appID).reason)))
        }
        return .success(app)
    }

    /// RESOURCE_EXHAUSTED for a full app queue (reason `QueueFull`, with the
    /// sink's retry hint), UNAVAILABLE while the sink drains; nil when admitted.
    static func refusal(_ admission: PushAdmission, appID: String) -> RPCError? {
        switch admission {
        case .admitted:
            return nil
        case let .queueFull(unfinished, capacity, retryAfterMS):
            return RPCError(
                .resourceExhausted,
                "the push queue of app \"\(appID)\" is full (\(unfinished) pushes, capacity \(capacity))",
                details: ErrorDetails(retryAfterMS: retryAfterMS, reason: "QueueFull"))
        case .shuttingDown:
            return RPCError(.unavailable, "push dispatch is shutting down", details: ErrorDetails(reason: "ShuttingDown"))
        }
    }

    /// Hands an accepted call's pushes to the sink and builds the summary from its account.
    private func finish(
        _ outcome: ActivityCallOutcome, options: EnqueueOptions, context: CallContext
    ) -> EventLoopFuture<CallReply> {
        switch outcome {
        case let .replayed(stored):
            return context.eventLoop.makeSucceededFuture(
                CallReply(timestamp: stored.timestamp, summary: Self.replayed(stored), replayed: true, state: stored.state))
        case let .accepted(call):
            let reply = { @Sendable (result: EnqueueResult) -> CallReply in
                CallReply(
                    timestamp: call.reply.timestamp,
                    summary: Self.summary(Self.planned(call.reply), after: result),
                    replayed: false, state: call.reply.state)
            }
            guard !call.batch.targets.isEmpty else { return context.eventLoop.makeSucceededFuture(reply(EnqueueResult())) }
            logger.debug(
                "pushes accepted",
                metadata: [
                    "app": "\(call.batch.appID)", "activity": "\(call.batch.activityID)",
                    "event": "\(call.batch.event.rawValue)", "timestamp": "\(call.batch.timestamp)",
                    "targets": "\(call.batch.targets.count)", "bytes": "\(call.batch.payload.count)",
                ])
            // The state is durable: its pushes go whatever the caller does now. A caller
            // that cancelled meanwhile no longer waits for them, so neither does the call.
            var options = options
            if context.cancellation.isCancelled { options.waitForDelivery = false }
            return sink.enqueue(call.batch, options: options, on: context.eventLoop).hop(to: context.eventLoop).map(reply)
        }
    }
}

extension UnresolvedStartTarget.Kind {
    var wire: TargetKind {
        switch self {
        case .pushToStartToken: .pushToStartToken
        case .externalUserID: .externalUserID
        case .allDevices: .allDevices
        }
    }
}
