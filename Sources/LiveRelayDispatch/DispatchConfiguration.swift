import LiveRelayAPNs
import NIOCore

/// Which transport an app's pushes go through: one per (endpoint, signing
/// key), because the provider token belongs to the key and the connections
/// to the endpoint. Apps that share both share the transport and its limit.
public struct TransportRoute: Hashable, Sendable, CustomStringConvertible {
    public var endpoint: APNsEndpoint
    /// The signing key's id (the JWT `kid`), or any name that tells transports apart.
    public var keyID: String

    public init(endpoint: APNsEndpoint, keyID: String) {
        self.endpoint = endpoint
        self.keyID = keyID
    }

    public var description: String { "\(endpoint)/\(keyID)" }
}

/// One app as the dispatcher sees it.
public struct DispatchApp: Sendable {
    public var appID: String
    /// Unfinished pushes (queued, waiting to retry or in flight) above which
    /// new calls are refused; see ``Dispatcher/admit(appID:)`` for the exact rule.
    public var queueCapacity: Int
    public var route: TransportRoute
    /// The DRR quantum multiplier: an app of weight 2 gets twice the send
    /// slots of an app of weight 1 when both have work.
    public var weight: Int
    /// A transport given directly (tests, a single mock); otherwise the
    /// dispatcher's factory makes one per route.
    public var transport: (any APNsTransport)?

    /// An app whose transport the dispatcher's ``DispatcherConfiguration/transportFactory`` makes.
    public init(appID: String, queueCapacity: Int, endpoint: APNsEndpoint, keyID: String, weight: Int = 1) {
        self.appID = appID
        self.queueCapacity = max(1, queueCapacity)
        self.route = TransportRoute(endpoint: endpoint, keyID: keyID)
        self.weight = max(1, weight)
        self.transport = nil
    }

    /// An app with a transport of its own (its per-transport limit is its own too).
    public init(appID: String, queueCapacity: Int, transport: any APNsTransport, weight: Int = 1) {
        self.appID = appID
        self.queueCapacity = max(1, queueCapacity)
        self.route = TransportRoute(endpoint: .custom(host: "transport-of-\(appID)", port: 0), keyID: appID)
        self.weight = max(1, weight)
        self.transport = transport
    }
}

/// Capped exponential back-off with jitter, and how often to try at all.
public struct RetryPolicy: Hashable, Sendable {
    /// Sends per push, the first included; the last retryable answer becomes the failure reason.
    public var maxAttempts: Int
    /// The delay after the first retryable answer; doubled per attempt.
    public var initialBackoff: TimeAmount
    public var maxBackoff: TimeAmount
    /// The random share of each delay (0...1): 0.5 waits between half and all of it, so
    /// pushes that failed together (a 503 burst) do not come back together.
    public var jitter: Double

    public init(maxAttempts: Int = 5, initialBackoff: TimeAmount = .milliseconds(200),
                maxBackoff: TimeAmount = .seconds(30), jitter: Double = 0.5) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.jitter = min(1, max(0, jitter))
    }

    /// The wait before attempt `attempt + 1`, after `attempt` sends; `random` is in 0..<1.
    public func delay(afterAttempt attempt: Int, random: Double) -> TimeAmount {
        let doublings = min(max(0, attempt - 1), 40)
        let base = min(Double(initialBackoff.nanoseconds) * Double(1 << UInt64(doublings)), Double(maxBackoff.nanoseconds))
        let nanos = base * (1 - jitter) + base * jitter * random
        return .nanoseconds(Int64(nanos))
    }
}

/// Everything the dispatcher needs, as plain values.
public struct DispatcherConfiguration: Sendable {
    public var apps: [DispatchApp]
    /// Makes the transport of a route the first time an app needs it.
    public var transportFactory: (@Sendable (TransportRoute) -> any APNsTransport)?
    /// Requests in flight over all transports.
    public var maxInFlight: Int
    /// Requests in flight per transport, so one slow endpoint cannot take every slot.
    public var maxInFlightPerTransport: Int
    /// Sends an app may make per DRR turn (times its weight) before the next app's turn.
    public var quantum: Int
    public var retry: RetryPolicy
    /// How long an app whose credentials APNs rejected is not sent to; its pushes fail with the reason meanwhile.
    public var credentialsCooldown: TimeAmount
    /// A push of a call with a deadline that is not sent this long before the
    /// deadline expires unsent: APNs's answer could not come back in time. A
    /// waiting call is answered at its deadline itself: DEADLINE_EXCEEDED
    /// (``DeliveryDeadlineExceeded``) when pushes are still in flight then.
    public var replyMargin: TimeAmount
    /// The retry hint of a RESOURCE_EXHAUSTED.
    public var queueFullRetryAfter: TimeAmount
    /// Seeds the jitter, so a test sees the same delays every run.
    public var randomSeed: UInt64
    /// How long a token with nothing queued or in flight keeps its lane (its
    /// ordering memory) before the scheduler forgets it. Without a limit the
    /// scheduler would hold every token it ever sent to; after it, an update
    /// older than one already sent would be sent too, and the device, which
    /// ignores a timestamp not newer than its last, drops it.
    public var laneRetention: TimeAmount

    public init(
        apps: [DispatchApp],
        transportFactory: (@Sendable (TransportRoute) -> any APNsTransport)? = nil,
        maxInFlight: Int = 2_000,
        maxInFlightPerTransport: Int = 1_000,
        quantum: Int = 16,
        retry: RetryPolicy = RetryPolicy(),
        credentialsCooldown: TimeAmount = .seconds(60),
        replyMargin: TimeAmount = .milliseconds(50),
        queueFullRetryAfter: TimeAmount = .seconds(1),
        randomSeed: UInt64 = 0x5EED,
        laneRetention: TimeAmount = .seconds(60)
    ) {
        self.apps = apps
        self.transportFactory = transportFactory
        self.maxInFlight = max(1, maxInFlight)
        self.maxInFlightPerTransport = max(1, maxInFlightPerTransport)
        self.quantum = max(1, quantum)
        self.retry = retry
        self.credentialsCooldown = credentialsCooldown
        self.replyMargin = replyMargin
        self.queueFullRetryAfter = queueFullRetryAfter
        self.randomSeed = randomSeed
        self.laneRetention = max(.milliseconds(1), laneRetention)
    }
}
