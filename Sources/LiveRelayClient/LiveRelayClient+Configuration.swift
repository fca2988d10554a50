import LiveRelayBackoff
import LiveRelayTLS
import NIOCore

extension LiveRelayClient {
    /// Everything a client needs to reach one LiveRelay server and to decide,
    /// without asking the caller, when a failed call may be sent again.
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// nil speaks the protocol over plain TCP, which only tests and benchmarks
        /// should do: the API key travels in HELLO.
        public var tls: TLS?
        /// Sent once per connection in HELLO (1–512 bytes).
        public var apiKey: String
        /// Shows up in the server's logs, so operators can tell callers apart.
        public var clientName: String
        /// Connections kept open. One pipelined connection carries thousands of
        /// calls per second; more spread the work over the server's event loops.
        public var connections: Int
        /// Applied to calls that pass no timeout; nil means such calls have no deadline.
        public var defaultTimeout: Duration?
        /// How long to wait between attempts to (re)connect a connection, so a
        /// fleet of clients that lost the same server do not reconnect in lock step.
        public var backoff: Backoff
        /// Which failed calls are sent again without the caller's involvement.
        public var retryPolicy: RetryPolicy
        /// Calls the client holds at once, sent or waiting to be sent. Beyond it
        /// new calls fail at once with RESOURCE_EXHAUSTED, so a stalled or
        /// unreachable server cannot grow the client's memory without bound.
        public var maxPendingCalls: Int
        /// From starting a TCP connect to the connection being usable (TCP and TLS).
        public var connectTimeout: Duration
        /// A PING after this long with calls outstanding and nothing received;
        /// nil disables it. Keep it at 10 s or more (servers punish PING floods).
        public var keepaliveInterval: Duration?
        /// How long the end of `withClient` lets outstanding calls finish before closing anyway.
        public var shutdownGracePeriod: Duration

        public init(
            host: String,
            port: Int,
            tls: TLS?,
            apiKey: String,
            clientName: String = "liverelay-swift",
            connections: Int = 2,
            defaultTimeout: Duration? = .seconds(10),
            backoff: Backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(10), jitter: 0.2),
            retryPolicy: RetryPolicy = RetryPolicy(),
            maxPendingCalls: Int = 10_000,
            connectTimeout: Duration = .seconds(10),
            keepaliveInterval: Duration? = .seconds(30),
            shutdownGracePeriod: Duration = .seconds(10)
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.apiKey = apiKey
            self.clientName = clientName
            self.connections = connections
            self.defaultTimeout = defaultTimeout
            self.backoff = backoff
            self.retryPolicy = retryPolicy
            self.maxPendingCalls = maxPendingCalls
            self.connectTimeout = connectTimeout
            self.keepaliveInterval = keepaliveInterval
            self.shutdownGracePeriod = shutdownGracePeriod
        }

        /// For code in this package that already holds a full TLS configuration (the soak run's pinned server name).
        @_disfavoredOverload
        package init(host: String, port: Int, tls: TLSConfiguration?, apiKey: String, clientName: String = "liverelay-swift") {
            self.init(host: host, port: port, tls: tls.map(TLS.init), apiKey: apiKey, clientName: clientName)
        }
    }

    /// How the client checks the server's certificate, and the certificate it
    /// presents to a server that requires one (mTLS).
    public struct TLS: Sendable, Hashable {
        package var configuration: TLSConfiguration

        package init(_ configuration: TLSConfiguration) {
            self.configuration = configuration
        }

        /// Trusts the operating system's store and checks the server's name against `host`.
        public static var systemTrust: TLS {
            TLS(TLSConfiguration.makeClientConfiguration())
        }

        /// Trusts exactly the CA (or self-signed certificate) in the PEM file
        /// `caFile` and checks the server's name against `host`, which is how a
        /// development server's `cert.pem` is trusted.
        public static func trusting(caFile: String) -> TLS {
            TLS(TLSConfiguration(trustRoots: .pem(.file(caFile)), certificateVerification: .fullVerification))
        }

        /// Trusts exactly the CA (or self-signed certificate) given as PEM text.
        public static func trusting(caPEM: String) -> TLS {
            TLS(TLSConfiguration(trustRoots: .pem(.string(caPEM)), certificateVerification: .fullVerification))
        }

        /// The same trust, presenting the PEM certificate chain and private key in these files.
        public func presenting(certificateChainFile: String, privateKeyFile: String) -> TLS {
            var configuration = self.configuration
            configuration.certificateChain = .file(certificateChainFile)
            configuration.privateKey = .file(privateKeyFile)
            return TLS(configuration)
        }
    }

    /// Capped exponential back-off: the n-th wait after failures is
    /// `initial * multiplier^(n-1)`, at most `maximum`, shortened by up to
    /// `jitter` (a share, 0 to 1) at random.
    public struct Backoff: Hashable, Sendable {
        public var initial: Duration
        public var maximum: Duration
        public var multiplier: Double
        public var jitter: Double

        public init(initial: Duration, maximum: Duration, multiplier: Double = 2, jitter: Double = 0.5) {
            self.initial = initial
            self.maximum = maximum
            self.multiplier = multiplier
            self.jitter = jitter
        }

        var rule: LiveRelayBackoff.Backoff {
            LiveRelayBackoff.Backoff(
                initial: TimeAmount(self.initial), maximum: TimeAmount(self.maximum), multiplier: self.multiplier, jitter: self.jitter)
        }
    }

    /// Which failures the client resends on its own.
    ///
    /// A call the server certainly did not process (GOAWAY above its id,
    /// ERROR UNAVAILABLE, a connection that was not open) is always safe to send
    /// again, and is, up to `maxAttempts`. A call whose fate is unknown (its
    /// connection broke while it was outstanding) is resent only when the
    /// caller opted in with `retryIdempotentCalls` *and* the call is idempotent:
    /// a request with an idempotency key (the server replays the first reply),
    /// RegisterToken (idempotent by nature) or Ping. Calls failed by their own
    /// deadline or by cancellation are never resent: the caller gave up on them.
    public struct RetryPolicy: Sendable, Hashable {
        /// Attempts in total, the first included; 1 disables retries.
        public var maxAttempts: Int
        public var retryIdempotentCalls: Bool

        public init(maxAttempts: Int = 5, retryIdempotentCalls: Bool = false) {
            self.maxAttempts = maxAttempts
            self.retryIdempotentCalls = retryIdempotentCalls
        }
    }
}
