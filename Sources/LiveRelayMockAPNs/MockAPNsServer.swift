import LiveRelayAPNs
import LiveRelayTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2
import NIOPosix
import ServiceLifecycle

/// An HTTP/2 TLS server that answers like APNs for Live Activity pushes:
/// it verifies provider tokens against the configured apps' public keys,
/// checks every header and the `aps` shape (``MockAPNsValidator``), injects
/// the configured faults, and records what it received, in order.
///
/// Tests start it on an ephemeral port, trust ``certificatePEM`` and assert on
/// ``received``; `liverelay mock-apns` runs it as a ServiceLifecycle service.
public final class MockAPNsServer: Sendable {
    /// The bound port (the real one when the configuration asked for 0).
    public let port: Int
    /// The server certificate: the configured one, or the self-signed one made at start.
    public let certificatePEM: String
    /// True when ``certificatePEM`` was generated at start.
    public let certificateWasGenerated: Bool
    public let configuration: MockAPNsConfiguration

    private let serverChannel: Channel
    private let shared: MockAPNsShared
    private let logger: Logger
    private let stopped = NIOLockedValueBox(false)

    private init(
        port: Int, certificatePEM: String, certificateWasGenerated: Bool, configuration: MockAPNsConfiguration,
        serverChannel: Channel, shared: MockAPNsShared, logger: Logger
    ) {
        self.port = port
        self.certificatePEM = certificatePEM
        self.certificateWasGenerated = certificateWasGenerated
        self.configuration = configuration
        self.serverChannel = serverChannel
        self.shared = shared
        self.logger = logger
    }

    /// Binds and starts accepting. Fails on a bad app key, bad TLS material, an unwritable record file or a bind error.
    public static func start(
        configuration: MockAPNsConfiguration, group: EventLoopGroup,
        logger: Logger = Logger(label: "liverelay.mock-apns")
    ) async throws -> MockAPNsServer {
        let validator = try MockAPNsValidator(configuration: configuration)
        let certificatePEM: String
        let privateKeyPEM: String
        let generated: Bool
        if let certificate = configuration.certificatePEM, let key = configuration.privateKeyPEM {
            (certificatePEM, privateKeyPEM, generated) = (certificate, key, false)
        } else {
            let pair = try SelfSignedCertificate.generate(
                commonName: "localhost", subjectAltNames: ["localhost", "127.0.0.1", "::1"])
            (certificatePEM, privateKeyPEM, generated) = (pair.certificatePEM, pair.privateKeyPEM, true)
        }
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: .string(certificatePEM), privateKey: .string(privateKeyPEM))
        tls.applicationProtocols = ["h2"]
        tls.shutdownTimeout = .seconds(2)
        let tlsContext = try TLSContext(configuration: tls)
        let recorder = try MockAPNsRecorder(capacity: configuration.recordingCapacity, recordFile: configuration.recordFile)
        let shared = MockAPNsShared(configuration: configuration, validator: validator, recorder: recorder)

        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try Self.configureConnection(channel, tlsContext: tlsContext, shared: shared, logger: logger)
                }
            }
        let serverChannel: Channel
        do {
            serverChannel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        } catch {
            recorder.close()
            throw MockAPNsError("cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
        let port = serverChannel.localAddress?.port ?? configuration.port
        logger.info("mock APNs listening", metadata: ["address": "\(configuration.host):\(port)"])
        return MockAPNsServer(
            port: port, certificatePEM: certificatePEM, certificateWasGenerated: generated,
            configuration: configuration, serverChannel: serverChannel, shared: shared, logger: logger)
    }

    /// TLS (ALPN h2 only), HTTP/2 in frame mode with the configured stream limit, and one
    /// ``MockAPNsConnectionHandler`` for every stream of the connection.
    private static func configureConnection(
        _ channel: Channel, tlsContext: TLSContext, shared: MockAPNsShared, logger: Logger
    ) throws {
        let closer = MockAPNsAbruptCloser()
        let number = shared.nextConnectionNumber()
        let connection = MockAPNsConnection(number: number, shared: shared, channel: channel, closer: closer)
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(closer)
        try sync.addHandler(OpenSSLHandler(context: tlsContext, role: .server))

        let streamWindow = 1 << 20
        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: shared.initialStreamLimit),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16384),
            HTTP2Setting(parameter: .initialWindowSize, value: streamWindow),
        ]
        let loopBound = NIOLoopBound(connection, eventLoop: channel.eventLoop)
        try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connectionConfiguration))
        try sync.addHandler(
            MockAPNsConnectionHandler(connection: connection, connectionWindowTarget: 1 << 24, streamWindowTarget: streamWindow))
        try sync.addHandler(MockAPNsConnectionErrorHandler(logger: logger, connection: number))

        shared.recorder.count { $0.connectionsAccepted += 1 }
        let eventLoop = channel.eventLoop
        shared.connections.withLockedValue {
            $0[number] = (channel, { eventLoop.execute { loopBound.value.drain(deadline: .seconds(2)) } })
        }
        channel.closeFuture.whenComplete { _ in
            _ = shared.connections.withLockedValue { $0.removeValue(forKey: number) }
        }
        logger.debug("mock APNs connection", metadata: ["connection": "\(number)"])
    }

    /// Every stream received since start (or ``reset()``), oldest first, at most
    /// ``MockAPNsConfiguration/recordingCapacity`` of the most recent.
    public var received: [MockAPNsRecord] { shared.recorder.records }

    public var counters: MockAPNsCounters { shared.recorder.counters }

    /// What reached `deviceToken`, oldest first: its accepted pushes and the accepted
    /// broadcasts to channels it was subscribed to (among the records kept).
    public func deliveries(to deviceToken: String) -> [MockAPNsDelivery] { shared.recorder.deliveries(to: deviceToken) }

    /// The device tokens (lowercase) subscribed to `channelID`, in subscription order.
    public func subscribers(of channelID: String) -> [String] { shared.channels.subscribers(of: channelID) }

    /// The app's channels in this mock's environment, in creation order.
    public func channels(bundleID: String) -> [MockAPNsChannel] {
        shared.channels.channels(bundleID: bundleID, environment: configuration.environment)
    }

    /// The channel registry (shared with other mocks when the configuration gave one).
    public var channelStore: MockAPNsChannelStore { shared.channels }

    /// Forgets the records and counters (connections, their token state and the channels stay).
    public func reset() { shared.recorder.reset() }

    /// Stops accepting, sends GOAWAY on every connection, lets in-flight
    /// streams finish (at most 2 s), then closes. Safe to call more than once.
    public func shutdown() async throws {
        let first = stopped.withLockedValue { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        try? await serverChannel.close()
        let connections = shared.connections.withLockedValue { Array($0.values) }
        for connection in connections { connection.drain() }
        for connection in connections { try? await connection.channel.closeFuture.get() }
        shared.recorder.close()
        logger.info("mock APNs stopped", metadata: ["port": "\(port)"])
    }
}

extension MockAPNsServer: Service {
    /// Runs until graceful shutdown (SIGTERM/SIGINT through ServiceGroup) or cancellation, then ``shutdown()``.
    public func run() async throws {
        try? await gracefulShutdown()
        try await shutdown()
    }
}

/// TLS and I/O errors end the connection; HTTP/2 errors were already answered by
/// nio-http2 (see `errorCaught`). They are the peer's problem, so they are logged
/// at debug only.
final class MockAPNsConnectionErrorHandler: ChannelInboundHandler {
    typealias InboundIn = Any
    let logger: Logger
    let connection: Int

    init(logger: Logger, connection: Int) {
        self.logger = logger
        self.connection = connection
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("mock APNs connection error", metadata: ["connection": "\(connection)", "error": "\(error)"])
        // nio-http2 has answered its own errors (RST_STREAM for a stream's, GOAWAY for the
        // connection's): a DATA frame for a stream the GOAWAY excluded, say, must not end
        // the streams still being served, as APNs would not.
        if error is any NIOHTTP2Error { return }
        context.close(promise: nil)
    }
}
