import LiveRelayClient
import LiveRelayMessages
import LiveRelayServer
import LiveRelayTLS
import LiveRelayTestSupport
import LiveRelayWire
import NIOCore
import Testing

@testable import LiveRelayClient

let token64 = String(repeating: "ab", count: 32)

/// Against a real `RPCServer` over TLS with a self-signed certificate.
@Suite(.timeLimit(.minutes(1))) struct ClientRPCTests {
    @Test func everyRPC() async throws {
        let server = try await TestServer.start(service: TestService())
        let client = makeClient(port: server.port)

        let registered = try await client.registerToken(
            RegisterTokenRequest(
                appID: "dev.app", kind: .pushToStart, token: token64, environment: .sandbox, attributesType: "DeliveryAttributes")
        )
        #expect(registered.result == .created)

        let started = try await client.startActivity(
            StartActivityRequest(
                appID: "dev.app", activityID: "order-1", attributesType: "DeliveryAttributes",
                attributesJSON: #"{"orderId":1}"#, contentStateJSON: #"{"status":"preparing"}"#,
                targets: Targets(pushToStartTokens: [token64]), idempotencyKey: "start-order-1"
            )
        )
        #expect(started.activityID == "order-1")
        #expect(started.state == .starting)
        #expect(started.summary?.targeted == 1)

        let updated = try await client.updateActivity(
            UpdateActivityRequest(appID: "dev.app", activityID: "order-1", contentStateJSON: #"{"status":"on the way"}"#)
        )
        #expect(updated.state == .active)

        let ended = try await client.endActivity(EndActivityRequest(appID: "dev.app", activityID: "order-1", idempotencyKey: "again"))
        #expect(ended.state == .ended)
        #expect(ended.replayed)

        let pong = try await client.ping(PingRequest(payload: [1, 2, 3]))
        #expect(pong.payload == [1, 2, 3])
        #expect(pong.serverVersion == "test")

        await client.shutdown()
        try await server.shutdown()
    }

    @Test func serverErrorsCarryStatusAndDetails() async throws {
        let server = try await TestServer.start(service: TestService())
        let client = makeClient(port: server.port)
        do {
            _ = try await client.updateActivity(UpdateActivityRequest(appID: "dev.app", activityID: "missing", contentStateJSON: "{}"))
            Issue.record("expected NOT_FOUND")
        } catch {
            #expect(error.status == .notFound)
            #expect(error.message == #"no activity "missing""#)
            #expect(error.details.reason == "ActivityNotFound")
            #expect(error.processing == .answered)
            #expect(!error.isRetryable)
        }
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func invalidRequestFailsLocallyWithFieldViolation() async throws {
        // No server: validation happens before anything is sent.
        let client = makeClient(port: 1)
        do {
            _ = try await client.registerToken(RegisterTokenRequest(appID: "dev.app", kind: .update, token: "XYZ", environment: .sandbox))
            Issue.record("expected INVALID_ARGUMENT")
        } catch {
            #expect(error.status == .invalidArgument)
            #expect(error.details.fieldViolations.first?.field == "token")
            #expect(error.processing == .notProcessed)
        }
        #expect(client.pool.connectionsCreated == 0)
        await client.shutdown()
    }

    @Test func wrongAPIKeyIsUnauthenticated() async throws {
        let server = try await TestServer.start()
        let wrong = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping]).plaintext
        let client = makeClient(port: server.port, apiKey: wrong)
        do {
            _ = try await client.ping()
            Issue.record("expected UNAUTHENTICATED")
        } catch {
            #expect(error.status == .unauthenticated)
            #expect(error.message.contains("invalid API key"))
            #expect(!error.isRetryable)
        }
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func keyWithoutTheMethodIsPermissionDenied() async throws {
        let server = try await TestServer.start()
        let client = makeClient(port: server.port, apiKey: TestKeys.pingOnly.plaintext)
        _ = try await client.ping()
        do {
            _ = try await client.endActivity(EndActivityRequest(appID: "com.example.app", activityID: "a"))
            Issue.record("expected PERMISSION_DENIED")
        } catch {
            #expect(error.status == .permissionDenied)
        }
        // The connection is unharmed.
        _ = try await client.ping()
        #expect(client.pool.connectionsCreated == 1)
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func thousandPipelinedCallsOnOneConnection() async throws {
        let server = try await TestServer.start(settings: ServerSettings(maxRequestsInFlight: 100, idleTimeoutMilliseconds: 300_000))
        // The calls' deadline is far past what 1,000 pings take: the queue is under test,
        // not the machine's speed (10 s ran out on a loaded 2-core machine).
        let client = makeClient(port: server.port, connections: 1, defaultTimeout: .seconds(300))
        // Above the server's MAX_REQUESTS_IN_FLIGHT: the client queues the rest
        // and sends them as replies free slots; none may be refused.
        let futures = (0..<1_000).map { i in
            client.call(.ping, payload: ByteBuffer(message: PingRequest(payload: Array("\(i)".utf8))))
        }
        for (i, future) in futures.enumerated() {
            let reply = try PingReply(serializedBytes: try await future.get())
            #expect(reply.payload == Array("\(i)".utf8))
        }
        #expect(client.pool.connectionsCreated == 1)
        #expect(client.pool.pendingCalls == 0)
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func callsSpreadOverThePool() async throws {
        let server = try await TestServer.start()
        let client = makeClient(port: server.port, connections: 3)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<300 {
                group.addTask { _ = try await client.ping(PingRequest(payload: [UInt8(i % 256)])) }
            }
            try await group.waitForAll()
        }
        #expect(client.pool.connectionsCreated == 3)
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func deadlineExceeded() async throws {
        let service = TestService()
        let server = try await TestServer.start(service: service)
        let client = makeClient(port: server.port)
        _ = try await client.ping()  // connected, so the deadline measures the call only
        let start = NIODeadline.now()
        do {
            // Long enough that the request is surely written before it passes, even while the
            // parallel suites load both cores: a call never sent is notProcessed, not this case.
            _ = try await client.ping(PingRequest(payload: Array("hold".utf8)), timeout: .seconds(2))
            Issue.record("expected DEADLINE_EXCEEDED")
        } catch {
            #expect(error.status == .deadlineExceeded)
            #expect(error.processing == .mayHaveBeenProcessed)
            #expect(!error.isRetryable && error.isRetryableIfIdempotent)
        }
        let elapsed = NIODeadline.now() - start
        #expect(elapsed >= .seconds(2) && elapsed < .seconds(30), "the call's deadline, not the client's default of 60 s, ended it")
        // The client's CANCEL (or the server's own deadline) stops the work on the server.
        try await eventually("the server to give up on the call") {
            guard let held = service.held.first else { return false }
            return await TestService.isCancelled(held)
        }
        _ = try await client.ping()
        service.releaseAll()
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func taskCancellationSendsCancel() async throws {
        let service = TestService()
        let server = try await TestServer.start(service: service)
        // No deadline, so only the CANCEL frame can stop the call on the server.
        let client = makeClient(port: server.port, defaultTimeout: nil)
        let task = Task { try await client.ping(PingRequest(payload: Array("hold".utf8))) }
        try await eventually("the call to reach the service") { service.held.count == 1 }
        task.cancel()
        let result = await task.result
        guard case .failure(let error as LiveRelayClientError) = result else {
            Issue.record("expected CANCELLED, got \(result)")
            return
        }
        #expect(error.status == .cancelled)
        try await eventually("the server to see the CANCEL") { await TestService.isCancelled(service.held[0]) }
        // The id's slot is freed by the server's CANCELLED reply; the connection carries on.
        _ = try await client.ping()
        #expect(client.pool.connectionsCreated == 1)
        service.releaseAll()
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func alreadyCancelledTaskSendsNothing() async throws {
        let client = makeClient(port: 1)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client.ping()
        }
        let result = await task.result
        guard case .failure(let error as LiveRelayClientError) = result else {
            Issue.record("expected CANCELLED")
            return
        }
        #expect(error.status == .cancelled && error.processing == .notProcessed)
        #expect(client.pool.connectionsCreated == 0)
        await client.shutdown()
    }
}

/// The scoped form: the client lives for the body, whatever way the body ends.
@Suite(.timeLimit(.minutes(1))) struct ClientLifecycleTests {
    struct Stop: Error {}

    func configuration(port: Int) -> LiveRelayClient.Configuration {
        LiveRelayClient.Configuration(
            host: "127.0.0.1", port: port, tls: TestTLS.client, apiKey: TestKeys.all.plaintext, connections: 1)
    }

    @Test func withClientShutsTheClientDownWhenTheBodyReturns() async throws {
        let server = try await TestServer.start(service: TestService())
        let escaped = try await LiveRelayClient.withClient(configuration: configuration(port: server.port), logger: testLogger) {
            client in
            let pong = try await client.ping(PingRequest(payload: [7]))
            #expect(pong.payload == [7])
            #expect(client.pool.connectionsCreated == 1)
            return client
        }
        // A client kept past its scope refuses calls instead of opening connections again.
        do {
            _ = try await escaped.ping()
            Issue.record("expected the client to be shut down")
        } catch {
            #expect(error.status == .unavailable)
            #expect(error.message == "the client is shut down")
            #expect(error.processing == .notProcessed)
        }
        #expect(escaped.pool.connectionsCreated == 1)
        try await server.shutdown()
    }

    @Test func withClientShutsTheClientDownAndRethrowsWhenTheBodyThrows() async throws {
        let server = try await TestServer.start(service: TestService())
        var escaped: LiveRelayClient?
        await #expect(throws: Stop.self) {
            try await LiveRelayClient.withClient(configuration: configuration(port: server.port), logger: testLogger) {
                client throws(Stop) in
                escaped = client
                throw Stop()
            }
        }
        let client = try #require(escaped)
        await #expect(throws: LiveRelayClientError.self) { try await client.ping() }
        try await server.shutdown()
    }
}

@Suite struct ClientErrorDispositionTests {
    func failure(_ status: StatusCode, reason: String) -> LiveRelayClientError {
        var details = ByteBuffer()
        ErrorDetails(reason: reason).serialize(into: &details)
        return LiveRelayClientError(
            ClientConnectionStateMachine.CallFailure(status: status, message: "m", details: details, disposition: .notProcessed))
    }

    /// UNAVAILABLE means "not processed, resend at will", except when the server says
    /// its commit's outcome is unknown: then only a resend with the same key is safe.
    @Test func anUnavailableOfUnknownOutcomeMayHaveBeenProcessed() {
        let unknown = failure(.unavailable, reason: ErrorDetails.outcomeUnknownReason)
        #expect(unknown.processing == .mayHaveBeenProcessed)
        #expect(!unknown.isRetryable)
        #expect(unknown.isRetryableIfIdempotent)
        let plain = failure(.unavailable, reason: "")
        #expect(plain.processing == .notProcessed)
        #expect(plain.isRetryable)
    }
}
