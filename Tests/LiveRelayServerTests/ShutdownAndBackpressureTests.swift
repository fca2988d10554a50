import LiveRelayMessages
import LiveRelayServer
import LiveRelayTestSupport
import LiveRelayWire
import NIOCore
import Testing

@Suite("Graceful shutdown and backpressure", .timeLimit(.minutes(1)))
struct ShutdownAndBackpressureTests {
    @Test func gracefulShutdownFinishesInFlightCallsAndRefusesLaterOnes() async throws {
        let service = HoldingService()
        let server = try await TestServer.start(service: service)
        let busy = try await server.connectAndHello()
        let idle = try await server.connectAndHello()
        try await busy.send([ping(1), ping(2), ping(3)])
        try await eventually("three calls in flight") { service.heldCount == 3 }

        await server.group.triggerGracefulShutdown()

        let goAway = try #require(expectGoAway(try await busy.nextFrame(), code: .noError))
        #expect(goAway.lastRequestID == 3)
        // A connection with nothing in flight is told and closed at once.
        let idleGoAway = try #require(expectGoAway(try await idle.nextFrame(), code: .noError))
        #expect(idleGoAway.lastRequestID == 0)
        try await idle.waitForClose()
        // The listener is closed before any GOAWAY goes out.
        await #expect(throws: (any Error).self) { _ = try await server.connect() }

        // A request that crossed the GOAWAY is refused unprocessed; PING still works.
        try await busy.send([ping(4), .ping(42)])
        let refused = try #require(expectError(try await busy.nextFrame(), id: 4, status: .unavailable))
        #expect(refused.message == "server is going away")
        #expect(try await busy.nextFrame() == .pong(42))
        #expect(service.dispatched.count == 3)
        #expect(!busy.isClosed)

        service.releaseAll()
        let replies = try await busy.nextFrames(3)
        #expect(Set(replies.map(\.requestID)) == [1, 2, 3])
        for reply in replies { _ = expectResponse(reply, id: reply.requestID) }
        try await busy.waitForClose()
        try await server.waitUntilStopped()
    }

    @Test func drainTimeBoundsShutdown() async throws {
        let service = HoldingService()
        let server = try await TestServer.start(service: service, maxDrainTime: .milliseconds(300))
        let client = try await server.connectAndHello()
        try await client.send([ping(1)])
        try await eventually("the call in flight") { service.heldCount == 1 }
        await server.group.triggerGracefulShutdown()
        _ = expectGoAway(try await client.nextFrame(), code: .noError)
        // The call never finishes; the server closes the connection anyway and stops.
        try await client.waitForClose()
        try await server.waitUntilStopped()
        #expect(service.dispatched[0].cancellation.isCancelled, "the connection's close stops the work")
        service.releaseAll()
    }

    @Test func cancellingRunClosesEverythingWithoutDraining() async throws {
        let service = HoldingService()
        let server = try await TestServer.start(service: service)
        let client = try await server.connectAndHello()
        try await client.send([ping(1)])
        try await eventually("the call in flight") { service.heldCount == 1 }
        server.runTask.cancel()
        try await client.waitForClose()
        // Cancellation may surface as an error from the group; only the return matters.
        try await withTimeout(.seconds(20)) { _ = await server.runTask.result }
        service.releaseAll()
    }

    /// With MAX_REQUESTS_IN_FLIGHT = 4 and calls held, the server must stop
    /// reading: the client's bytes pile up in TCP buffers (its channel turns
    /// unwritable and its write does not complete), the service never sees a
    /// fifth call, and nobody gets RESOURCE_EXHAUSTED. Once released, every
    /// request is served.
    @Test func fullConnectionStopsReadingUntilCallsComplete() async throws {
        let limit = 4
        let count = 96
        let payloadSize = 256 * 1024  // 24 MiB in all: far beyond what loopback TCP buffers hold
        let service = HoldingService()
        let settings = ServerSettings(maxRequestsInFlight: UInt32(limit), idleTimeoutMilliseconds: 300_000)
        try await withServer(service: service, settings: settings) { server in
            let client = try await server.connectAndHello()
            let frames = (1...count).map { ping(RequestID(UInt32($0)), [UInt8](repeating: UInt8($0 & 0xFF), count: payloadSize)) }
            let writePromise = client.channel.eventLoop.makePromise(of: Void.self)
            client.channel.writeAndFlush(RawClient.encode(frames), promise: writePromise)
            let written = writePromise.futureResult

            try await eventually("\(limit) calls held") { service.heldCount == limit }
            try await eventually("the client's writes to back up") { !client.channel.isWritable }
            #expect(service.dispatched.count == limit)
            #expect(await !written.isFulfilled(), "the server is not reading, so the write cannot have completed")

            service.setAutoRelease()
            var statuses: [UInt32: StatusCode] = [:]
            for frame in try await client.nextFrames(count, timeout: .seconds(30)) {
                switch frame {
                case .response(let id, _): statuses[id.rawValue] = .ok
                case .error(let id, let error): statuses[id.rawValue] = error.status
                default: Issue.record("unexpected \(frame)")
                }
            }
            #expect(statuses.count == count)
            #expect(statuses.values.allSatisfy { $0 == .ok }, "no RESOURCE_EXHAUSTED: \(statuses.filter { $0.value != .ok })")
            #expect(service.maxHeld <= limit)
            try await written.get()
            await client.close()
        }
    }
}

extension EventLoopFuture where Value: Sendable {
    /// For assertions only: whether the future has a result yet.
    func isFulfilled() async -> Bool {
        (try? await self.eventLoop.submit { () -> Bool in
            var done = false
            self.assumeIsolated().whenComplete { _ in done = true }  // runs inline when already complete
            return done
        }.get()) ?? false
    }
}
