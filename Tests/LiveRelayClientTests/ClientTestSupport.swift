import Foundation
import LiveRelayClient
import LiveRelayComposition
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayServer
import LiveRelayService
import LiveRelayTLS
import LiveRelayTestSupport
import LiveRelayWire
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

/// One self-signed certificate for the suite (key generation is the slow part).
enum TestTLS {
    static let pem: (certificatePEM: String, privateKeyPEM: String) = {
        try! SelfSignedCertificate.generate(commonName: "localhost", subjectAltNames: ["localhost", "127.0.0.1"])
    }()

    static let server: TLSContext = try! TLSContext(
        configuration: .makeServerConfiguration(certificateChain: .string(pem.certificatePEM), privateKey: .string(pem.privateKeyPEM))
    )

    /// What a client given the server's `cert.pem` as its CA file does.
    static var client: LiveRelayClient.TLS {
        .trusting(caPEM: pem.certificatePEM)
    }
}

enum TestKeys {
    static let all = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: Set(LiveRelayMethod.allCases))
    static let pingOnly = APIKeyAuthenticator.generateKey(apps: .only(["com.example.app"]), allowedMethods: [.ping])
}

let testLogger: Logger = {
    var logger = Logger(label: "liverelay.client.tests")
    logger.logLevel = ProcessInfo.processInfo.environment["LIVERELAY_TEST_LOG"] != nil ? .trace : .critical
    return logger
}()

/// A real server from `ServerBuilder`, with a service the test controls, as `liverelay serve` runs it.
final class TestServer: Sendable {
    let group: ServiceGroup
    let runTask: Task<Void, any Error>
    let port: Int

    private init(group: ServiceGroup, runTask: Task<Void, any Error>, port: Int) {
        self.group = group
        self.runTask = runTask
        self.port = port
    }

    static func start(
        service: any LiveRelayService = NullLiveRelayService(),
        port: Int = 0,
        tls: Bool = true,
        settings: ServerSettings = ServerSettings(idleTimeoutMilliseconds: 300_000)
    ) async throws -> TestServer {
        var description = ServerDescription()
        description.port = port
        description.tls = tls ? TestTLS.server : nil
        description.connection = ServerConnectionStateMachine.Configuration(settings: settings)
        description.drainTime = .seconds(10)
        description.calls = .custom(service)
        description.seedKeys = try [TestKeys.all.record, TestKeys.pingOnly.record].map { try RegisteredAPIKey(seed: $0) }
        description.logger = testLogger
        let built = try await ServerBuilder.build(description)
        let group = built.serviceGroup(gracefulShutdownSignals: [], logger: testLogger)
        let runTask = Task { try await group.run() }
        let address = try await withTimeout(.seconds(60)) { try await built.server.boundAddress }
        return TestServer(group: group, runTask: runTask, port: address.port!)
    }

    /// Graceful shutdown (GOAWAY, drain, close), without waiting for it to end.
    func beginShutdown() async {
        await self.group.triggerGracefulShutdown()
    }

    func shutdown() async throws {
        await self.group.triggerGracefulShutdown()
        try await withTimeout(.seconds(20)) { try await self.runTask.value }
    }
}

func makeClient(
    port: Int,
    tls: LiveRelayClient.TLS? = TestTLS.client,
    apiKey: String = TestKeys.all.plaintext,
    connections: Int = 1,
    retryPolicy: LiveRelayClient.RetryPolicy = LiveRelayClient.RetryPolicy(),
    // A ceiling for a loaded two-core machine; the tests of deadlines pass their own.
    defaultTimeout: Duration? = .seconds(60)
) -> LiveRelayClient {
    LiveRelayClient(
        configuration: LiveRelayClient.Configuration(
            host: "127.0.0.1", port: port, tls: tls, apiKey: apiKey, clientName: "client-tests",
            connections: connections, defaultTimeout: defaultTimeout,
            backoff: LiveRelayClient.Backoff(initial: .milliseconds(20), maximum: .milliseconds(200)),
            retryPolicy: retryPolicy, shutdownGracePeriod: .seconds(5)
        ),
        logger: testLogger
    )
}

extension ByteBuffer {
    init(message: some LiveRelayMessage) {
        self.init()
        message.serialize(into: &self)
    }
}

/// A service with real replies derived from each request, so decoding is
/// checked, and a Ping whose payload is "hold" is held until released:
/// in flight for as long as a test needs it.
final class TestService: LiveRelayService, @unchecked Sendable {
    struct Held {
        var context: CallContext
        var promise: EventLoopPromise<PingReply>
        var payload: [UInt8]
    }

    private let lock = NSLock()
    private var _held: [Held] = []

    var held: [Held] { self.lock.withLock { self._held } }

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        if let error = context.principal.checkApp(request.appID) { return context.fail(error) }
        return context.eventLoop.makeSucceededFuture(RegisterTokenReply(result: request.remove ? .removed : .created))
    }

    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        if let error = context.principal.checkApp(request.appID ?? "") { return context.fail(error) }
        let targeted = UInt32(request.targets?.pushToStartTokens.count ?? 0)
        return context.eventLoop.makeSucceededFuture(
            StartActivityReply(
                activityID: request.activityID ?? "", timestamp: 1_700_000_000,
                summary: DeliverySummary(targeted: targeted, queued: targeted), state: .starting
            )
        )
    }

    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        if request.activityID == "missing" {
            return context.fail(RPCError(.notFound, "no activity \"missing\"", details: ErrorDetails(reason: "ActivityNotFound")))
        }
        return context.eventLoop.makeSucceededFuture(UpdateActivityReply(timestamp: 1_700_000_001, state: .active))
    }

    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        context.eventLoop.makeSucceededFuture(
            EndActivityReply(timestamp: 1_700_000_002, replayed: request.idempotencyKey == "again", state: .ended))
    }

    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        guard request.payload.starts(with: Array("hold".utf8)) else {
            return context.eventLoop.makeSucceededFuture(PingReply(payload: request.payload, serverTimeMS: 1, serverVersion: "test"))
        }
        let promise = context.eventLoop.makePromise(of: PingReply.self)
        self.lock.withLock { self._held.append(Held(context: context, promise: promise, payload: request.payload)) }
        return promise.futureResult
    }

    /// Answers every held call now.
    func releaseAll() {
        let held = self.lock.withLock { () -> [Held] in
            defer { self._held.removeAll() }
            return self._held
        }
        for call in held {
            call.promise.succeed(PingReply(payload: call.payload, serverTimeMS: 2, serverVersion: "released"))
        }
    }

    /// Whether the server set the call's cancellation flag (read on its loop, where it is written).
    static func isCancelled(_ held: Held) async -> Bool {
        (try? await held.context.eventLoop.submit { held.context.cancellation.isCancelled }.get()) ?? false
    }
}
