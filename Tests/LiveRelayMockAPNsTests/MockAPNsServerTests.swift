import Foundation
import LiveRelayAPNs
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

@testable import LiveRelayMockAPNs

/// The mock over real TLS + HTTP/2 on loopback, driven by `TestAPNsConnection`.
@Suite("MockAPNsServer over TLS and HTTP/2")
struct MockAPNsServerTests {
    static let group = MultiThreadedEventLoopGroup.singleton

    /// Starts a mock for Fixture's app, runs `body`, always shuts the mock down.
    func withMock<T>(
        _ configure: (inout MockAPNsConfiguration) -> Void = { _ in },
        _ body: (MockAPNsServer) async throws -> T
    ) async throws -> T {
        var configuration = MockAPNsConfiguration(apps: [Fixture.app])
        // Fixture's tokens are issued at its fixed "now"; the mock's clock stands still there.
        configuration.clock = MockAPNsClock { Fixture.nowMilliseconds }
        configure(&configuration)
        let server = try await MockAPNsServer.start(configuration: configuration, group: Self.group)
        do {
            let result = try await body(server)
            try await server.shutdown()
            return result
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    func connect(_ server: MockAPNsServer) async throws -> TestAPNsConnection {
        try await TestAPNsConnection.connect(port: server.port, certificatePEM: server.certificatePEM, group: Self.group)
    }

    func push(
        _ c: TestAPNsConnection, token: String = Fixture.token, headers: [(name: String, value: String)] = Fixture.headers(),
        body: String = Fixture.updateBody
    ) async throws -> TestResponse {
        try await c.send(path: "/3/device/" + token, headers: headers, body: Array(body.utf8))
    }

    @Test("a valid push gets 200 with its apns-id, and is recorded exactly")
    func validPush() async throws {
        try await withMock { server in
            let c = try await connect(server)
            let id = "11111111-2222-4333-8444-555555555555"
            let headers = Fixture.headers(extra: [("apns-id", id), ("apns-collapse-id", "ride-7")])
            let response = try await push(c, headers: headers, body: Fixture.startBody)
            #expect(response.status == 200)
            #expect(response.header("apns-id") == id)
            #expect(response.body.isEmpty)

            let records = server.received
            try #require(records.count == 1)
            let r = records[0]
            #expect(r.method == "POST" && r.path == "/3/device/" + Fixture.token && r.deviceToken == Fixture.token)
            #expect(r.headers.map(\.name) == headers.map(\.name))
            #expect(r.headers.map(\.value) == headers.map(\.value))
            #expect(r.bodyText == Fixture.startBody)
            #expect(r.status == 200 && r.reason == nil && r.apnsID == id)
            #expect(r.connection == 1 && r.streamID == 1)
            #expect(server.counters.responsesByStatus == [200: 1] && server.counters.connectionsAccepted == 1)

            let generated = try await push(c)
            #expect(generated.status == 200)
            #expect(generated.header("apns-id").map(MockAPNsValidator.isUUID) == true)
            #expect(server.received.map(\.streamID) == [1, 3])
            await c.close()
        }
    }

    @Test("every rejection of the validator table comes back over HTTP/2 with APNs's status and JSON body")
    func everyReason() async throws {
        try await withMock { server in
            let c = try await connect(server)
            let cases = MockAPNsValidatorTests.rejections.filter { $0.request.method != nil && $0.request.path != nil }
            for item in cases {
                let r = item.request
                let response = try await c.send(method: r.method!, path: r.path!, headers: r.headers, body: r.body)
                #expect(response.status == item.status, "\(item.name)")
                #expect(response.bodyText == "{\"reason\":\"\(item.reason)\"}", "\(item.name)")
                #expect(response.header("apns-id") != nil, "\(item.name)")
            }
            let records = server.received
            #expect(records.map(\.reason) == cases.map { Optional($0.reason) })
            #expect(records.map(\.status) == cases.map(\.status))
            #expect(records.map(\.streamID) == cases.indices.map { 1 + 2 * $0 })
            await c.close()
        }
    }

    @Test("a 410 token answers Unregistered with its timestamp; injected errors replace 200s")
    func unregisteredAndInjected() async throws {
        let dead = String(repeating: "cd", count: 32)
        try await withMock({
            $0.unregisteredTokens = [dead: 1_700_000_000_000]
            $0.injectedErrors = [MockAPNsInjectedError(reason: "TooManyRequests", rate: 1)]
        }) { server in
            let c = try await connect(server)
            let gone = try await push(c, token: dead)
            #expect(gone.status == 410)
            #expect(gone.bodyText == #"{"reason":"Unregistered","timestamp":1700000000000}"#)
            let throttled = try await push(c)
            #expect(throttled.status == 429 && throttled.bodyText == #"{"reason":"TooManyRequests"}"#)
            #expect(server.counters.responsesByStatus == [410: 1, 429: 1])
            await c.close()
        }
    }

    @Test("the injected clock ages the connection's token past an hour")
    func expiryUnderInjectedClock() async throws {
        let now = NIOLockedValueBox(Fixture.nowMilliseconds)
        try await withMock({ $0.clock = MockAPNsClock { now.withLockedValue { $0 } } }) { server in
            let c = try await connect(server)
            #expect(try await push(c).status == 200)
            now.withLockedValue { $0 += 3_601_000 }
            let expired = try await push(c)
            #expect(expired.status == 403 && expired.bodyText == #"{"reason":"ExpiredProviderToken"}"#)
            let fresh = Fixture.headers(authorization: "bearer " + Fixture.jwt(issuedAt: Fixture.nowSeconds + 3601))
            #expect(try await push(c, headers: fresh).status == 200)
            await c.close()
        }
    }

    @Test("GOAWAY after N streams names the N-th as last, then the connection closes")
    func goAwayAfterStreams() async throws {
        try await withMock({ $0.goAwayAfterStreams = 2 }) { server in
            let c = try await connect(server)
            #expect(try await push(c).status == 200)
            #expect(try await push(c).status == 200)
            try await c.channel.closeFuture.get()
            #expect(c.frames.goAways.map(\.lastStreamID) == [3])
            #expect(c.frames.goAways.first?.reason == #"{"reason":"Shutdown"}"#)
            #expect(server.counters.goAwaysSent == 1)

            let next = try await connect(server)
            #expect(try await push(next).status == 200)
            #expect(server.received.map(\.connection) == [1, 1, 2])
            await next.close()
        }
    }

    @Test("a drop after N streams closes the connection without GOAWAY and loses the stream in flight")
    func dropAfterStreams() async throws {
        try await withMock({ $0.dropConnectionAfterStreams = 1 }) { server in
            let c = try await connect(server)
            #expect(try await push(c).status == 200)
            await #expect(throws: (any Error).self) { try await push(c) }
            try await c.channel.closeFuture.get()
            #expect(c.frames.goAways.isEmpty)
            #expect(server.counters.connectionsDropped == 1)
            #expect(server.received.map(\.status) == [200, 0])
        }
    }

    @Test("SETTINGS_MAX_CONCURRENT_STREAMS is announced and honoured")
    func streamLimit() async throws {
        try await withMock({
            $0.maxConcurrentStreams = 2
            $0.latency = MockAPNsLatency(fixed: .milliseconds(50))
        }) { server in
            let c = try await connect(server)
            // A client may open streams before it has read the server's SETTINGS (HTTP/2 allows it):
            // one exchange first, so the limit is known when the burst starts.
            #expect(try await push(c).status == 200)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<6 { group.addTask { try await push(c).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 6))
            #expect(c.frames.maxConcurrentStreams.first == 2)
            #expect(server.counters.peakConcurrentStreams == 2)
            await c.close()
        }
    }

    @Test("like APNs, one stream until a valid provider token, then the configured limit")
    func streamLimitUntilAuthenticated() async throws {
        try await withMock({
            $0.limitStreamsUntilAuthenticated = true
            $0.maxConcurrentStreams = 500
        }) { server in
            let c = try await connect(server)
            #expect(try await push(c, headers: Fixture.headers(authorization: nil)).status == 403)
            #expect(c.frames.maxConcurrentStreams == [1])
            #expect(try await push(c).status == 200)
            #expect(c.frames.maxConcurrentStreams == [1, 500])
            await c.close()
        }
    }

    @Test("--record writes one JSON line per stream with the JWT signature redacted")
    func recordFile() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("mock-apns-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let jwt = Fixture.defaultJWT
        try await withMock({ $0.recordFile = path }) { server in
            let c = try await connect(server)
            #expect(try await push(c, headers: Fixture.headers(authorization: "bearer " + jwt)).status == 200)
            #expect(try await push(c, token: "zz").status == 400)
            await c.close()
        }
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        try #require(lines.count == 2)
        let signature = String(jwt.split(separator: ".").last!)
        #expect(!lines[0].contains(signature))
        let first = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any]
        #expect(first?["status"] as? Int == 200)
        #expect(first?["body"] as? String == Fixture.updateBody)
        let second = try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any]
        #expect(second?["reason"] as? String == "BadDeviceToken")
        // It holds device tokens: owner-only, whatever the umask was.
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("as a Service: graceful shutdown sends GOAWAY to open connections and stops listening")
    func service() async throws {
        var configuration = MockAPNsConfiguration(apps: [Fixture.app])
        configuration.clock = MockAPNsClock { Fixture.nowMilliseconds }
        configuration.recordingCapacity = 10
        let server = try await MockAPNsServer.start(configuration: configuration, group: Self.group)
        let c = try await connect(server)
        #expect(try await push(c).status == 200)
        let group = ServiceGroup(services: [server], logger: .init(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        try await c.channel.closeFuture.get()
        #expect(c.frames.goAways.map(\.lastStreamID) == [1])
        await #expect(throws: (any Error).self) {
            _ = try await TestAPNsConnection.connect(port: server.port, certificatePEM: server.certificatePEM, group: Self.group)
                .send(path: "/3/device/" + Fixture.token, headers: Fixture.headers(), body: Array(Fixture.updateBody.utf8))
        }
    }

    @Test("reset forgets records and counters")
    func reset() async throws {
        try await withMock { server in
            let c = try await connect(server)
            _ = try await push(c)
            server.reset()
            #expect(server.received.isEmpty && server.counters.streamsReceived == 0)
            _ = try await push(c)
            #expect(server.received.map(\.streamID) == [3])
            await c.close()
        }
    }
}
