import LiveRelayMessages
import LiveRelayServer
import LiveRelayService
import LiveRelayTestSupport
import LiveRelayWire
import NIOCore
import NIOPosix
import Testing

@Suite("RPC server over TLS", .timeLimit(.minutes(1)))
struct RPCTests {
    @Test func helloIsAnsweredWithWelcomeAndTheServerSettings() async throws {
        let settings = ServerSettings(maxRequestsInFlight: 7, idleTimeoutMilliseconds: 60_000)
        try await withServer(settings: settings) { server in
            let client = try await server.connect()
            let first = try await client.hello(apiKey: TestKeys.all.plaintext)
            #expect(first == .welcome(Frame.Welcome(version: 1, settings: settings.settings)))
            await client.close()
        }
    }

    @Test func plaintextServesTheSameProtocol() async throws {
        try await withServer(tls: false) { server in
            let client = try await server.connectAndHello(tls: false)
            try await client.send([ping(1)])
            let payload = try #require(expectResponse(try await client.nextFrame(), id: 1))
            #expect(try PingReply(serializedBytes: payload).payload == Array("hi".utf8))
            await client.close()
        }
    }

    @Test func everyRPCReachesTheService() async throws {
        try await withServer { server in
            let client = try await server.connectAndHello()
            try await client.send([
                request(1, .registerToken, Fixtures.register),
                request(2, .startActivity, Fixtures.start),
                request(3, .updateActivity, Fixtures.update),
                request(4, .endActivity, Fixtures.end),
                ping(5, [1, 2, 3]),
            ])
            let frames = try await client.nextFrames(5)
            for (index, frame) in frames.enumerated() {
                _ = expectResponse(frame, id: RequestID(UInt32(index + 1)))
            }
            let pingReply = try PingReply(serializedBytes: try #require(expectResponse(frames[4], id: 5)))
            #expect(pingReply.payload == [1, 2, 3])
            await client.close()
        }
    }

    @Test func thousandPipelinedRequestsAreAnsweredOutOfOrder() async throws {
        let count = 1000
        let service = HoldingService(releaseInReverseAt: count)
        let settings = ServerSettings(maxRequestsInFlight: UInt32(count), idleTimeoutMilliseconds: 300_000)
        try await withServer(service: service, settings: settings) { server in
            let client = try await server.connectAndHello()
            let frames = (1...count).map { ping(RequestID(UInt32($0)), withUnsafeBytes(of: UInt32($0).bigEndian, Array.init)) }
            try await client.send(frames)
            let replies = try await client.nextFrames(count)
            let ids = replies.map(\.requestID.rawValue)
            #expect(ids == Array((1...UInt32(count)).reversed()), "the service completed in reverse order")
            for reply in replies {
                let payload = try #require(expectResponse(reply, id: reply.requestID))
                #expect(
                    try PingReply(serializedBytes: payload).payload == withUnsafeBytes(of: reply.requestID.rawValue.bigEndian, Array.init))
            }
            #expect(service.dispatched.count == count)
            await client.close()
        }
    }

    @Test func unknownAPIKeyGetsGoAwayUnauthenticatedAndNothingRuns() async throws {
        let service = HoldingService()
        try await withServer(service: service) { server in
            let forged = "lrk_" + TestKeys.all.record.keyID + "_" + String(repeating: "0", count: 64)
            for key in [forged, "lrk_aaaaaaaaaaaa_" + String(repeating: "f", count: 64), "not a key"] {
                let client = try await server.connect()
                // A 0-RTT request behind the HELLO must not run when the key is refused.
                let first = try await client.hello(apiKey: key, then: [ping(1)])
                let goAway = try #require(expectGoAway(first, code: .unauthenticated))
                #expect(goAway.reason == "invalid API key")
                #expect(goAway.lastRequestID == 0)
                #expect(!goAway.reason.contains(key))
                let rest = try await client.waitForClose()
                #expect(rest.isEmpty, "no answer to the pipelined request: \(rest)")
            }
            #expect(service.dispatched.isEmpty)
        }
    }

    @Test func methodTheKeyMayNotCallIsPermissionDeniedAndTheConnectionCarriesOn() async throws {
        try await withServer { server in
            let client = try await server.connectAndHello(apiKey: TestKeys.pingOnly.plaintext)
            try await client.send([request(1, .startActivity, Fixtures.start)])
            let error = try #require(expectError(try await client.nextFrame(), id: 1, status: .permissionDenied))
            #expect(error.message.contains("StartActivity"))
            #expect(error.message.contains(TestKeys.pingOnly.record.keyID))
            try await client.send([ping(2)])
            _ = expectResponse(try await client.nextFrame(), id: 2)
            await client.close()
        }
    }

    @Test func invalidRequestIsInvalidArgumentNamingTheField() async throws {
        try await withServer { server in
            let client = try await server.connectAndHello()
            var bad = Fixtures.register
            bad.token = "NOT-HEX"
            var garbage = ByteBuffer(bytes: [0xFF, 0xFF, 0xFF])
            try await client.send([
                request(1, .registerToken, bad),
                .request(2, Frame.Request(method: LiveRelayMethod.startActivity.rawValue, payload: garbage)),
                ping(3),
            ])
            let first = try #require(expectError(try await client.nextFrame(), id: 1, status: .invalidArgument))
            let details = try ErrorDetails(serializedBytes: first.details)
            #expect(details.fieldViolations.map(\.field) == ["token"])
            #expect(details.reason == "InvalidField")
            #expect(first.message.contains("token"))
            let undecodable = try #require(expectError(try await client.nextFrame(), id: 2, status: .invalidArgument))
            #expect(try ErrorDetails(serializedBytes: undecodable.details).reason == "InvalidField")
            _ = expectResponse(try await client.nextFrame(), id: 3)
            garbage.clear()
            await client.close()
        }
    }

    @Test func unknownMethodIsUnimplemented() async throws {
        try await withServer { server in
            let client = try await server.connectAndHello()
            try await client.send([
                .request(1, Frame.Request(method: "/liverelay.v1.LiveRelay/Teleport", payload: ByteBuffer())),
                ping(2),
            ])
            let error = try #require(expectError(try await client.nextFrame(), id: 1, status: .unimplemented))
            #expect(error.message.contains("/liverelay.v1.LiveRelay/Teleport"))
            _ = expectResponse(try await client.nextFrame(), id: 2)
            await client.close()
        }
    }

    @Test func serviceErrorsReachTheClientAndOtherErrorsBecomeInternal() async throws {
        let otherLoop = MultiThreadedEventLoopGroup.singleton.any()
        try await withServer(service: FailingService(otherLoop: otherLoop)) { server in
            let client = try await server.connectAndHello()
            try await client.send([
                request(1, .registerToken, Fixtures.register),
                request(2, .startActivity, Fixtures.start),
                request(3, .endActivity, Fixtures.end),
                ping(4),
            ])
            var byID: [UInt32: Frame] = [:]
            for frame in try await client.nextFrames(4) { byID[frame.requestID.rawValue] = frame }
            #expect(byID.count == 4)
            let internalError = try #require(expectError(byID[1] ?? .cancel(1), id: 1, status: .internal))
            #expect(internalError.message == "internal error")
            #expect(!internalError.message.contains("hunter2"))
            let notFound = try #require(expectError(byID[2] ?? .cancel(2), id: 2, status: .notFound))
            #expect(notFound.message == "no such app")
            #expect(try ErrorDetails(serializedBytes: notFound.details).reason == "UnknownApp")
            _ = expectError(byID[3] ?? .cancel(3), id: 3, status: .failedPrecondition)
            let payload = try #require(expectResponse(byID[4] ?? .cancel(4), id: 4))
            #expect(try PingReply(serializedBytes: payload).serverVersion == "other-loop")
            await client.close()
        }
    }

    @Test func deadlineIsDeadlineExceededAndTheServiceSeesTheCancellation() async throws {
        let service = HoldingService()
        try await withServer(service: service) { server in
            let client = try await server.connectAndHello()
            try await client.send([ping(1, timeoutMs: 100)])
            let error = try #require(expectError(try await client.nextFrame(), id: 1, status: .deadlineExceeded))
            #expect(error.message.contains("100 ms"))
            let call = try #require(service.dispatched.first)
            #expect(call.deadline != nil)
            #expect(call.cancellation.isCancelled, "the flag is set before the reply is flushed")
            // The late result is dropped: the next frame is the answer to request 2.
            service.releaseAll()
            try await client.send([request(2, .registerToken, Fixtures.register)])
            _ = expectResponse(try await client.nextFrame(), id: 2)
            await client.close()
        }
    }

    @Test func clientCancelIsCancelledAndTheLateResultIsDropped() async throws {
        let service = HoldingService()
        try await withServer(service: service) { server in
            let client = try await server.connectAndHello()
            try await client.send([ping(1)])
            try await eventually("the call to reach the service") { service.heldCount == 1 }
            try await client.send([.cancel(1)])
            _ = expectError(try await client.nextFrame(), id: 1, status: .cancelled)
            #expect(service.dispatched[0].cancellation.isCancelled)
            service.releaseAll()
            try await client.send([request(2, .registerToken, Fixtures.register)])
            _ = expectResponse(try await client.nextFrame(), id: 2)
            await client.close()
        }
    }

    @Test func pingIsAnsweredWithPong() async throws {
        try await withServer { server in
            let client = try await server.connectAndHello()
            try await client.send([.ping(0x0102_0304_0506_0708)])
            #expect(try await client.nextFrame() == .pong(0x0102_0304_0506_0708))
            await client.close()
        }
    }

    @Test func idleConnectionGetsGoAwayIdleTimeout() async throws {
        try await withServer(settings: ServerSettings(idleTimeoutMilliseconds: 200)) { server in
            let client = try await server.connect()
            // Pipelined behind HELLO, so the idle clock starts when its reply goes out, not at a moment this test picks.
            #expect(try await client.hello(apiKey: TestKeys.all.plaintext, then: [ping(1)]).type == .welcome)
            _ = expectResponse(try await client.nextFrame(), id: 1)
            let goAway = try #require(expectGoAway(try await client.nextFrame(), code: .idleTimeout))
            #expect(goAway.lastRequestID == 1)
            try await client.waitForClose()
        }
    }

    @Test func malformedFrameEndsOnlyItsConnectionAndAcceptedWorkIsStillAnswered() async throws {
        let service = HoldingService()
        try await withServer(service: service) { server in
            let bad = try await server.connectAndHello()
            let good = try await server.connectAndHello()
            try await bad.send([ping(1)])
            try await eventually("the call to reach the service") { service.heldCount == 1 }
            // A header with frame type 0x7F.
            try await bad.write(ByteBuffer(bytes: [0, 0, 0, 0, 0x7F, 0, 0, 0, 0, 0]))
            let goAway = try #require(expectGoAway(try await bad.nextFrame(), code: .protocolError))
            #expect(goAway.reason == "unknown frame type 0x7F")
            #expect(goAway.lastRequestID == 1)

            try await good.send([request(1, .registerToken, Fixtures.register)])
            _ = expectResponse(try await good.nextFrame(), id: 1)

            service.releaseAll()
            _ = expectResponse(try await bad.nextFrame(), id: 1)
            try await bad.waitForClose()
            #expect(!good.isClosed)
            await good.close()
        }
    }

    @Test func silentClientGetsGoAwayHelloTimeout() async throws {
        // Plaintext: over TLS a GOAWAY due before the handshake has finished is
        // dropped with the connection, and whether it is depends on this machine's speed.
        let server = try await TestServer.start(tls: false, helloTimeout: .milliseconds(200))
        let client = try await server.connect(tls: false)
        // The preface and HELLO never come.
        let goAway = try #require(expectGoAway(try await client.nextFrame(), code: .helloTimeout))
        #expect(goAway.lastRequestID == 0)
        try await client.waitForClose()
        try await server.shutdown()
    }

    @Test func badPrefaceIsProtocolErrorBeforeAnythingElse() async throws {
        try await withServer { server in
            let client = try await server.connect()
            try await client.write(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
            let goAway = try #require(expectGoAway(try await client.nextFrame(), code: .protocolError))
            #expect(goAway.reason.hasPrefix("bad connection preface"))
            try await client.waitForClose()
        }
    }
}
