import LiveRelayMessages
import LiveRelayService
import LiveRelayTestSupport
import LiveRelayWire
import NIOCore
import Testing

@testable import LiveRelayServer

/// The counting alone: no channel, no socket.
@Suite("ConnectionLimiter")
struct ConnectionLimiterTests {
    @Test func theGlobalLimitRefusesOnceFullAndAdmitsAgainAfterARelease() {
        let limiter = ConnectionLimiter(maxConnections: 2, maxConnectionsPerKey: 10)
        #expect(limiter.acquireConnection())
        #expect(limiter.acquireConnection())
        #expect(!limiter.acquireConnection())
        #expect(limiter.connections == 2, "a refused connection takes no slot")
        limiter.releaseConnection()
        #expect(limiter.connections == 1)
        #expect(limiter.acquireConnection())
        #expect(!limiter.acquireConnection())
    }

    @Test func aKeyAtItsLimitIsRefusedWithTheCountsAndTheReasonNamesOnlyTheKeyID() {
        let limiter = ConnectionLimiter(maxConnections: 100, maxConnectionsPerKey: 2)
        #expect(limiter.acquire(keyID: "keya") == .admitted)
        #expect(limiter.acquire(keyID: "keya") == .admitted)
        #expect(limiter.acquire(keyID: "keya") == .refused(open: 2, limit: 2))
        #expect(limiter.connections(keyID: "keya") == 2, "a refused connection is not counted")
        #expect(
            ConnectionLimiter.refusalReason(keyID: "keya", open: 2, limit: 2) == "API key keya has 2 connections, the limit is 2")
        #expect(ConnectionLimiter.refusalReason(keyID: "keya", open: 1, limit: 1) == "API key keya has 1 connection, the limit is 1")
    }

    @Test func keysAreCountedIndependently() {
        let limiter = ConnectionLimiter(maxConnections: 100, maxConnectionsPerKey: 1)
        #expect(limiter.acquire(keyID: "keya") == .admitted)
        #expect(limiter.acquire(keyID: "keya") == .refused(open: 1, limit: 1))
        #expect(limiter.acquire(keyID: "keyb") == .admitted, "another key's connections do not count against this one")

        limiter.release(keyID: "keya")
        #expect(limiter.connections(keyID: "keya") == 0)
        #expect(limiter.connections(keyID: "keyb") == 1, "releasing one key leaves the other's count alone")
        #expect(limiter.acquire(keyID: "keya") == .admitted)
        #expect(limiter.acquire(keyID: "keyb") == .refused(open: 1, limit: 1))
    }

    @Test func limitsBelowOneCountAsOne() {
        let limiter = ConnectionLimiter(maxConnections: 0, maxConnectionsPerKey: -5)
        #expect(limiter.acquireConnection())
        #expect(!limiter.acquireConnection())
        #expect(limiter.acquire(keyID: "keya") == .admitted)
        #expect(limiter.acquire(keyID: "keya") == .refused(open: 1, limit: 1))
    }

    @Test func concurrentConnectionsNeverPassTheLimits() async {
        let limiter = ConnectionLimiter(maxConnections: 25, maxConnectionsPerKey: 10)
        let (connections, keyed) = await withTaskGroup(of: (Bool, Bool).self) { group in
            for _ in 0..<200 {
                group.addTask { (limiter.acquireConnection(), limiter.acquire(keyID: "keya") == .admitted) }
            }
            var counts = (0, 0)
            for await (connection, key) in group {
                if connection { counts.0 += 1 }
                if key { counts.1 += 1 }
            }
            return counts
        }
        #expect(connections == 25)
        #expect(keyed == 10)
        #expect(limiter.connections == 25 && limiter.connections(keyID: "keya") == 10)
    }
}

/// The handler's part: counting a connection against its key once the key is
/// accepted, refusing over the limit, and giving the slot back on every close.
@Suite("Per-key connection limit in an EmbeddedChannel")
struct ConnectionLimitHandlerTests {
    static let keyID = TestKeys.all.record.keyID

    @Test func aKeyAtItsLimitGetsGoAwayTooManyConnectionsAndNothingRuns() throws {
        let limiter = ConnectionLimiter(maxConnections: 100, maxConnectionsPerKey: 1)
        let service = ManualService()
        let first = try EmbeddedConnection(service: service, limiter: limiter)
        defer { try? first.finish(service) }
        guard case .welcome = try first.hello().first else { Issue.record("the first connection must be welcomed"); return }
        #expect(limiter.connections(keyID: Self.keyID) == 1)

        let second = try EmbeddedConnection(service: service, limiter: limiter)
        defer { try? second.finish(service) }
        let frames = try second.hello(then: [ping(1)])
        let reason = "API key \(Self.keyID) has 1 connection, the limit is 1"
        #expect(frames == [.goAway(Frame.GoAway(lastRequestID: 0, code: .tooManyConnections, reason: reason))])
        #expect(!second.channel.isActive)
        #expect(service.calls.isEmpty, "a request pipelined behind a refused HELLO must not run")
        #expect(limiter.connections(keyID: Self.keyID) == 1, "the refused connection's close must not free the slot it never had")

        // The first connection is unharmed.
        try first.send([ping(1)])
        #expect(service.dispatchedIDs == [1])
    }

    @Test func theSlotComesBackWhenThePeerCloses() throws {
        let limiter = ConnectionLimiter(maxConnections: 100, maxConnectionsPerKey: 1)
        let service = ManualService()
        let first = try EmbeddedConnection(service: service, limiter: limiter)
        _ = try first.hello()
        try first.send([ping(1)])
        #expect(limiter.connections(keyID: Self.keyID) == 1)

        try first.finish(service)
        #expect(limiter.connections(keyID: Self.keyID) == 0)

        let next = try EmbeddedConnection(service: service, limiter: limiter)
        defer { try? next.finish(service) }
        guard case .welcome = try next.hello().first else { Issue.record("the freed slot must admit a new connection"); return }
    }

    @Test func theSlotComesBackWhenTheServerCloses() throws {
        let limiter = ConnectionLimiter(maxConnections: 100, maxConnectionsPerKey: 1)
        let service = ManualService()
        let settings = ServerSettings(idleTimeoutMilliseconds: 1_000)
        let connection = try EmbeddedConnection(service: service, settings: settings, limiter: limiter)
        defer { try? connection.finish(service) }
        _ = try connection.hello()
        #expect(limiter.connections(keyID: Self.keyID) == 1)

        connection.loop.advanceTime(by: .seconds(1))
        _ = expectGoAway(try #require(try connection.writtenFrames().first), code: .idleTimeout)
        #expect(!connection.channel.isActive)
        #expect(limiter.connections(keyID: Self.keyID) == 0)
    }

    @Test func aRefusedKeyTakesNoSlot() throws {
        let limiter = ConnectionLimiter(maxConnections: 100, maxConnectionsPerKey: 1)
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service, limiter: limiter)
        defer { try? connection.finish(service) }
        let unknownKey = "lrk_aaaaaaaaaaaa_" + String(repeating: "f", count: 64)
        _ = expectGoAway(try #require(try connection.hello(apiKey: unknownKey).first), code: .unauthenticated)
        #expect(limiter.connections(keyID: "aaaaaaaaaaaa") == 0)
        #expect(limiter.connections(keyID: Self.keyID) == 0)
    }
}

/// Both limits through a real listener, TLS and sockets.
@Suite("Connection limits over TLS", .timeLimit(.minutes(1)))
struct ConnectionLimitSocketTests {
    @Test func aThirdConnectionOfAKeyIsRefusedWhileOthersWorkAndAClosedOneMakesRoom() async throws {
        let server = try await TestServer.start(maxConnectionsPerKey: 2)
        let keyID = TestKeys.all.record.keyID
        let first = try await server.connectAndHello()
        let second = try await server.connectAndHello()

        let third = try await server.connect()
        let goAway = try #require(expectGoAway(try await third.hello(apiKey: TestKeys.all.plaintext), code: .tooManyConnections))
        #expect(goAway.lastRequestID == 0)
        #expect(goAway.reason == "API key \(keyID) has 2 connections, the limit is 2")
        let secret = String(TestKeys.all.plaintext.split(separator: "_").last!)
        #expect(!goAway.reason.contains(secret), "the reason must never carry the key's secret")
        try await third.waitForClose()

        // The first two still work, and another key is not affected.
        for client in [first, second] {
            try await client.send([ping(1)])
            _ = expectResponse(try await client.nextFrame(), id: 1)
        }
        let other = try await server.connectAndHello(apiKey: TestKeys.pingOnly.plaintext)
        try await other.send([ping(1)])
        _ = expectResponse(try await other.nextFrame(), id: 1)

        // Closing one gives its slot back; the server notices the close on its own loop.
        await first.close()
        try await eventually("the closed connection's slot to come back") {
            server.server.limiter.connections(keyID: keyID) == 1
        }
        let fourth = try await server.connectAndHello()
        try await fourth.send([ping(1)])
        _ = expectResponse(try await fourth.nextFrame(), id: 1)

        for client in [second, other, fourth] { await client.close() }
        try await server.shutdown()
    }

    @Test func aConnectionOverTheGlobalLimitIsClosedBeforeTLSAndAClosedOneMakesRoom() async throws {
        // A long HELLO timeout: a connection the server accepted would stay open for a
        // minute, so one closed within seconds was refused at accept.
        let server = try await TestServer.start(helloTimeout: .seconds(60), maxConnections: 2)
        let first = try await server.connectAndHello()
        let second = try await server.connectAndHello(apiKey: TestKeys.pingOnly.plaintext)

        // Plain TCP that sends nothing: only a refusal at accept closes it before the
        // HELLO timeout, and nothing at all is sent to it (no TLS, no GOAWAY).
        let refused = try await server.connect(tls: false)
        #expect(try await refused.waitForClose(timeout: .seconds(5)) == [])
        #expect(server.server.limiter.connections == 2)

        await second.close()
        try await eventually("the closed connection's slot to come back") { server.server.limiter.connections == 1 }
        let third = try await server.connectAndHello()
        try await third.send([ping(1)])
        _ = expectResponse(try await third.nextFrame(), id: 1)

        for client in [first, third] { await client.close() }
        try await server.shutdown()
    }
}
