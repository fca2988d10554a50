import LiveRelayAPNs

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One app whose provider tokens the mock accepts: the key the JWT must be
/// signed with and the bundle whose Live Activity topic that key may push to.
///
/// Several entries may share a key id (a team's key pushes for each of its
/// apps); a token is then accepted for the topic of any of them.
public struct MockAPNsApp: Sendable, Hashable {
    public var bundleID: String
    public var teamID: String
    public var keyID: String
    /// The public half of the app's .p8 key (`-----BEGIN PUBLIC KEY-----`).
    public var publicKeyPEM: String

    public init(bundleID: String, teamID: String, keyID: String, publicKeyPEM: String) {
        self.bundleID = bundleID
        self.teamID = teamID
        self.keyID = keyID
        self.publicKeyPEM = publicKeyPEM
    }

    /// `<bundle id>.push-type.liveactivity`: the only topic a Live Activity push may use.
    public var liveActivityTopic: String { bundleID + ".push-type.liveactivity" }
}

/// How long the mock waits before answering a stream: `fixed` plus, when
/// `random` is set, a uniform draw from it, plus for a share of the answers a
/// draw from `slow` (all from the seeded generator, so a test's sequence of
/// delays repeats exactly).
public struct MockAPNsLatency: Sendable, Hashable {
    public var fixed: Duration
    public var random: ClosedRange<Duration>?
    /// A slow tail on top: what a loaded APNs looks like is mostly quick answers and
    /// a few very late ones, not a uniformly slower server.
    public var slow: MockAPNsSlowAnswers?

    public init(fixed: Duration = .zero, random: ClosedRange<Duration>? = nil, slow: MockAPNsSlowAnswers? = nil) {
        self.fixed = fixed
        self.random = random
        self.slow = slow
    }

    public static let none = MockAPNsLatency()
}

/// The slow tail of ``MockAPNsLatency``: `rate` of the answers wait an extra
/// uniform draw from `range`.
public struct MockAPNsSlowAnswers: Sendable, Hashable {
    /// 0...1: the probability per answer.
    public var rate: Double
    public var range: ClosedRange<Duration>

    public init(rate: Double, range: ClosedRange<Duration>) {
        self.rate = min(max(rate, 0), 1)
        self.range = range
    }
}

/// An APNs error answered instead of 200 for a fraction of the pushes that
/// pass validation, to exercise a client's handling of that reason.
public struct MockAPNsInjectedError: Sendable, Hashable {
    public var reason: String
    public var status: Int
    /// 0...1: the probability per valid push. Rates of several errors add up (capped at 1).
    public var rate: Double
    /// Sent as a `retry-after` header (seconds). APNs never sends one; a proxy or
    /// another push service in front of it may, and a client must not choke on it.
    public var retryAfterSeconds: Int?

    /// - Parameter status: defaults to APNs's status for `reason` (``MockAPNsReasons/status(for:)``).
    public init(reason: String, status: Int? = nil, rate: Double, retryAfterSeconds: Int? = nil) {
        self.reason = reason
        self.status = status ?? MockAPNsReasons.status(for: reason)
        self.rate = min(max(rate, 0), 1)
        self.retryAfterSeconds = retryAfterSeconds.map { max(0, $0) }
    }
}

/// Periodic outages: for `duration` out of every `period` (the first one
/// `firstAfter` after the server starts), every push that would be answered 200
/// gets `status` and `reason` instead, as when APNs is down behind a healthy
/// load balancer. Long enough runs of them open a client's circuit breaker;
/// pushes whose expiry falls inside one expire instead of being sent late.
public struct MockAPNsOutages: Sendable, Hashable {
    public var period: Duration
    public var duration: Duration
    public var firstAfter: Duration
    public var reason: String
    public var status: Int

    public init(
        period: Duration, duration: Duration, firstAfter: Duration? = nil, reason: String = "ServiceUnavailable",
        status: Int? = nil
    ) {
        self.period = max(period, .milliseconds(1))
        self.duration = min(max(duration, .zero), self.period)
        self.firstAfter = max(firstAfter ?? period, .zero)
        self.reason = reason
        self.status = status ?? MockAPNsReasons.status(for: reason)
    }

    /// Whether the server is in an outage `sinceStart` after it started.
    public func isOutage(sinceStart: Duration) -> Bool {
        guard sinceStart >= firstAfter, duration > .zero else { return false }
        let into = Self.nanoseconds(sinceStart - firstAfter) % Self.nanoseconds(period)
        return into < Self.nanoseconds(duration)
    }

    static func nanoseconds(_ d: Duration) -> Int64 {
        let (seconds, attoseconds) = d.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// The wall clock as the mock sees it, injectable so tests can age provider
/// tokens past an hour (APNs's limit, ``ProviderTokenVerifier/maximumAgeSeconds``)
/// or twenty minutes without waiting.
public struct MockAPNsClock: Sendable {
    public var nowMilliseconds: @Sendable () -> Int64

    public init(nowMilliseconds: @escaping @Sendable () -> Int64) {
        self.nowMilliseconds = nowMilliseconds
    }

    public static let system = MockAPNsClock {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

/// Everything `MockAPNsServer` does differently from a well-behaved APNs.
public struct MockAPNsConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port; read the bound one from ``MockAPNsServer/port``.
    public var port: Int
    /// The server certificate and key. When either is nil, a self-signed
    /// P-256 certificate for localhost/127.0.0.1 is generated at start and
    /// exposed as ``MockAPNsServer/certificatePEM`` for clients to trust.
    public var certificatePEM: String?
    public var privateKeyPEM: String?
    public var apps: [MockAPNsApp]
    /// SETTINGS_MAX_CONCURRENT_STREAMS once a connection has shown a valid provider token.
    public var maxConcurrentStreams: Int
    /// Like APNs: advertise 1 concurrent stream until the connection's first
    /// valid provider token, then raise it to `maxConcurrentStreams`.
    public var limitStreamsUntilAuthenticated: Bool
    public var latency: MockAPNsLatency
    public var injectedErrors: [MockAPNsInjectedError]
    /// Seeds the generator behind `injectedErrors` and random latency.
    public var randomSeed: UInt64
    /// Tokens (hex, any case) answered 410 Unregistered, with the timestamp
    /// (milliseconds since 1970) APNs would report for when it learnt the token was invalid.
    public var unregisteredTokens: [String: Int64]
    /// Tokens (hex, any case) bound to one bundle id: a push under another
    /// app's topic gets 400 DeviceTokenNotForTopic. Tokens not listed fit any topic.
    public var deviceTokenBundles: [String: String]
    /// Per connection: after this many streams the mock sends GOAWAY whose
    /// last-stream-id is the N-th stream, answers the streams up to it, then closes.
    public var goAwayAfterStreams: Int?
    /// Per connection: the first N streams are handled; the (N+1)-th stream's
    /// arrival closes the TCP connection at once (no GOAWAY, no close_notify, unanswered streams lost).
    public var dropConnectionAfterStreams: Int?
    /// With both connection faults set: odd-numbered connections get the GOAWAY and
    /// even-numbered ones the drop (``MockAPNsConnectionPolicy/alternate``).
    public var alternateConnectionFaults: Bool
    /// Periodic windows in which every valid push gets a 503 (by default).
    public var outages: MockAPNsOutages?
    /// The most recent records kept in memory (older ones are discarded and counted).
    public var recordingCapacity: Int
    /// When set, every record is appended to this file as one JSON line (authorization redacted).
    public var recordFile: String?
    /// A connection that switches to a new provider token sooner than this
    /// after its previous switch gets 429 TooManyProviderTokenUpdates.
    public var providerTokenMinimumUpdateIntervalSeconds: Int64
    public var clock: MockAPNsClock
    /// The APNs environment this mock plays: its channels belong to it. One mock
    /// serves one environment, as each of Apple's hosts does.
    public var environment: APNsEnvironment
    /// Channels per app in this environment before a create is CannotCreateChannelConfig
    /// (APNs's limit by default; tests lower it).
    public var maxChannelsPerApp: Int
    /// The channels, when shared with another mock (say the other environment's); nil: the mock's own.
    public var channelStore: MockAPNsChannelStore?

    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        certificatePEM: String? = nil,
        privateKeyPEM: String? = nil,
        apps: [MockAPNsApp] = [],
        maxConcurrentStreams: Int = 1000,
        limitStreamsUntilAuthenticated: Bool = false,
        latency: MockAPNsLatency = .none,
        injectedErrors: [MockAPNsInjectedError] = [],
        randomSeed: UInt64 = 0x4C52_4D4F_434B,
        unregisteredTokens: [String: Int64] = [:],
        deviceTokenBundles: [String: String] = [:],
        goAwayAfterStreams: Int? = nil,
        dropConnectionAfterStreams: Int? = nil,
        alternateConnectionFaults: Bool = false,
        outages: MockAPNsOutages? = nil,
        recordingCapacity: Int = 100_000,
        recordFile: String? = nil,
        providerTokenMinimumUpdateIntervalSeconds: Int64 = 1200,
        clock: MockAPNsClock = .system,
        environment: APNsEnvironment = .sandbox,
        maxChannelsPerApp: Int = APNsBroadcast.maxChannelsPerApp,
        channelStore: MockAPNsChannelStore? = nil
    ) {
        self.host = host
        self.port = port
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
        self.apps = apps
        self.maxConcurrentStreams = maxConcurrentStreams
        self.limitStreamsUntilAuthenticated = limitStreamsUntilAuthenticated
        self.latency = latency
        self.injectedErrors = injectedErrors
        self.randomSeed = randomSeed
        self.unregisteredTokens = unregisteredTokens
        self.deviceTokenBundles = deviceTokenBundles
        self.goAwayAfterStreams = goAwayAfterStreams
        self.dropConnectionAfterStreams = dropConnectionAfterStreams
        self.alternateConnectionFaults = alternateConnectionFaults
        self.outages = outages
        self.recordingCapacity = recordingCapacity
        self.recordFile = recordFile
        self.providerTokenMinimumUpdateIntervalSeconds = providerTokenMinimumUpdateIntervalSeconds
        self.clock = clock
        self.environment = environment
        self.maxChannelsPerApp = maxChannelsPerApp
        self.channelStore = channelStore
    }
}

/// APNs's reasons with their statuses (Apple's documentation), plus the
/// mock's own reasons for payload shape errors, which APNs does not name.
public enum MockAPNsReasons {
    /// The body is not JSON, or not a JSON object.
    public static let malformedPayload = "MalformedPayload"
    /// The body has no `aps` object.
    public static let missingAps = "MissingAps"
    /// `aps.timestamp` is missing or not an integer.
    public static let badTimestamp = "BadTimestamp"
    /// `aps.event` is missing or not start, update or end.
    public static let badEvent = "BadEvent"
    /// `aps.content-state` is missing on start/update, or not an object.
    public static let badContentState = "BadContentState"
    /// A start without a string `attributes-type` and an object `attributes`.
    public static let badAttributes = "BadAttributes"
    /// A channel create whose `message-storage-policy` is missing or not 0 or 1 (APNs's
    /// own reason for it is not in our facts).
    public static let badMessageStoragePolicy = "BadMessageStoragePolicy"
    /// A broadcast whose `aps` carries a push-to-start's own fields (``startOnlyFields``):
    /// a broadcast cannot start an activity, so they can only be a sender's mistake.
    public static let startFieldInBroadcast = "BadBroadcastPayload"
    /// The `aps` fields that only a push-to-start to a device token may carry.
    public static let startOnlyFields = ["attributes-type", "attributes", "input-push-token", "input-push-channel"]

    /// The status APNs answers with `reason`; 400 for the mock's payload reasons and unknown ones.
    public static func status(for reason: String) -> Int {
        switch reason {
        case "ExpiredProviderToken", "InvalidProviderToken", "MissingProviderToken", "UnrelatedKeyIdInToken",
            "BadEnvironmentKeyIdInToken", "BadCertificate", "BadCertificateEnvironment", "Forbidden":
            403
        case "BadPath": 404
        case "MethodNotAllowed": 405
        case "Unregistered", "ExpiredToken": 410
        case "PayloadTooLarge": 413
        case "TooManyProviderTokenUpdates", "TooManyRequests": 429
        case "InternalServerError": 500
        case "ServiceUnavailable", "Shutdown": 503
        default: 400
        }
    }
}
