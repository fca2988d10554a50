import LiveRelayClient
import LiveRelayMessages
import LiveRelayServer
import LiveRelayTLS
import LiveRelayTestSupport
import LiveRelayWire
import NIOCore
import Testing

@testable import LiveRelayClient

#if canImport(Glibc)
import Glibc
#endif

/// Connections coming and going: GOAWAY, restarts, drops, TLS failures.
@Suite(.timeLimit(.minutes(1))) struct ClientConnectionTests {
    /// Requests that crossed the GOAWAY (ids above last_request_id) are resent
    /// on a new connection; those at or below it are answered on the old one.
    @Test func goAwayRetriesCallsAboveLastIDOnANewConnection() async throws {
        let server = ScriptedServer(scripts: [.goAwayAfter(requests: 4, lastID: 2), .echo])
        try await server.start()
        let client = makeClient(port: server.port, tls: nil, connections: 1)
        let futures = (1...4).map { i in client.call(.ping, payload: ByteBuffer(message: PingRequest(payload: [UInt8(i)]))) }
        for (i, future) in futures.enumerated() {
            let reply = try PingReply(serializedBytes: try await future.get())
            #expect(reply.payload == [UInt8(i + 1)])
        }
        let answered = server.answered.map { ($0.connection, $0.payload) }
        let encoded = { (i: UInt8) in PingRequest(payload: [i]).serializedBytes() }
        #expect(answered.filter { $0.0 == 1 }.map(\.1) == [encoded(1), encoded(2)])
        #expect(answered.filter { $0.0 == 2 }.map(\.1).sorted { $0.lexicographicallyPrecedes($1) } == [encoded(3), encoded(4)])
        #expect(client.pool.connectionsCreated == 2)
        await client.shutdown()
        await server.stop()
    }

    /// ERROR UNAVAILABLE promises the call was not processed: resent, whether idempotent or not.
    @Test func unavailableRepliesAreRetriedOnANewConnection() async throws {
        let server = ScriptedServer(scripts: [.refuseAbove(requests: 3, answerUpTo: 1), .echo])
        try await server.start()
        let client = makeClient(port: server.port, tls: nil, connections: 1)
        let futures = (1...3).map { i in client.call(.ping, payload: ByteBuffer(message: PingRequest(payload: [UInt8(i)]))) }
        for (i, future) in futures.enumerated() {
            #expect(try PingReply(serializedBytes: try await future.get()).payload == [UInt8(i + 1)])
        }
        #expect(server.answered.map(\.connection) == [1, 2, 2])
        await client.shutdown()
        await server.stop()
    }

    /// A connection that breaks with calls outstanding: their outcome is unknown,
    /// so only idempotent calls are resent, and only when the caller opted in.
    @Test func connectionLossRetriesOnlyIdempotentCallsWhenAllowed() async throws {
        for optIn in [false, true] {
            let server = ScriptedServer(scripts: [.dropAfter(requests: 2), .echo])
            try await server.start()
            let client = makeClient(port: server.port, tls: nil, retryPolicy: .init(maxAttempts: 3, retryIdempotentCalls: optIn))
            let idempotent = client.call(.ping, payload: ByteBuffer(message: PingRequest(payload: [1])), idempotent: true)
            let plain = client.call(.ping, payload: ByteBuffer(message: PingRequest(payload: [2])), idempotent: false)
            do {
                _ = try await plain.get()
                Issue.record("a non-idempotent call must not be resent")
            } catch let error as LiveRelayClientError {
                #expect(error.status == .unavailable)
                #expect(error.processing == .mayHaveBeenProcessed)
                #expect(!error.isRetryable && error.isRetryableIfIdempotent)
            }
            if optIn {
                let reply = try PingReply(serializedBytes: try await idempotent.get())
                #expect(reply.payload == [1])
                #expect(server.answered.map(\.connection) == [2])
            } else {
                await #expect(throws: LiveRelayClientError.self) { try await idempotent.get() }
                #expect(server.answered.isEmpty)
            }
            await client.shutdown()
            await server.stop()
        }
    }

    /// The real server's graceful shutdown: the call in flight completes; the
    /// client reconnects once a server is back on the port.
    @Test func gracefulShutdownDrainsThenClientReconnectsAfterRestart() async throws {
        let service = TestService()
        let first = try await TestServer.start(service: service)
        let port = first.port
        let client = makeClient(port: port)
        _ = try await client.ping()
        let inFlight = Task { try await client.ping(PingRequest(payload: Array("hold-1".utf8))) }
        try await eventually("the call to reach the service") { service.held.count == 1 }

        await first.beginShutdown()
        // The GOAWAY makes the pool replace the connection (and fail to, while nothing listens).
        try await eventually("the client to act on GOAWAY") { client.pool.connectionsCreated >= 2 }
        service.releaseAll()
        let drained = try await inFlight.value
        #expect(drained.payload == Array("hold-1".utf8))
        #expect(drained.serverVersion == "released")
        try await withTimeout(.seconds(20)) { try await first.runTask.value }

        let second = try await TestServer.start(service: service, port: port)
        let reply = try await client.ping(PingRequest(payload: [42]))
        #expect(reply.payload == [42])
        await client.shutdown()
        try await second.shutdown()
    }

    @Test func serverRestartReconnects() async throws {
        let first = try await TestServer.start()
        let port = first.port
        let client = makeClient(port: port, connections: 2)
        _ = try await client.ping()
        try await first.shutdown()
        let second = try await TestServer.start(port: port)
        for i in 0..<10 {
            let reply = try await client.ping(PingRequest(payload: [UInt8(i)]))
            #expect(reply.payload == [UInt8(i)])
        }
        await client.shutdown()
        try await second.shutdown()
    }

    @Test func untrustedCertificateGivesAClearError() async throws {
        let server = try await TestServer.start()
        let other = try SelfSignedCertificate.generate(commonName: "someone-else")
        let tls = LiveRelayClient.TLS.trusting(caPEM: other.certificatePEM)
        let client = makeClient(port: server.port, tls: tls)
        do {
            _ = try await client.ping()
            Issue.record("expected a TLS failure")
        } catch {
            #expect(error.status == .unavailable)
            #expect(error.processing == .notProcessed)
            #expect(error.message.contains("cannot connect to 127.0.0.1:\(server.port)"))
            #expect(error.message.contains("certificate verify failed"))
        }
        await client.shutdown()
        try await server.shutdown()
    }

    @Test func missingCAFileGivesAClearError() async throws {
        let client = makeClient(port: 1, tls: .trusting(caFile: "/nonexistent/cert.pem"))
        do {
            _ = try await client.ping()
            Issue.record("expected a configuration failure")
        } catch {
            #expect(error.message.contains("/nonexistent/cert.pem"))
        }
        #expect(client.pool.connectionsCreated == 0)
        await client.shutdown()
    }

    @Test func nothingListeningFailsFast() async throws {
        // A port bound but not listening, held for the whole test: a stopped server's
        // port could be taken by another test's listener meanwhile (tests run in parallel).
        let reserved = try ReservedPort()
        defer { reserved.release() }
        let port = reserved.port
        let client = makeClient(port: port, tls: nil)
        // Fast means not waiting for the call's 10 s deadline, which would end in
        // DEADLINE_EXCEEDED: the status says it, with no clock in the test.
        do {
            _ = try await client.ping()
            Issue.record("expected UNAVAILABLE")
        } catch {
            #expect(error.status == .unavailable)
            #expect(error.message.contains("cannot connect to 127.0.0.1:\(port)"))
            #expect(error.isRetryable)
        }
        await client.shutdown()
    }

    @Test func callsAfterShutdownFail() async throws {
        let server = try await TestServer.start()
        let client = makeClient(port: server.port)
        _ = try await client.ping()
        await client.shutdown()
        do {
            _ = try await client.ping()
            Issue.record("expected UNAVAILABLE")
        } catch {
            #expect(error.status == .unavailable)
        }
        try await server.shutdown()
    }
}

/// A loopback TCP port bound without listening: connecting to it is refused, and no
/// other socket can take it until ``release()``.
struct ReservedPort {
    let descriptor: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXFailure(call: "socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        let named =
            bound == 0
            ? withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            } : -1
        guard named == 0 else {
            close(fd)
            throw POSIXFailure(call: bound == 0 ? "getsockname" : "bind")
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func release() { close(descriptor) }

    struct POSIXFailure: Error {
        var call: String
    }
}
