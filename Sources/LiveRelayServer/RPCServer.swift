import Foundation
import LiveRelayService
import LiveRelayTLS
import LiveRelayWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The LiveRelay RPC listener, run as a swift-service-lifecycle `Service`.
///
/// A `Service` so that SIGTERM/SIGINT handling, ordering with the store and
/// the APNs dispatcher, and the drain-then-exit sequence all come from one
/// `ServiceGroup` instead of ad-hoc signal code. On graceful shutdown it stops
/// accepting, sends GOAWAY NO_ERROR on every connection, lets in-flight calls
/// finish for at most `maxDrainTime`, closes what is left, then returns.
/// Task cancellation skips the drain and closes everything at once.
///
/// Metrics (swift-metrics) are created in `init`: bootstrap `MetricsSystem`
/// before making the server. Logs never contain API keys, only key ids.
public final class RPCServer: Service, Sendable {
    public struct Configuration: Sendable {
        /// Where the event loops come from. A shared group lets the server, the
        /// client library and the APNs client run on the same threads.
        public enum EventLoopGroupProvider: Sendable {
            case shared(any EventLoopGroup)
            /// Created by `run()` and shut down when it returns.
            case createNew(numberOfThreads: Int)
        }

        public var host: String
        /// 0 picks an ephemeral port; read it from `boundAddress`.
        public var port: Int
        /// nil serves plaintext TCP. Only for tests and benchmarks: API keys
        /// would cross the network in the clear.
        public var tls: TLSContext?
        /// The protocol's settings and timeouts (MAX_REQUESTS_IN_FLIGHT, idle
        /// timeout, HELLO timeout, ...), applied to every connection.
        public var connection: ServerConnectionStateMachine.Configuration
        public var eventLoopGroup: EventLoopGroupProvider
        /// How long graceful shutdown waits for in-flight calls before closing
        /// connections anyway, so a stuck call cannot block a deploy.
        public var maxDrainTime: TimeAmount
        /// The listen backlog: connection bursts after a deploy queue here instead of being refused.
        public var backlog: Int32
        /// Reply bytes a connection may have unsent (its channel's high water
        /// mark) before the server stops reading its requests: a client that
        /// sends but does not read cannot make the server buffer without bound.
        /// Reading resumes below half of it.
        public var maxUnsentReplyBytes: Int
        /// Open connections the server takes at most, over all keys (and those
        /// not yet authenticated). A connection accepted over it is closed at
        /// once, before the TLS handshake: the process stays inside its file
        /// descriptors and memory whatever a crowd of peers does. At least 1.
        public var maxConnections: Int
        /// Authenticated connections one API key may hold at once. HELLO on one
        /// more is answered GOAWAY TOO_MANY_CONNECTIONS: a caller whose pool or
        /// retries run away cannot take the global allowance from other keys. At least 1.
        public var maxConnectionsPerKey: Int
        /// Bytes of partial request frames all connections may hold at once
        /// (``RequestMemoryBudget``); a connection whose next frame does not fit
        /// stops reading until it does. Sized so that the connection limits
        /// cannot take the process past the shipped 1 GiB memory limit.
        public var maxBufferedRequestBytes: Int
        /// The same for the connections of one API key, so that one caller
        /// cannot take the whole budget from the others.
        public var maxBufferedRequestBytesPerKey: Int

        public init(
            host: String = "127.0.0.1",
            port: Int = 0,
            tls: TLSContext?,
            connection: ServerConnectionStateMachine.Configuration = .init(),
            eventLoopGroup: EventLoopGroupProvider = .shared(MultiThreadedEventLoopGroup.singleton),
            maxDrainTime: TimeAmount = .seconds(30),
            backlog: Int32 = 256,
            maxUnsentReplyBytes: Int = 1 << 20,
            maxConnections: Int = 10_000,
            maxConnectionsPerKey: Int = 1_000,
            maxBufferedRequestBytes: Int = 64 << 20,
            maxBufferedRequestBytesPerKey: Int = 16 << 20
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.connection = connection
            self.eventLoopGroup = eventLoopGroup
            self.maxDrainTime = maxDrainTime
            self.backlog = backlog
            self.maxUnsentReplyBytes = max(2, maxUnsentReplyBytes)
            self.maxConnections = max(1, maxConnections)
            self.maxConnectionsPerKey = max(1, maxConnectionsPerKey)
            self.maxBufferedRequestBytes = max(1, maxBufferedRequestBytes)
            self.maxBufferedRequestBytesPerKey = max(1, maxBufferedRequestBytesPerKey)
        }
    }

    public let configuration: Configuration
    private let service: any LiveRelayService
    private let admin: (any AdminService)?
    private let authenticator: any Authenticator
    private let logger: Logger
    private let metrics: ServerMetrics
    /// Counts connections against `maxConnections` and `maxConnectionsPerKey`
    /// (internal so tests can wait for a closed connection's slot to come back).
    let limiter: ConnectionLimiter
    /// Bounds the partial request frames buffered (internal so tests can read it).
    let requestMemory: RequestMemoryBudget
    private let bound = OnceValue<SocketAddress>()
    /// The running server's connections; nil before `run()` and after it returns.
    private let tracker = NIOLockedValueBox<ConnectionTracker?>(nil)

    public init(
        configuration: Configuration,
        service: any LiveRelayService,
        authenticator: any Authenticator,
        admin: (any AdminService)? = nil,
        logger: Logger
    ) {
        self.configuration = configuration
        self.service = service
        self.admin = admin
        self.authenticator = authenticator
        self.logger = logger
        self.metrics = ServerMetrics()
        self.limiter = ConnectionLimiter(
            maxConnections: configuration.maxConnections, maxConnectionsPerKey: configuration.maxConnectionsPerKey
        )
        self.requestMemory = RequestMemoryBudget(
            limit: configuration.maxBufferedRequestBytes, perKeyLimit: configuration.maxBufferedRequestBytesPerKey)
    }

    /// The address `run()` is listening on, once it is (with port 0, the port
    /// the kernel chose). Throws if binding failed; waits until `run()` binds.
    public var boundAddress: SocketAddress {
        get async throws { try await bound.value }
    }

    /// Keys revoked while the server runs: every open connection authenticated
    /// with one of them gets GOAWAY UNAUTHENTICATED (its calls in flight are
    /// answered). The authenticator must refuse them already, so that no new
    /// connection gets in between.
    public func revoke(keyIDs: Set<String>) {
        guard !keyIDs.isEmpty, let tracker = tracker.withLockedValue({ $0 }) else { return }
        tracker.broadcast(RPCConnectionHandler.KeysRevoked(keyIDs: keyIDs))
    }

    public func run() async throws {
        let group: any EventLoopGroup
        let ownedGroup: MultiThreadedEventLoopGroup?
        switch configuration.eventLoopGroup {
        case .shared(let shared):
            group = shared
            ownedGroup = nil
        case .createNew(let threads):
            ownedGroup = MultiThreadedEventLoopGroup(numberOfThreads: threads)
            group = ownedGroup!
        }

        let serverLoop = group.next()
        let tracker = ConnectionTracker(eventLoop: serverLoop, logger: logger, limiter: limiter, metrics: metrics)
        self.tracker.withLockedValue { $0 = tracker }
        defer { self.tracker.withLockedValue { $0 = nil } }
        let channel: any Channel
        do {
            channel = try await makeBootstrap(group: group, serverLoop: serverLoop, tracker: tracker)
                .bind(host: configuration.host, port: configuration.port).get()
        } catch {
            logger.error(
                "cannot listen", metadata: ["host": "\(configuration.host)", "port": "\(configuration.port)", "error": "\(error)"])
            bound.fail(error)
            try? await ownedGroup?.shutdownGracefully()
            throw error
        }
        let address = channel.localAddress!
        bound.succeed(address)
        logger.info(
            "listening",
            metadata: ["address": "\(address)", "tls": "\(configuration.tls != nil)"]
        )

        // Serve until graceful shutdown (or cancellation) closes the listener.
        await withTaskCancellationOrGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onCancelOrGracefulShutdown: {
            channel.close(promise: nil)
        }

        let drainTime = Task.isCancelled ? TimeAmount.zero : configuration.maxDrainTime
        let open = (try? await tracker.count.get()) ?? 0
        logger.info("shutting down", metadata: ["connections": "\(open)", "max_drain": "\(drainTime)"])
        await withTaskCancellationHandler {
            try? await tracker.shutdown(drainTime: drainTime).get()
        } onCancel: {
            tracker.forceCloseAll()
        }
        logger.info("RPC server stopped")
        try? await ownedGroup?.shutdownGracefully()
    }

    private func makeBootstrap(group: any EventLoopGroup, serverLoop: any EventLoop, tracker: ConnectionTracker) -> ServerBootstrap {
        let tls = configuration.tls
        let connection = configuration.connection
        let service = self.service
        let authenticator = self.authenticator
        let admin = self.admin
        let logger = self.logger
        let metrics = self.metrics
        let shutdownFlag = tracker.shutdownFlag
        let limiter = self.limiter
        let requestMemory = self.requestMemory
        // The listener runs on the tracker's loop, so accepted channels reach it without a hop.
        return ServerBootstrap(group: serverLoop, childGroup: group)
            .serverChannelOption(.backlog, value: configuration.backlog)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(tracker)
                }
            }
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelOption(
                .writeBufferWaterMark,
                value: .init(low: configuration.maxUnsentReplyBytes / 2, high: configuration.maxUnsentReplyBytes)
            )
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        try sync.addHandler(OpenSSLHandler(context: tls, role: .server))
                    }
                    var connectionLogger = logger
                    connectionLogger[metadataKey: "peer"] = "\(channel.remoteAddress.map { "\($0)" } ?? "?")"
                    try sync.addHandler(
                        RPCConnectionHandler(
                            configuration: connection,
                            service: service,
                            authenticator: authenticator,
                            logger: connectionLogger,
                            metrics: metrics,
                            shutdownFlag: shutdownFlag,
                            limiter: limiter,
                            requestMemory: requestMemory,
                            admin: admin
                        )
                    )
                }
            }
    }
}

/// A value set once from any thread and awaited from any task.
final class OnceValue<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<Value, any Error>?
    private var waiters: [CheckedContinuation<Value, any Error>] = []

    var value: Value {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                lock.lock()
                if let result {
                    lock.unlock()
                    continuation.resume(with: result)
                } else {
                    waiters.append(continuation)
                    lock.unlock()
                }
            }
        }
    }

    func succeed(_ value: Value) { complete(.success(value)) }
    func fail(_ error: any Error) { complete(.failure(error)) }

    private func complete(_ result: Result<Value, any Error>) {
        lock.lock()
        guard self.result == nil else {
            lock.unlock()
            return
        }
        self.result = result
        let waiters = self.waiters
        self.waiters = []
        lock.unlock()
        for waiter in waiters { waiter.resume(with: result) }
    }
}
