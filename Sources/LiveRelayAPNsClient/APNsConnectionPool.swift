import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayTLS
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// How an ``APNsConnectionPool`` reaches APNs.
public struct APNsClientConfiguration: Sendable {
    public var endpoint: APNsEndpoint
    /// Trust roots, verification and versions. The pool sets ALPN to `h2` and,
    /// unless set here, SNI and the verified host name to the endpoint's host.
    public var tls: TLSConfiguration
    public var maximumConnections: Int
    /// Requests in flight on every connection before another opens (see ``APNsPoolStateMachine``).
    public var streamsPerConnection: Int
    /// Requests waiting for a free stream; beyond it `send` fails at once instead of queueing without bound.
    public var maximumQueuedRequests: Int
    public var timeouts: APNsConnectionStateMachine.Timeouts
    public var connectTimeout: TimeAmount
    public var backoff: Backoff
    /// How often each connection checks its timeouts (the precision of the response timeout).
    public var tickInterval: TimeAmount

    public init(
        endpoint: APNsEndpoint,
        tls: TLSConfiguration = .makeClientConfiguration(),
        maximumConnections: Int = 4,
        streamsPerConnection: Int = 100,
        maximumQueuedRequests: Int = 10_000,
        timeouts: APNsConnectionStateMachine.Timeouts = .init(),
        connectTimeout: TimeAmount = .seconds(10),
        backoff: Backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(30)),
        tickInterval: TimeAmount = .milliseconds(500)
    ) {
        self.endpoint = endpoint
        self.tls = tls
        self.maximumConnections = maximumConnections
        self.streamsPerConnection = streamsPerConnection
        self.maximumQueuedRequests = maximumQueuedRequests
        self.timeouts = timeouts
        self.connectTimeout = connectTimeout
        self.backoff = backoff
        self.tickInterval = tickInterval
    }

    /// For a mock or staging server whose certificate (or its CA) is `certificatePEM`:
    /// the chain is verified against it alone, host name included.
    public static func trusting(certificatePEM: String, endpoint: APNsEndpoint) -> APNsClientConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .pem(.string(certificatePEM))
        return APNsClientConfiguration(endpoint: endpoint, tls: tls)
    }
}

/// HTTP/2 connections to one APNs endpoint for one signing key.
///
/// Connections open lazily, one at a time, up to the maximum; each request
/// goes to the ready connection with the most free streams (the server's
/// SETTINGS_MAX_CONCURRENT_STREAMS, honoured as it changes); when all are full
/// it waits in a bounded queue. Failed connects back off exponentially with
/// jitter. A 403 ExpiredProviderToken answer reports its token generation to
/// the shared ``ProviderTokenSource`` before the caller sees it, so the retry
/// the dispatcher makes carries a fresh token. The decisions are
/// ``APNsPoolStateMachine``'s and ``APNsConnectionStateMachine``'s.
public final class APNsConnectionPool: APNsTransport, APNsConnectionDelegate, @unchecked Sendable {
    typealias Machine = APNsPoolStateMachine<APNsPendingRequest>

    public let configuration: APNsClientConfiguration
    public let tokenSource: ProviderTokenSource
    private let group: any EventLoopGroup
    private let tlsContext: TLSContext
    private let logger: Logger
    private let state:
        NIOLockedValueBox<(machine: Machine, connections: [Int: NIOLoopBound<APNsConnectionHandler>], shutdown: EventLoopPromise<Void>?)>
    private let metrics: APNsClientMetrics

    public init(
        configuration: APNsClientConfiguration, tokenSource: ProviderTokenSource,
        group: any EventLoopGroup, logger: Logger = Logger(label: "liverelay.apns")
    ) throws {
        var tls = configuration.tls
        tls.applicationProtocols = ["h2"]
        if tls.serverHostname == nil { tls.serverHostname = configuration.endpoint.host }
        self.tlsContext = try TLSContext(configuration: tls)
        self.configuration = configuration
        self.tokenSource = tokenSource
        self.group = group
        var logger = logger
        logger[metadataKey: "apns.endpoint"] = "\(configuration.endpoint)"
        logger[metadataKey: "apns.key"] = "\(tokenSource.keyID)"
        self.logger = logger
        let machine = Machine(
            configuration: .init(
                maximumConnections: configuration.maximumConnections,
                maximumQueuedRequests: configuration.maximumQueuedRequests,
                backoff: configuration.backoff,
                streamsPerConnection: configuration.streamsPerConnection))
        self.state = NIOLockedValueBox((machine, [:], nil))
        self.metrics = APNsClientMetrics(endpoint: configuration.endpoint.description)
    }

    public func send(_ request: APNsRequest) -> EventLoopFuture<APNsResponse> {
        let promise = group.any().makePromise(of: APNsResponse.self)
        let actions = state.withLockedValue { $0.machine.submit(APNsPendingRequest(request: request, promise: promise)) }
        run(actions)
        return promise.futureResult
    }

    /// One lock for the whole batch, one event-loop task per connection it goes to,
    /// and the answers of each read delivered to `sink` together.
    public func send(_ requests: [APNsTaggedRequest], to sink: any APNsAnswerSink) {
        let actions = state.withLockedValue { state in
            var actions: [Machine.Action] = []
            actions.reserveCapacity(requests.count)
            // By index: each element read where it is, not copied out whole first.
            for i in requests.indices {
                state.machine.submit(
                    APNsPendingRequest(request: requests[i].request, sink: sink, tag: requests[i].tag), into: &actions)
            }
            return actions
        }
        run(actions)
    }

    public func shutdown() -> EventLoopFuture<Void> {
        let promise = group.any().makePromise(of: Void.self)
        let (actions, finishNow) = state.withLockedValue { state -> ([Machine.Action], Bool) in
            if let existing = state.shutdown {
                existing.futureResult.cascade(to: promise)
                return ([], false)
            }
            state.shutdown = promise
            return (state.machine.shutdown(), state.machine.connectionCount == 0)
        }
        run(actions)
        if finishNow { promise.succeed() }
        return promise.futureResult
    }

    // MARK: Actions

    private func run(_ actions: [Machine.Action]) {
        var dispatches: [(connection: Int, pending: APNsPendingRequest)] = []
        for action in actions {
            switch action {
            case .dispatch(let pending, let id):
                dispatches.append((id, pending))
            case .fail(let pending, let error):
                pending.complete(.failure(error))
            case .connect(let id):
                connect(id)
            case .scheduleBackoff(let delay):
                logger.warning("APNs connect failed; retrying after back-off", metadata: ["delay_ms": "\(delay.nanoseconds / 1_000_000)"])
                group.any().scheduleTask(in: delay) { [self] in run(state.withLockedValue { $0.machine.backoffElapsed() }) }
            case .close(let id):
                if let connection = state.withLockedValue({ $0.connections[id] }) {
                    connection.eventLoop.execute { connection.value.closeGracefully() }
                }
            }
        }
        if !dispatches.isEmpty { dispatch(dispatches) }
    }

    /// Hands requests to their connections: one event-loop task per connection, in
    /// order, rather than one per request (a fan-out's answers free slots by the
    /// hundred, and each freed slot used to cost a task and a lock of its own).
    private func dispatch(_ dispatches: [(connection: Int, pending: APNsPendingRequest)]) {
        metrics.inFlight.increment(by: Double(dispatches.count))
        var byConnection: [Int: [APNsPendingRequest]] = [:]
        var order: [Int] = []
        for (id, pending) in dispatches {
            if byConnection[id] == nil { order.append(id) }
            byConnection[id, default: []].append(pending)
        }
        let connections = state.withLockedValue { state in order.map { state.connections[$0] } }
        for (id, connection) in zip(order, connections) {
            let requests = byConnection[id]!
            guard let connection else {
                for pending in requests { run(state.withLockedValue { $0.machine.bounced(pending, from: id) }) }
                continue
            }
            connection.eventLoop.execute { connection.value.send(requests) }
        }
    }

    private func connect(_ id: Int) {
        // Round robin: `any()` called from a loop of the group returns that loop, and
        // the dispatcher calls from one loop, so every connection would share it.
        let eventLoop = group.next()
        let configuration = self.configuration
        let tlsContext = self.tlsContext
        let tokenSource = self.tokenSource
        let host = configuration.endpoint.host
        let authority = configuration.endpoint.authority
        logger.debug("opening APNs connection", metadata: ["connection": "\(id)"])
        ClientBootstrap(group: eventLoop)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(OpenSSLHandler(context: tlsContext, role: .client, serverHostname: host))
                    let handler = try APNsConnectionHandler(
                        id: id, timeouts: configuration.timeouts, tickInterval: configuration.tickInterval,
                        authority: authority, tokenSource: tokenSource, delegate: self)
                    try sync.addHandlers(Self.handlers(above: handler))
                    let bound = NIOLoopBound(handler, eventLoop: channel.eventLoop)
                    self.state.withLockedValue { $0.connections[id] = bound }
                }
            }
            .connect(host: host, port: configuration.endpoint.port)
            .whenFailure { [self] error in
                // The handler was never added, so nobody else reports this connection.
                connectionClosed(id, connectError: describe(error))
            }
    }

    /// An APNs connection's handlers above TLS, in pipeline order: flush coalescing,
    /// then `connection` (its HTTP/2 session inside). Also what
    /// ``APNsConnectionProbe`` counts, so the gate measures what runs.
    static func handlers(above connection: APNsConnectionHandler) -> [any ChannelHandler] {
        [FlushCoalescingHandler(), connection]
    }

    private func describe(_ error: any Error) -> String {
        if let error = error as? NIOConnectionError, let first = error.connectionErrors.first { return "\(first.error)" }
        return "\(error)"
    }

    // MARK: APNsConnectionDelegate

    func connectionUpdated(_ id: Int, phase: Machine.ConnectionPhase, streamLimit: Int) {
        if phase == .ready { logger.debug("APNs connection ready", metadata: ["connection": "\(id)", "streams": "\(streamLimit)"]) }
        if phase == .draining { logger.info("APNs connection draining (GOAWAY)", metadata: ["connection": "\(id)"]) }
        let (actions, lateConnection) = state.withLockedValue { state in
            (
                state.machine.connectionUpdated(id, phase: phase, streamLimit: streamLimit),
                state.shutdown == nil ? nil : state.connections[id]
            )
        }
        run(actions)
        // Came up after shutdown began (it was still connecting): close it too.
        if let lateConnection { lateConnection.eventLoop.execute { lateConnection.value.closeGracefully() } }
        metrics.connections.record(state.withLockedValue { $0.machine.connectionCount })
    }

    func connectionClosed(_ id: Int, connectError: String?) {
        let (actions, shutdownDone) = state.withLockedValue { state -> ([Machine.Action], EventLoopPromise<Void>?) in
            state.connections[id] = nil
            // A connect cut short by our own shutdown is not a failure worth a warning or a back-off.
            let connectError = state.shutdown == nil ? connectError : nil
            if let connectError {
                logger.warning("APNs connect failed", metadata: ["connection": "\(id)", "error": "\(connectError)"])
            }
            let actions = state.machine.connectionClosed(id, connectError: connectError, random: Double.random(in: 0..<1))
            return (actions, state.machine.connectionCount == 0 ? state.shutdown : nil)
        }
        run(actions)
        metrics.connections.record(state.withLockedValue { $0.machine.connectionCount })
        shutdownDone?.succeed()
    }

    func requestsFinished(on id: Int, results: [Result<APNsResponse, APNsTransportError>]) {
        metrics.inFlight.decrement(by: Double(results.count))
        metrics.record(results)
        run(
            state.withLockedValue { state in
                var actions: [Machine.Action] = []
                for _ in results { actions += state.machine.requestFinished(on: id) }
                return actions
            })
    }

    func bounced(_ pending: APNsPendingRequest, from id: Int) {
        metrics.inFlight.decrement()
        run(state.withLockedValue { $0.machine.bounced(pending, from: id) })
    }
}

/// swift-metrics for the client: streams in flight, open connections, responses by status.
struct APNsClientMetrics: Sendable {
    let inFlight: Meter
    let connections: Gauge
    private let byStatus: [Int: Counter]
    private let otherStatus: Counter
    private let byError: [APNsTransportError.Kind: Counter]

    init(endpoint: String) {
        let dimensions = [("endpoint", endpoint)]
        inFlight = Meter(label: "liverelay_apns_streams_in_flight", dimensions: dimensions)
        connections = Gauge(label: "liverelay_apns_connections", dimensions: dimensions)
        var byStatus: [Int: Counter] = [:]
        for status in [200, 201, 204, 400, 403, 404, 405, 410, 413, 429, 500, 503] {
            byStatus[status] = Counter(label: "liverelay_apns_responses_total", dimensions: dimensions + [("status", "\(status)")])
        }
        self.byStatus = byStatus
        otherStatus = Counter(label: "liverelay_apns_responses_total", dimensions: dimensions + [("status", "other")])
        var byError: [APNsTransportError.Kind: Counter] = [:]
        for kind in APNsTransportError.Kind.allCases {
            byError[kind] = Counter(
                label: "liverelay_apns_transport_errors_total",
                dimensions: dimensions + [("reason", kind.rawValue)])
        }
        self.byError = byError
    }

    /// Counted in runs of one status: a read's answers are mostly one (200), one increment.
    func record(_ results: [Result<APNsResponse, APNsTransportError>]) {
        var status: Int?
        var run = 0
        func flush() {
            if let status, run > 0 { (byStatus[status] ?? otherStatus).increment(by: run) }
            run = 0
        }
        for result in results {
            switch result {
            case .success(let response):
                if response.status != status {
                    flush()
                    status = response.status
                }
                run += 1
            case .failure(let error):
                byError[error.kind]?.increment()
            }
        }
        flush()
    }
}
