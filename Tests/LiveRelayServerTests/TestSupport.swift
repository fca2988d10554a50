import Foundation
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

/// One self-signed certificate for the whole suite (key generation is the slow part).
enum TestTLS {
    static let pem: (certificatePEM: String, privateKeyPEM: String) = {
        try! SelfSignedCertificate.generate(commonName: "localhost", subjectAltNames: ["localhost", "127.0.0.1"])
    }()

    static let server: TLSContext = try! TLSContext(
        configuration: .makeServerConfiguration(
            certificateChain: .string(pem.certificatePEM),
            privateKey: .string(pem.privateKeyPEM)
        )
    )

    /// Verifies the server's certificate and its IP address, as a real client would.
    static let client: TLSContext = try! TLSContext(
        configuration: TLSConfiguration(
            trustRoots: .pem(.string(pem.certificatePEM)),
            certificateVerification: .fullVerification,
            serverHostname: "127.0.0.1"
        )
    )
}

/// API keys for the tests: one allowed everything, one allowed only Ping.
enum TestKeys {
    static let all = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: Set(LiveRelayMethod.allCases))
    static let pingOnly = APIKeyAuthenticator.generateKey(apps: .only(["com.example.app"]), allowedMethods: [.ping])
    static let authenticator = try! APIKeyAuthenticator(records: [all.record, pingOnly.record])
}

var testLogger: Logger {
    var logger = Logger(label: "liverelay.server.tests")
    logger.logLevel = ProcessInfo.processInfo.environment["LIVERELAY_TEST_LOG"] != nil ? .trace : .critical
    return logger
}

/// An `RPCServer` running inside a `ServiceGroup`, as `liverelay serve` runs it.
final class TestServer: Sendable {
    let server: RPCServer
    let group: ServiceGroup
    let runTask: Task<Void, any Error>
    let address: SocketAddress

    private init(server: RPCServer, group: ServiceGroup, runTask: Task<Void, any Error>, address: SocketAddress) {
        self.server = server
        self.group = group
        self.runTask = runTask
        self.address = address
    }

    static func start(
        service: any LiveRelayService = NullLiveRelayService(),
        authenticator: any Authenticator = TestKeys.authenticator,
        settings: ServerSettings = ServerSettings(idleTimeoutMilliseconds: 300_000),
        tls: Bool = true,
        helloTimeout: TimeAmount = .seconds(10),
        maxDrainTime: TimeAmount = .seconds(10),
        maxConnections: Int = 10_000,
        maxConnectionsPerKey: Int = 1_000,
        maxBufferedRequestBytes: Int = 64 << 20,
        maxBufferedRequestBytesPerKey: Int = 16 << 20
    ) async throws -> TestServer {
        let configuration = RPCServer.Configuration(
            host: "127.0.0.1",
            port: 0,
            tls: tls ? TestTLS.server : nil,
            connection: ServerConnectionStateMachine.Configuration(settings: settings, helloTimeout: helloTimeout),
            maxDrainTime: maxDrainTime,
            maxConnections: maxConnections,
            maxConnectionsPerKey: maxConnectionsPerKey,
            maxBufferedRequestBytes: maxBufferedRequestBytes,
            maxBufferedRequestBytesPerKey: maxBufferedRequestBytesPerKey
        )
        let server = RPCServer(configuration: configuration, service: service, authenticator: authenticator, logger: testLogger)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: [server], gracefulShutdownSignals: [], logger: testLogger)
        )
        let runTask = Task { try await group.run() }
        let address = try await withTimeout(.seconds(60)) { try await server.boundAddress }
        return TestServer(server: server, group: group, runTask: runTask, address: address)
    }

    func connect(tls: Bool = true) async throws -> RawClient {
        try await RawClient.connect(to: address, tls: tls ? TestTLS.client : nil)
    }

    /// A connection past WELCOME, with the key allowed every method.
    func connectAndHello(apiKey: String = TestKeys.all.plaintext, tls: Bool = true) async throws -> RawClient {
        let client = try await connect(tls: tls)
        let first = try await client.hello(apiKey: apiKey)
        guard case .welcome = first else { throw TestFailure("expected WELCOME, got \(first)") }
        return client
    }

    /// Graceful shutdown through the ServiceGroup, then waits for `run()` to return.
    func shutdown() async throws {
        await group.triggerGracefulShutdown()
        try await waitUntilStopped()
    }

    func waitUntilStopped(timeout: TimeAmount = .seconds(20)) async throws {
        try await withTimeout(timeout) { try await self.runTask.value }
    }
}

func request(_ id: RequestID, _ method: LiveRelayMethod, _ message: some LiveRelayMessage, timeoutMs: UInt32 = 0) -> Frame {
    var payload = ByteBuffer()
    message.serialize(into: &payload)
    return .request(id, Frame.Request(timeoutMilliseconds: timeoutMs, method: method.rawValue, payload: payload))
}

func ping(_ id: RequestID, _ payload: [UInt8] = Array("hi".utf8), timeoutMs: UInt32 = 0) -> Frame {
    request(id, .ping, PingRequest(payload: payload), timeoutMs: timeoutMs)
}

/// The ERROR frame for `id`, or a test failure naming what came instead.
func expectError(
    _ frame: Frame, id: RequestID, status: StatusCode, sourceLocation: SourceLocation = #_sourceLocation
) -> Frame.RequestError? {
    guard case .error(let gotID, let error) = frame else {
        Issue.record("expected ERROR \(status) for \(id), got \(frame)", sourceLocation: sourceLocation)
        return nil
    }
    #expect(gotID == id, sourceLocation: sourceLocation)
    #expect(error.status == status, "message: \(error.message)", sourceLocation: sourceLocation)
    return error
}

func expectResponse(_ frame: Frame, id: RequestID, sourceLocation: SourceLocation = #_sourceLocation) -> ByteBuffer? {
    guard case .response(let gotID, let payload) = frame else {
        Issue.record("expected RESPONSE for \(id), got \(frame)", sourceLocation: sourceLocation)
        return nil
    }
    #expect(gotID == id, sourceLocation: sourceLocation)
    return payload
}

func expectGoAway(_ frame: Frame, code: GoAwayCode, sourceLocation: SourceLocation = #_sourceLocation) -> Frame.GoAway? {
    guard case .goAway(let goAway) = frame else {
        Issue.record("expected GOAWAY \(code), got \(frame)", sourceLocation: sourceLocation)
        return nil
    }
    #expect(goAway.code == code, "reason: \(goAway.reason)", sourceLocation: sourceLocation)
    return goAway
}

/// Valid requests for every RPC (the same fixtures the message tests use).
enum Fixtures {
    static let token = "a1b2c3d4e5f60718293a4b5c6d7e8f90"

    static var register: RegisterTokenRequest {
        RegisterTokenRequest(
            appID: "com.example.app", kind: .pushToStart, token: token, environment: .sandbox,
            attributesType: "DeliveryAttributes", externalUserID: "user-1", deviceID: "device-1")
    }

    static var start: StartActivityRequest {
        StartActivityRequest(
            appID: "com.example.app", activityID: "order-42", attributesType: "Module.DeliveryAttributes",
            attributesJSON: #"{"orderID":"42"}"#, contentStateJSON: #"{"eta":12}"#,
            targets: Targets(pushToStartTokens: [token]), idempotencyKey: "key-1")
    }

    static var update: UpdateActivityRequest {
        UpdateActivityRequest(
            appID: "com.example.app", activityID: "order-42", contentStateJSON: #"{"eta":5}"#, idempotencyKey: "key-2")
    }

    static var end: EndActivityRequest {
        EndActivityRequest(appID: "com.example.app", activityID: "order-42", idempotencyKey: "key-3")
    }
}

/// Starts a server, runs `body`, and always shuts the server down (gracefully) afterwards.
func withServer(
    service: any LiveRelayService = NullLiveRelayService(),
    authenticator: any Authenticator = TestKeys.authenticator,
    settings: ServerSettings = ServerSettings(idleTimeoutMilliseconds: 300_000),
    tls: Bool = true,
    _ body: (TestServer) async throws -> Void
) async throws {
    let server = try await TestServer.start(service: service, authenticator: authenticator, settings: settings, tls: tls)
    do {
        try await body(server)
    } catch {
        try? await server.shutdown()
        throw error
    }
    try await server.shutdown()
}
