import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Prometheus
import ServiceLifecycle

/// The operations port: `GET /metrics` (Prometheus text format), `GET /healthz`
/// (the process is alive) and `GET /readyz` (200 when the node should get
/// traffic, 503 with the reason otherwise), over HTTP/1.1.
///
/// A port of its own, apart from the RPC port: scrapers and load-balancer
/// probes speak plain HTTP without API keys or TLS, and binding it to loopback
/// (the default) keeps the metrics off the network the callers use.
///
/// List it FIRST in the `ServiceGroup`: graceful shutdown stops services in
/// reverse order, so it stops last, and `/readyz` answers 503 throughout the
/// RPC server's drain (``ServingReadiness/drainSignal`` flips it at the start).
///
/// Bounded like a port that may be reached by more than its scraper: at most
/// ``Configuration/maxConnections`` at once (further ones wait in the
/// listen backlog), a connection closed after ``Configuration/idleTimeout``
/// without traffic or when a request head takes longer than
/// ``Configuration/headerTimeout`` to arrive, and `/metrics` behind a bearer
/// token when one is configured.
public struct OpsServer: Service {
    public struct Configuration: Sendable {
        public var host: String
        /// 0: any free port (tests); ``boundAddress`` tells which.
        public var port: Int
        /// Connections served at once; the next ones are accepted as these close.
        public var maxConnections: Int
        /// A connection with no traffic for this long is closed.
        public var idleTimeout: TimeAmount
        /// A request head (request line and headers) must arrive in full within this long
        /// of the connection's start or of the previous response's end.
        public var headerTimeout: TimeAmount
        /// When set, `/metrics` answers 401 unless the request carries `Authorization: Bearer <token>`
        /// (compared in constant time). `/healthz` and `/readyz` stay open: probes carry no secrets.
        public var metricsToken: String?

        public init(
            host: String = "127.0.0.1", port: Int = 9090, maxConnections: Int = 64, idleTimeout: TimeAmount = .seconds(60),
            headerTimeout: TimeAmount = .seconds(10), metricsToken: String? = nil
        ) {
            self.host = host
            self.port = port
            self.maxConnections = max(1, maxConnections)
            self.idleTimeout = idleTimeout
            self.headerTimeout = headerTimeout
            self.metricsToken = metricsToken
        }
    }

    private let configuration: Configuration
    private let registry: PrometheusCollectorRegistry
    private let readiness: any ReadinessSource
    private let beforeScrape: @Sendable () -> Void
    private let logger: Logger
    private let address = BoundAddress()

    /// - Parameter beforeScrape: sets the gauges that are read rather than
    ///   counted (queue depths), once per scrape instead of on every change.
    public init(
        configuration: Configuration, registry: PrometheusCollectorRegistry, readiness: any ReadinessSource,
        beforeScrape: @escaping @Sendable () -> Void = {}, logger: Logger
    ) {
        self.configuration = configuration
        self.registry = registry
        self.readiness = readiness
        self.beforeScrape = beforeScrape
        self.logger = logger
    }

    /// The address the server listens on, once bound; throws if `run()` failed before binding.
    public var boundAddress: SocketAddress {
        get async throws { try await address.value }
    }

    public func run() async throws {
        let address = self.address
        // Hummingbird's own info line ("Server started and listening on ...") is
        // kept out: scripts and tests take the first "listening on" line of
        // `serve` for the RPC port, and `serve` announces this port itself.
        var hummingbirdLogger = logger
        hummingbirdLogger.logLevel = max(logger.logLevel, .notice)
        let headerTimeout = configuration.headerTimeout
        let application = Application(
            router: Self.router(
                registry: registry, readiness: readiness, metricsToken: configuration.metricsToken, beforeScrape: beforeScrape),
            server: .http1(
                configuration: HTTP1Channel.Configuration(
                    additionalChannelHandlers: [HeaderTimeoutHandler(timeout: headerTimeout)], idleTimeout: configuration.idleTimeout)),
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port),
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)),
            onServerRunning: { channel in
                if let local = channel.localAddress { address.resolve(.success(local)) }
            },
            logger: hummingbirdLogger
        )
        do {
            try await application.run()
        } catch {
            let failure = OpsServerError(message: "cannot serve operations on \(configuration.host):\(configuration.port): \(error)")
            address.resolve(.failure(failure))
            throw failure
        }
        address.resolve(.failure(OpsServerError(message: "the operations server stopped before it was bound")))
    }

    /// The routes, apart from the listener so they can be checked without a socket.
    static func router(
        registry: PrometheusCollectorRegistry, readiness: any ReadinessSource, metricsToken: String? = nil,
        beforeScrape: @escaping @Sendable () -> Void = {}
    ) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        let expected = metricsToken.map { Array("Bearer \($0)".utf8) }
        let process = ProcessMetrics(registry: registry)
        // /readyz's answer as a series, so that an alert sees a node that is up but not ready
        // (draining, its store not answering) and not only one that is down.
        let ready = registry.makeGauge(name: "liverelay_ready", help: "1 when /readyz answers 200, 0 otherwise.")
        router.get("metrics") { request, _ -> Response in
            if let expected, !Self.constantTimeEqual(Array((request.headers[.authorization] ?? "").utf8), expected) {
                var headers = HTTPFields()
                headers[.wwwAuthenticate] = "Bearer"
                headers[.contentType] = "text/plain; charset=utf-8"
                return Response(
                    status: .unauthorized, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "unauthorized\n")))
            }
            beforeScrape()
            process.update()
            ready.set(to: await readiness.readiness() == .ready ? 1 : 0)
            var headers = HTTPFields()
            // The content type Prometheus expects for its text exposition format 0.0.4.
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        router.get("healthz") { _, _ -> Response in
            switch readiness.liveness() {
            case .ready: Self.text(.ok, "ok\n")
            case .notReady(let reason): Self.text(.serviceUnavailable, "unhealthy: \(reason)\n")
            }
        }
        router.get("readyz") { _, _ -> Response in
            switch await readiness.readiness() {
            case .ready:
                return Self.text(.ok, "ready\n")
            case .notReady(let reason):
                return Self.text(.serviceUnavailable, "not ready: \(reason)\n")
            }
        }
        return router
    }

    /// Equal bytes, in a time that depends on the lengths only: a token is not guessed a byte at a time.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) {
            difference |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
        }
        return difference == 0
    }

    private static func text(_ status: HTTPResponse.Status, _ body: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}

public struct OpsServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// The bound address, awaited by whoever announces it; settled once (later results are ignored).
private final class BoundAddress: Sendable {
    private struct State {
        var result: Result<SocketAddress, any Error>?
        var waiters: [CheckedContinuation<SocketAddress, any Error>] = []
    }

    private let state = NIOLockedValueBox(State())

    var value: SocketAddress {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let settled: Result<SocketAddress, any Error>? = state.withLockedValue { state in
                    if let result = state.result { return result }
                    state.waiters.append(continuation)
                    return nil
                }
                if let settled { continuation.resume(with: settled) }
            }
        }
    }

    func resolve(_ result: Result<SocketAddress, any Error>) {
        let waiters: [CheckedContinuation<SocketAddress, any Error>] = state.withLockedValue { state in
            guard state.result == nil else { return [] }
            state.result = result
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(with: result) }
    }
}
