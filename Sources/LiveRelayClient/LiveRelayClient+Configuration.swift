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
        public var tls: TLSConfiguration?
        /// Sent once per connection in HELLO (1–512 bytes).
        public var apiKey: String
        /// Shows up in the server's logs, so operators can tell callers apart.
        public var clientName: String
        /// Connections kept open. One pipelined connection carries thousands of
        /// calls per second; more spread the work over the server's event loops.
        public var connections: Int
        /// Applied to calls that pass no timeout; nil means such calls have no deadline.
        public var defaultTimeout: TimeAmount?
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
        public var connectTimeout: TimeAmount
        /// A PING after this long with calls outstanding and nothing received;
        /// nil disables it. Keep it at 10 s or more (servers punish PING floods).
        public var keepaliveInterval: TimeAmount?
        /// How long `shutdown()` lets outstanding calls finish before closing anyway.
        public var shutdownGracePeriod: TimeAmount

        public init(
            host: String,
            port: Int,
            tls: TLSConfiguration?,
            apiKey: String,
            clientName: String = "liverelay-swift",
            connections: Int = 2,
            defaultTimeout: TimeAmount? = .seconds(10),
            backoff: Backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(10), jitter: 0.2),
            retryPolicy: RetryPolicy = RetryPolicy(),
            maxPendingCalls: Int = 10_000,
            connectTimeout: TimeAmount = .seconds(10),
            keepaliveInterval: TimeAmount? = .seconds(30),
            shutdownGracePeriod: TimeAmount = .seconds(10)
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

        /// A TLS client configuration that trusts exactly the CA (or self-signed
        /// certificate) in `caFile` and checks the server's name against `host`,
        /// which is how a development server's `cert.pem` is trusted.
        public static func tls(trustingCAFile caFile: String) -> TLSConfiguration {
            TLSConfiguration(trustRoots: .pem(.file(caFile)), certificateVerification: .fullVerification)
        }

        /// A TLS client configuration that trusts the operating system's store.
        public static var tlsWithSystemTrust: TLSConfiguration {
            TLSConfiguration.makeClientConfiguration()
        }
    }

    /// The shared back-off rule, under the name client code has always used;
    /// see ``LiveRelayBackoff/Backoff`` for how jitter shortens each wait.
    public typealias Backoff = LiveRelayBackoff.Backoff

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
