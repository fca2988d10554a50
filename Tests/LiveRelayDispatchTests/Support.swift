import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOConcurrencyHelpers
import NIOCore

let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

func token(_ n: Int) -> String {
    let digits = String(n, radix: 16)
    return "cd" + String(repeating: "0", count: 62 - digits.count) + digits
}

func batch(
    app: String = "app-a", activity: String = "act-1", timestamp: Int64 = 1_700_000_000, tokens: [String],
    expiration: Int64 = 0
) throws -> PushBatch {
    PushBatch(
        appID: app, activityID: activity, event: .update, timestamp: timestamp,
        payload: APNsPayload(bytes: Array(#"{"aps":{"timestamp":\#(timestamp),"event":"update"}}"#.utf8)),
        headers: APNsHeaders(bundleID: "com.example." + app, expiration: expiration),
        targets: tokens.map { PushTarget(token: $0, environment: .production) },
        expiresAt: expiration > 0 ? UnixTime(seconds: expiration) : nil)
}

/// The aps timestamp a request carries, read back from its payload.
func timestamp(of request: APNsRequest) -> Int64? {
    // The builder writes `{"aps":{"timestamp":N,...` first.
    guard let head = request.payload.text.split(separator: ",").first,
        let digits = head.split(separator: ":").last
    else { return nil }
    return Int64(digits)
}

/// A scheduler configuration with no jitter, so back-off delays are exact.
func configuration(
    apps: [(String, Int)] = [("app-a", 100), ("app-b", 100)], maxInFlight: Int = 100, perTransport: Int = 100,
    quantum: Int = 4,
    retry: RetryPolicy = RetryPolicy(
        maxAttempts: 4, initialBackoff: .milliseconds(100),
        maxBackoff: .milliseconds(250), jitter: 0)
) -> DispatcherConfiguration {
    DispatcherConfiguration(
        apps: apps.map { DispatchApp(appID: $0.0, queueCapacity: $0.1, route: testRoute("key-" + $0.0)) },
        maxInFlight: maxInFlight, maxInFlightPerTransport: perTransport, quantum: quantum, retry: retry,
        credentialsCooldown: .seconds(60))
}

/// Drives a ``DispatchScheduler`` by hand: keeps the sends not yet answered
/// and every reply, prune and credential event, with a clock the test moves.
struct SchedulerDriver {
    var scheduler: DispatchScheduler
    var now = start
    var outstanding: [DispatchSend] = []
    var everSent: [DispatchSend] = []
    var replies: [CallID: EnqueueResult] = [:]
    var prunes: [PrunedToken] = []
    var credentialEvents: [(String, CredentialError)] = []
    var holdEvents: [(String, Bool)] = []
    var settled: [SettledBatch] = []
    /// The runs of final outcomes each step reported, for the metrics.
    var outcomes: [OutcomeCount] = []
    /// Every circuit breaker transition, with the time it happened.
    var circuitChanges: [(at: NIODeadline, route: APNsRoute, transition: CircuitBreaker.Transition)] = []
    var shutdownComplete = false

    init(_ configuration: DispatcherConfiguration = configuration()) {
        scheduler = DispatchScheduler(configuration: configuration)
    }

    mutating func absorb(_ actions: DispatchActions) {
        outstanding += actions.sends
        everSent += actions.sends
        for reply in actions.replies {
            precondition(replies[reply.call] == nil, "a call answered twice")
            replies[reply.call] = reply.result
        }
        prunes += actions.prunes
        credentialEvents += actions.credentialRejections
        holdEvents += actions.holdChanges
        settled += actions.settled
        outcomes += actions.outcomes
        circuitChanges += actions.circuitChanges.map { (now, $0.route, $0.transition) }
        shutdownComplete = shutdownComplete || actions.shutdownComplete
    }

    @discardableResult
    mutating func enqueue(
        _ batch: PushBatch, wait: Bool = true, sendBy: NIODeadline? = nil,
        replyBy: NIODeadline? = nil
    ) -> (CallID, EnqueueResult?) {
        let step = scheduler.enqueue(batch, waitForDelivery: wait, sendBy: sendBy, replyBy: replyBy, now: now)
        absorb(step.actions)
        if let immediate = step.immediate, wait { replies[step.call] = immediate }
        return (step.call, step.immediate)
    }

    /// Registers the call and takes its first slice (``DispatchScheduler/beginEnqueue(_:waitForDelivery:sendBy:replyBy:now:)``).
    @discardableResult
    mutating func begin(_ batch: PushBatch, wait: Bool = true) -> EnqueueStep {
        let step = scheduler.beginEnqueue(batch, waitForDelivery: wait, sendBy: nil, replyBy: nil, now: now)
        absorb(step.actions)
        if let immediate = step.immediate, wait { replies[step.call] = immediate }
        return step
    }

    /// Takes the call's next slice.
    @discardableResult
    mutating func takeMore(_ call: CallID) -> EnqueueStep {
        let step = scheduler.continueEnqueue(call, now: now)
        absorb(step.actions)
        if let immediate = step.immediate { replies[call] = immediate }
        return step
    }

    /// Answers the oldest outstanding send (or the one to `token`).
    @discardableResult
    mutating func answer(_ answer: DispatchAnswer, token: String? = nil) -> DispatchSend {
        let index = token.map { t in outstanding.firstIndex { $0.request.deviceToken == t }! } ?? 0
        let send = outstanding.remove(at: index)
        absorb(scheduler.answered(send.push, answer, now: now))
        return send
    }

    mutating func respond(_ status: Int, _ reason: String? = nil, timestamp: Int64? = nil, token: String? = nil) {
        answer(.response(APNsResponse(status: status, reason: reason, timestampMilliseconds: timestamp)), token: token)
    }

    mutating func advance(by amount: TimeAmount) {
        now = now + amount
        absorb(scheduler.tick(now: now))
    }
}

/// Records what it is asked to prune.
final class RecordingPruner: TokenPruner, @unchecked Sendable {
    private let lock = NIOLock()
    private var _pruned: [PrunedToken] = []
    var pruned: [PrunedToken] { lock.withLock { _pruned } }

    func prune(_ token: PrunedToken, on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        lock.withLock { _pruned.append(token) }
        return eventLoop.makeSucceededVoidFuture()
    }
}
