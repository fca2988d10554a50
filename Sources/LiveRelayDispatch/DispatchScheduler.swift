import LiveRelayAPNs
import LiveRelayCollections
import LiveRelayPushOutlet
import NIOCore

/// One push in the scheduler: a (call, token) pair, numbered in call order.
public struct PushID: Hashable, Sendable, CustomStringConvertible {
    public var raw: UInt64
    public var description: String { "push-\(raw)" }
}

/// One accepted batch.
public struct CallID: Hashable, Sendable, CustomStringConvertible {
    public var raw: UInt64
    public var description: String { "call-\(raw)" }
}

/// A request the event-loop side must write to the route's transport.
public struct DispatchSend: Sendable {
    public var push: PushID
    public var appID: String
    public var route: APNsRoute
    public var request: APNsRequest
}

/// What came back for one send.
public enum DispatchAnswer: Hashable, Sendable {
    case response(APNsResponse)
    case transportError(APNsTransportError)
}

/// What the event-loop side must do after a scheduler step, in this order.
public struct DispatchActions: Sendable {
    public var sends: [DispatchSend] = []
    /// Waiting calls to answer now, with their account.
    public var replies: [(call: CallID, result: EnqueueResult)] = []
    public var prunes: [PrunedToken] = []
    public var credentialRejections: [(appID: String, error: CredentialError)] = []
    /// Apps whose dispatch was held or resumed, for the logs and the `liverelay_dispatch_app_held` gauge.
    public var holdChanges: [(appID: String, held: Bool)] = []
    /// Circuit breakers that changed state, by route, for the logs and the metrics.
    public var circuitChanges: [(route: APNsRoute, transition: CircuitBreaker.Transition)] = []
    /// Final outcomes since the last step, for the metrics: runs of one app's
    /// one outcome (a fan-out's answers are one long run), so counting a push
    /// hashes nothing.
    public var outcomes: [OutcomeCount] = []
    /// Retries scheduled per app since the last step, for the metrics.
    public var retries: [String: Int] = [:]
    /// Durable batches whose every push is final, for the ledger.
    public var settled: [SettledBatch] = []
    /// Draining finished: nothing is left unfinished.
    public var shutdownComplete = false

    public init() {}
}

/// The dispatcher's brain as a value: per-app bounded queues, deficit round
/// robin over the send slots, per-token ordering and coalescing, retries with
/// back-off until a push's send-by time, a circuit breaker per route, a guard
/// against mass pruning per app, expiry and the account of every push. No I/O
/// and no clock: every step takes `now` and returns ``DispatchActions``, so
/// the rules are tested without sockets or sleeping, and the event-loop side
/// only executes them.
///
/// Ordering: a token has at most one push in flight or waiting to retry (its
/// lane is busy), so two pushes to one token are never on the wire together
/// and cannot overtake each other on different streams or connections. Each
/// lane remembers the newest timestamp taken per activity: an older push
/// arriving later is superseded at once; a newer one supersedes the queued
/// or retrying older one; a retry of a push that a newer one has overtaken is
/// superseded instead of sent.
public struct DispatchScheduler {
    struct Push {
        enum State { case queued, inFlight, backingOff }
        var call: UInt64
        var app: Int
        /// The slot of its token's lane in the app's ``LaneTable``.
        var lane: Int
        /// Where the token was registered: the transport routes by it.
        var environment: APNsEnvironment
        /// Set when the target is a broadcast channel (its lane's token is the channel id).
        var channelPolicy: ChannelStoragePolicy?
        var state = State.queued
        var attempts = 0
        /// The route it was last sent by (the app's route may change while it is in flight).
        var route = 0
        /// Whether its send in flight is its route's half-open probe.
        var probe = false
        /// Whether an ExpiredProviderToken answer was already retried at once:
        /// a second one in a row backs off, so a token source that keeps making
        /// rejected tokens (a skewed clock) cannot spin a push without pause.
        var refreshedAtOnce = false

        mutating func sent(route: Int, probe: Bool) {
            state = .inFlight
            attempts += 1
            self.route = route
            self.probe = probe
        }
    }

    struct AppState {
        var id: String
        var capacity: Int
        var route: Int
        var quantum: Int
        var lanes = LaneTable()
        /// Lanes (slots) that can send now.
        var ready = CircularBuffer<Int>()
        var deficit = 0
        var isActive = false
        var credentialError: CredentialError?
        var counters = DispatchCounters()
        var maxPushLifetime: TimeAmount?
        var pruneGuard: MassPruneGuard
    }

    enum CallTimer { case sendBy(UInt64), replyBy(UInt64) }

    enum Phase: Equatable {
        case running
        case draining(until: NIODeadline)
        /// Past the grace period: only the answers in flight are awaited.
        case finishing
        case stopped
    }

    let configuration: DispatcherConfiguration
    public private(set) var routes: [APNsRoute] = []
    var routeIndex: [APNsRoute: Int] = [:]
    var apps: [AppState] = []
    var appIndex: [String: Int] = [:]
    /// The apps with a ``CredentialError`` (few): the ones ``tick(now:)`` and ``nextWakeup`` look at for holds.
    var heldApps: Set<Int> = []
    /// By number: pushes and calls are numbered in order, so they are found without hashing.
    var pushes = SequentialMap<Push>()
    var calls = SequentialMap<Call>()
    var active = CircularBuffer<Int>()
    var inFlight = 0
    var routeInFlight: [Int] = []
    /// One per route, by route index.
    var breakers: [CircuitBreaker] = []
    var unfinished = 0
    var retryTimers = DeadlineHeap<UInt64>()
    var callTimers = DeadlineHeap<CallTimer>()
    var phase = Phase.running
    var random: SplitMix64
    var nextPush: UInt64 = 1
    var nextCall: UInt64 = 1
    /// The call whose slice is being taken, and its account if it became final in that step.
    var enqueuing: UInt64?
    var finishedWhileEnqueuing: EnqueueResult?
    /// Calls whose targets are being taken a slice at a time, by call number.
    var taking: [UInt64: Taking] = [:]
    /// When idle lanes are next looked for (nil while there are no lanes).
    var nextSweep: NIODeadline?
    /// Pushes failed `AppNotConfigured`, by the id of an app the configuration does
    /// not know (an app without APNs credentials yet), for its account
    /// (``counters(appID:)``); handed to the app's counters when it is configured.
    /// At most ``maxUnroutedApps`` ids: a key for every app may name any id.
    var unrouted: [String: Int] = [:]

    /// Ids kept in ``unrouted``; the pushes of ids past it are failed and counted in
    /// the metrics (app "other") all the same, but not per id.
    static let maxUnroutedApps = 1_000

    public init(configuration: DispatcherConfiguration) {
        self.configuration = configuration
        self.random = SplitMix64(seed: configuration.randomSeed)
        for app in configuration.apps where appIndex[app.appID] == nil { configure(app) }
    }

    /// Adds an app, or changes one's capacity, weight, lifetime or route while
    /// it has work: pushes already queued go by the new route; those in flight
    /// are counted against the route they went by. A new route clears the
    /// app's credential suspension and its mass-pruning window, so replaced
    /// credentials are tried (and judged) afresh at once. A new lifetime
    /// applies to later calls.
    @discardableResult
    public mutating func configure(_ app: DispatchApp) -> DispatchActions {
        var actions = DispatchActions()
        let route: Int
        if let known = routeIndex[app.route] {
            route = known
        } else {
            route = routes.count
            routes.append(app.route)
            routeIndex[app.route] = route
            routeInFlight.append(0)
            breakers.append(CircuitBreaker(policy: configuration.circuitBreaker))
        }
        let quantum = configuration.quantum * app.weight
        guard let a = appIndex[app.appID] else {
            appIndex[app.appID] = apps.count
            var state = AppState(
                id: app.appID, capacity: app.queueCapacity, route: route, quantum: quantum,
                maxPushLifetime: app.maxPushLifetime, pruneGuard: MassPruneGuard(policy: configuration.massPruneGuard))
            // Its account since the dispatcher started includes the pushes it failed before it had a route.
            if let failed = unrouted.removeValue(forKey: app.appID) { state.counters.failures[DispatchFailure.appNotConfigured] = failed }
            apps.append(state)
            return actions
        }
        if apps[a].route != route {
            // Other credentials: tried afresh, the whole queue at once.
            if apps[a].credentialError != nil { actions.holdChanges.append((app.appID, false)) }
            apps[a].credentialError = nil
            heldApps.remove(a)
            apps[a].pruneGuard.reset()
        } else if apps[a].credentialError != nil {
            // The app changed in the registry (a new key under the same key id, say): one probe now.
            apps[a].credentialError?.probing = true
        }
        apps[a].capacity = app.queueCapacity
        apps[a].route = route
        apps[a].quantum = quantum
        apps[a].maxPushLifetime = app.maxPushLifetime
        return actions
    }

    // MARK: Queries

    /// The app's totals; for an app the configuration does not know, the pushes it
    /// failed `AppNotConfigured` (nil when it has none).
    public func counters(appID: String) -> DispatchCounters? {
        if let a = appIndex[appID] { return apps[a].counters }
        return unrouted[appID].map { failed in
            var counters = DispatchCounters()
            counters.failures[DispatchFailure.appNotConfigured] = failed
            return counters
        }
    }

    public func credentialError(appID: String) -> CredentialError? { appIndex[appID].flatMap { apps[$0].credentialError } }

    /// The app's way to APNs: its channel management goes the same way.
    public func route(appID: String) -> APNsRoute? { appIndex[appID].map { routes[apps[$0].route] } }

    /// Pushes not final yet, over every app.
    public var unfinishedCount: Int { unfinished }

    /// Every configured app's unfinished pushes and queue capacity, in configuration order.
    public var queueLevels: [QueueLevel] {
        apps.map { QueueLevel(appID: $0.id, unfinished: $0.counters.unfinished, capacity: $0.capacity) }
    }

    public var inFlightCount: Int { inFlight }

    /// Tokens the scheduler remembers for the app (their lanes), idle ones included.
    public func laneCount(appID: String) -> Int? { appIndex[appID].map { apps[$0].lanes.count } }

    /// The circuit breaker of a route the scheduler has seen.
    public func circuitBreaker(for route: APNsRoute) -> CircuitBreaker? { routeIndex[route].map { breakers[$0] } }

    /// When ``tick(now:)`` has work (a retry due, a call's deadline, a circuit
    /// breaker's cooldown over, the end of draining).
    public var nextWakeup: NIODeadline? {
        var earliest = [retryTimers.earliest, callTimers.earliest, nextSweep].compactMap { $0 }.min()
        for breaker in breakers {
            if let reopens = breaker.reopensAt { earliest = min(earliest ?? reopens, reopens) }
        }
        if case let .draining(until) = phase { earliest = min(earliest ?? until, until) }
        // A hold's end, for its probe (a hold already probing waits for answers, not time).
        for a in heldApps {
            if let error = apps[a].credentialError, !error.probing {
                earliest = min(earliest ?? error.suspendedUntil, error.suspendedUntil)
            }
        }
        return earliest
    }

    // MARK: Admission and enqueueing

    /// The exact rule: a call is admitted while the app has fewer unfinished
    /// pushes (queued, waiting to retry, or in flight) than its capacity. An
    /// admitted call's whole fan-out is then taken, however large, so the
    /// queue may exceed its capacity by what the calls admitted before it
    /// filled bring; every later call is refused until pushes finish. An app
    /// the configuration does not know is admitted and its pushes fail with
    /// `AppNotConfigured`, so the reply says why.
    public mutating func admit(appID: String) -> PushAdmission {
        guard phase == .running else { return .shuttingDown }
        guard let a = appIndex[appID] else { return .admitted }
        let unfinished = apps[a].counters.unfinished
        guard unfinished >= apps[a].capacity else { return .admitted }
        apps[a].counters.refusedCalls += 1
        let retryAfter = UInt32(clamping: configuration.queueFullRetryAfter.nanoseconds / 1_000_000)
        return .queueFull(unfinished: unfinished, capacity: apps[a].capacity, retryAfterMS: retryAfter)
    }

    /// Puts an idle lane with pending pushes in its app's ready queue, and the app in the round.
    mutating func makeReady(_ lane: inout Lane, slot: Int, app a: Int, front: Bool) {
        guard lane.busy == nil, !lane.pending.isEmpty, !lane.inReady else { return }
        lane.inReady = true
        if front { apps[a].ready.prepend(slot) } else { apps[a].ready.append(slot) }
        if !apps[a].isActive {
            apps[a].isActive = true
            active.append(a)
        }
    }

    // MARK: Sending

    /// Fills free send slots by deficit round robin: the app at the head of
    /// the round sends up to its quantum, then goes to the back. An app whose
    /// transport is at its limit, or whose route's circuit breaker is open (or
    /// half-open with its probe out), or whose credentials are held, is passed
    /// over without losing its credit, so a slow or failing endpoint (or key)
    /// holds back only the apps that use it; their pushes stay queued.
    mutating func pump(now: NIODeadline, _ actions: inout DispatchActions) {
        guard phase != .stopped else { return }
        var passedOver = 0
        while inFlight < configuration.maxInFlight, let a = active.first, passedOver < active.count {
            let route = apps[a].route
            if routeInFlight[route] >= configuration.maxInFlightPerTransport || !breakerAllowsSend(route, now: now, &actions)
                || isHeld(a)
            {
                active.append(active.removeFirst())
                passedOver += 1
                continue
            }
            guard let slot = apps[a].ready.popFirst() else {
                active.removeFirst()
                apps[a].isActive = false
                apps[a].deficit = 0
                continue
            }
            var lane = apps[a].lanes.take(slot)
            lane.inReady = false
            var chosen: (id: UInt64, call: UInt64)?
            while lane.busy == nil, chosen == nil, let id = lane.pending.popFirst() {
                if let push = pushes[id] { chosen = (id, push.call) }
            }
            guard let (id, callID) = chosen else {
                apps[a].lanes.put(consume lane, at: slot)
                continue
            }
            // The call's shared part only: no copy of its account.
            let call = calls[callID]!.fixed
            if let sendBy = call.sendBy, sendBy <= now {
                finish(id, expiry(app: a), &actions)
                makeReady(&lane, slot: slot, app: a, front: true)
                apps[a].lanes.put(consume lane, at: slot)
                continue
            }
            if apps[a].deficit <= 0 { apps[a].deficit += apps[a].quantum }
            lane.busy = id
            let token = apps[a].lanes.token(at: slot)
            apps[a].lanes.put(consume lane, at: slot)
            let probe = breakers[route].sent()
            let push = pushes.update(id) { push in
                push.sent(route: route, probe: probe)
                return push
            }!
            inFlight += 1
            routeInFlight[route] += 1
            apps[a].counters.inFlight += 1
            apps[a].counters.attempts += 1
            actions.sends.append(
                DispatchSend(
                    push: PushID(raw: id), appID: apps[a].id, route: routes[route],
                    request: APNsRequest(
                        deviceToken: token, headers: call.headers, payload: call.payload,
                        apnsID: call.apnsCall.apnsID(push: id - call.first),
                        environment: push.environment, sendBy: call.sendBy,
                        broadcast: push.channelPolicy.map {
                            APNsBroadcast(channelID: token, bundleID: call.headers.bundleID, storagePolicy: $0)
                        })))
            passedOver = 0
            apps[a].deficit -= 1
            if apps[a].deficit <= 0 {
                active.removeFirst()
                if apps[a].ready.isEmpty {
                    apps[a].isActive = false
                    apps[a].deficit = 0
                } else {
                    active.append(a)
                }
            }
        }
    }

    /// Whether the route's breaker lets a send through now, ending a cooldown that is over.
    mutating func breakerAllowsSend(_ route: Int, now: NIODeadline, _ actions: inout DispatchActions) -> Bool {
        if let transition = breakers[route].advance(now: now) { actions.circuitChanges.append((routes[route], transition)) }
        return breakers[route].allowsSend
    }

    // MARK: Accounting

    /// Ends a push that has a record.
    mutating func finish(_ id: UInt64, _ outcome: PushOutcome, _ actions: inout DispatchActions) {
        guard let push = pushes.removeValue(forKey: id) else { return }
        if case .failed = outcome {
            settle(call: push.call, app: push.app, outcome, target: apps[push.app].lanes.token(at: push.lane), &actions)
        } else {
            settle(call: push.call, app: push.app, outcome, &actions)
        }
    }

    /// Counts one push of `call` as final, and answers a waiting call whose last push this was.
    /// `target` (its token, or channel id) is kept with a durable call's failures for its settlement.
    mutating func settle(
        call id: UInt64, app a: Int, _ outcome: PushOutcome, target: String? = nil, _ actions: inout DispatchActions
    ) {
        apps[a].counters.record(outcome)
        unfinished -= 1
        if let last = actions.outcomes.indices.last, actions.outcomes[last].app == a, actions.outcomes[last].outcome == outcome {
            actions.outcomes[last].count += 1
        } else {
            actions.outcomes.append(OutcomeCount(appID: apps[a].id, outcome: outcome, count: 1, app: a))
        }
        // One lookup for the call's account, not one per access.
        let queued = calls.update(id) { call in
            call.account.record(outcome)
            if case let .failed(reason) = outcome, let target, call.durable {
                call.failedPushes.append(FailedPush(target: target, reason: reason))
            }
            return call.account.result.queued
        }
        guard queued == 0, let call = calls.removeValue(forKey: id) else { return }
        if id == enqueuing { finishedWhileEnqueuing = call.account.result }
        if call.waits, !call.replied { actions.replies.append((CallID(raw: id), call.account.result)) }
        // A push given up for the shutdown is not accounted for: the intent stays for the next start.
        if call.durable, call.account.result.failures[DispatchFailure.shuttingDown] == nil {
            actions.settled.append(
                SettledBatch(
                    appID: apps[a].id, activityID: call.activityID, timestamp: call.timestamp, account: call.account.result,
                    failedPushes: call.failedPushes, idempotencyKey: call.fixed.idempotencyKey))
        }
    }
}

/// `count` pushes of one app that ended with one outcome.
public struct OutcomeCount: Sendable {
    public var appID: String
    public var outcome: PushOutcome
    public var count: Int
    /// The app's index in the scheduler: compared instead of the id (-1 for an app it does not know).
    var app: Int
}

/// How full one app's queue is: what `/metrics` reports as `liverelay_queue_depth` and `liverelay_queue_capacity`.
public struct QueueLevel: Hashable, Sendable {
    public var appID: String
    /// Pushes not final: queued, waiting to retry, or in flight.
    public var unfinished: Int
    public var capacity: Int
}
