import LiveRelayAPNs
import LiveRelayBackoff
import NIOCore

/// One app as the dispatcher sees it.
public struct DispatchApp: Sendable {
    public var appID: String
    /// Unfinished pushes (queued, waiting to retry or in flight) above which
    /// new calls are refused; see ``Dispatcher/admit(appID:)`` for the exact rule.
    public var queueCapacity: Int
    /// The app's way to APNs (its destination and signing key), shared with
    /// the apps that have the same; the transport comes from the dispatcher's
    /// ``LiveRelayAPNs/APNsTransportProvider``.
    public var route: APNsRoute
    /// The DRR quantum multiplier: an app of weight 2 gets twice the send
    /// slots of an app of weight 1 when both have work.
    public var weight: Int
    /// The longest a push of the app is tried after its call, however long
    /// its batch's `expiresAt` (the activity's remaining life, up to 8 h)
    /// allows: for apps whose updates are worthless after minutes. nil: the
    /// batch's expiry is the only limit. A push's life never depends on its
    /// caller's RPC deadline unless the caller waits for delivery.
    public var maxPushLifetime: TimeAmount?

    public init(appID: String, queueCapacity: Int, route: APNsRoute, weight: Int = 1, maxPushLifetime: TimeAmount? = nil) {
        self.appID = appID
        self.queueCapacity = max(1, queueCapacity)
        self.route = route
        self.weight = max(1, weight)
        self.maxPushLifetime = maxPushLifetime.map { max($0, .zero) }
    }
}

/// How long to wait between sends of a push, and optionally how often to send it at all.
///
/// A retryable answer (5xx, 429, a lost connection) is retried until the
/// push's send-by time (its batch's expiry, the app's
/// ``DispatchApp/maxPushLifetime``, or a waiting caller's deadline): an APNs
/// outage delays a push, it does not lose it while the push is still worth
/// sending. A retry that would fall after the send-by time expires the push
/// instead.
public struct RetryPolicy: Hashable, Sendable {
    /// A safety cap on sends per push, the first included (the last retryable
    /// answer becomes the failure reason); nil: no cap but the push's send-by time.
    public var maxAttempts: Int?
    /// The wait before send `n + 1` is `backoff.delay(after: n, …)`. Its jitter
    /// keeps pushes that failed together (a 503 burst) from coming back together.
    public var backoff: Backoff

    public init(maxAttempts: Int? = nil, backoff: Backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(30))) {
        self.maxAttempts = maxAttempts.map { max(1, $0) }
        self.backoff = backoff
    }

    /// The same policy in the terms the dispatcher's configuration has always
    /// been written in: a doubling back-off from `initialBackoff` up to `maxBackoff`.
    public init(
        maxAttempts: Int? = nil, initialBackoff: TimeAmount, maxBackoff: TimeAmount = .seconds(30), jitter: Double = 0.5
    ) {
        self.init(maxAttempts: maxAttempts, backoff: Backoff(initial: initialBackoff, maximum: maxBackoff, multiplier: 2, jitter: jitter))
    }
}

/// Everything the dispatcher needs, as plain values.
public struct DispatcherConfiguration: Sendable {
    public var apps: [DispatchApp]
    /// Requests in flight over all transports.
    public var maxInFlight: Int
    /// Requests in flight per route (``LiveRelayAPNs/APNsRoute``), so one slow endpoint or key cannot take every slot.
    public var maxInFlightPerTransport: Int
    /// Sends an app may make per DRR turn (times its weight) before the next app's turn.
    public var quantum: Int
    public var retry: RetryPolicy
    /// Per route: stops sending to an endpoint that keeps failing, for a growing cooldown (``CircuitBreaker``).
    public var circuitBreaker: CircuitBreakerPolicy
    /// Per app: stops pruning when most of the app's tokens are rejected (``MassPruneGuard``).
    public var massPruneGuard: MassPruneGuardPolicy
    /// How long an app whose credentials APNs rejected (or whose tokens it
    /// rejected en masse, ``MassPruneGuard``) is first held: not sent to, its
    /// pushes kept. Each further rejection in a row doubles it, up to
    /// ``credentialsHoldMaximum``; a push still held at its send-by time fails
    /// with the rejection's reason.
    public var credentialsCooldown: TimeAmount
    /// The longest hold between two probes of rejected credentials.
    public var credentialsHoldMaximum: TimeAmount = .minutes(10)
    /// A push of a waiting call that is not sent this long before the call's
    /// deadline expires unsent: APNs's answer could not come back in time. A
    /// waiting call with pushes still in flight is answered half this long
    /// before its deadline: DEADLINE_EXCEEDED (``DeliveryDeadlineExceeded``),
    /// ahead of the connection's own plain DEADLINE_EXCEEDED at the deadline.
    /// A call that does not wait has its pushes live on past its deadline.
    public var replyMargin: TimeAmount
    /// The retry hint of a RESOURCE_EXHAUSTED.
    public var queueFullRetryAfter: TimeAmount
    /// Seeds the jitter, so a test sees the same delays every run.
    public var randomSeed: UInt64
    /// How long a graceful shutdown keeps sending what is queued before failing the rest `ShuttingDown`.
    public var drainGracePeriod: TimeAmount
    /// The instance part of every `apns-id` (``LiveRelayAPNs/APNsCallID``): random per process by default.
    public var apnsIDInstance: UInt32
    /// How long a token with nothing queued or in flight keeps its lane (its
    /// ordering memory) before the scheduler forgets it. Without a limit the
    /// scheduler would hold every token it ever sent to; after it, an update
    /// older than one already sent would be sent too, and the device, which
    /// ignores a timestamp not newer than its last, drops it.
    public var laneRetention: TimeAmount
    /// Targets a fan-out takes per dispatcher step (``DispatchScheduler/beginEnqueue(_:waitForDelivery:sendBy:replyBy:now:)``):
    /// the dispatcher's lock is held for one slice, about 4 ms at 8,192, not
    /// for the whole fan-out, so other apps' calls and APNs's answers go on between slices.
    public var enqueueSlice: Int

    public init(
        apps: [DispatchApp],
        maxInFlight: Int = 2_000,
        maxInFlightPerTransport: Int = 1_000,
        quantum: Int = 16,
        retry: RetryPolicy = RetryPolicy(),
        circuitBreaker: CircuitBreakerPolicy = CircuitBreakerPolicy(),
        massPruneGuard: MassPruneGuardPolicy = MassPruneGuardPolicy(),
        credentialsCooldown: TimeAmount = .seconds(60),
        replyMargin: TimeAmount = .milliseconds(50),
        queueFullRetryAfter: TimeAmount = .seconds(1),
        randomSeed: UInt64 = 0x5EED,
        drainGracePeriod: TimeAmount = .seconds(10),
        apnsIDInstance: UInt32 = .random(in: 0...UInt32.max),
        laneRetention: TimeAmount = .seconds(60),
        enqueueSlice: Int = 8_192
    ) {
        self.apps = apps
        self.maxInFlight = max(1, maxInFlight)
        self.maxInFlightPerTransport = max(1, maxInFlightPerTransport)
        self.quantum = max(1, quantum)
        self.retry = retry
        self.circuitBreaker = circuitBreaker
        self.massPruneGuard = massPruneGuard
        self.credentialsCooldown = credentialsCooldown
        self.replyMargin = replyMargin
        self.queueFullRetryAfter = queueFullRetryAfter
        self.randomSeed = randomSeed
        self.apnsIDInstance = apnsIDInstance
        self.drainGracePeriod = drainGracePeriod
        self.laneRetention = max(.milliseconds(1), laneRetention)
        self.enqueueSlice = max(1, enqueueSlice)
    }
}
