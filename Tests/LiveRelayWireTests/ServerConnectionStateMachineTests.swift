import NIOCore
import Testing

@testable import LiveRelayWire

typealias Server = ServerConnectionStateMachine

let testHello = Frame.hello(
    Frame.Hello(apiKey: ByteBuffer(string: "lr_test_key"), clientName: "tests", settings: [Setting(.maxFrameSize, 1_048_576)])
)

func serverConfiguration(maxInFlight: UInt32 = 100, idleMs: UInt32 = 0) -> Server.Configuration {
    Server.Configuration(settings: ServerSettings(maxRequestsInFlight: maxInFlight, idleTimeoutMilliseconds: idleMs))
}

/// A server past HELLO and authentication at t(0).
func openServer(_ configuration: Server.Configuration = serverConfiguration()) -> Server {
    var server = Server(configuration: configuration, now: t(0))
    _ = server.receive(testHello, now: t(0))
    _ = server.authenticationSucceeded(now: t(0))
    return server
}

func dispatch(_ id: RequestID, timeoutMs: UInt32 = 0, at receipt: Int64 = 0, payload: [UInt8] = [0x0A, 0x01, 0x78]) -> Server.Action {
    .dispatch(
        Server.Dispatch(
            id: id,
            method: pingMethod,
            payload: buffer(payload),
            deadline: timeoutMs == 0 ? nil : t(receipt) + .milliseconds(Int64(timeoutMs))
        )
    )
}

@Suite struct ServerPrefaceTests {
    @Test func helloThenAuthenticationThenWelcome() {
        var server = Server(configuration: serverConfiguration(idleMs: 300_000), now: t(0))
        #expect(server.nextTimeout == t(10_000))
        #expect(
            server.receive(testHello, now: t(5))
                == [.authenticate(apiKey: ByteBuffer(string: "lr_test_key"), clientName: "tests", version: 1)]
        )
        #expect(server.nextTimeout == nil)
        let actions = server.authenticationSucceeded(now: t(6))
        #expect(
            actions == [.write(.welcome(Frame.Welcome(version: 1, settings: ServerSettings(idleTimeoutMilliseconds: 300_000).settings)))])
        #expect(
            writtenBytes(actions)
                == hex("00 00 00 14 02 00 00 00 00 00 | 00 01 | 00 01 00 10 00 00 | 00 02 00 00 00 64 | 00 03 00 04 93 E0")
        )
        #expect(server.receive(request(1), now: t(7)) == [dispatch(1)])
        #expect(server.respond(1, payload: buffer([0x0A, 0x01, 0x78]), now: t(8)) == [.write(.response(1, buffer([0x0A, 0x01, 0x78])))])
    }

    @Test func badPrefaceGetsGoAwayAndClose() {
        var decoder = Server.Configuration().makeFrameDecoder()
        var server = Server(now: t(0))
        decoder.append(buffer(Array("GET / HTTP/1.1\r\n".utf8)))
        var actions: [Server.Action] = []
        do {
            _ = try decoder.nextFrame()
        } catch {
            actions = server.receiveDecodingError(error, now: t(1))
        }
        let reason =
            "bad connection preface: expected 4C 52 50 43 0D 0A 1A 0A (LRPC\\r\\n\\x1a\\n), got 47 "
            + "(text: an HTTP request or a plaintext protocol?)"
        #expect(actions == [.write(goAwayFrame(0, .protocolError, reason)), .close])
        let reasonBytes = Array(reason.utf8)
        #expect(
            writtenBytes(actions)
                == hex("00 00 00") + [UInt8(10 + reasonBytes.count)] + hex("09 00 00 00 00 00 | 00 00 00 00 | 00 00 00 01 | 00")
                + [UInt8(reasonBytes.count)] + reasonBytes
        )
        #expect(server.isClosed)
    }

    @Test func unsupportedVersion() {
        var server = Server(now: t(0))
        let hello = Frame.hello(Frame.Hello(minVersion: 2, maxVersion: 3, apiKey: buffer("k"), clientName: ""))
        let actions = server.receive(hello, now: t(1))
        let reason = "client speaks versions 2...3, server speaks 1...1"
        #expect(actions == [.write(goAwayFrame(0, .unsupportedVersion, reason)), .close])
        #expect(writtenBytes(actions) == hex("00 00 00 3B 09 00 00 00 00 00 | 00 00 00 00 | 00 00 00 04 | 00 31") + Array(reason.utf8))
    }

    @Test func versionNegotiationPicksTheHighestCommon() {
        #expect(ProtocolVersion.negotiate(local: 1...1, peerMin: 1, peerMax: 5) == 1)
        #expect(ProtocolVersion.negotiate(local: 1...3, peerMin: 2, peerMax: 5) == 3)
        #expect(ProtocolVersion.negotiate(local: 2...3, peerMin: 1, peerMax: 1) == nil)
        #expect(ProtocolVersion.negotiate(local: 1...1, peerMin: 2, peerMax: 1) == nil)
        var server = Server(configuration: Server.Configuration(supportedVersions: 1...3), now: t(0))
        let hello = Frame.hello(Frame.Hello(minVersion: 1, maxVersion: 2, apiKey: buffer("k"), clientName: "c"))
        #expect(server.receive(hello, now: t(0)) == [.authenticate(apiKey: buffer("k"), clientName: "c", version: 2)])
    }

    @Test func firstFrameMustBeHello() {
        var server = Server(now: t(0))
        #expect(
            server.receive(request(1), now: t(0))
                == [.write(goAwayFrame(0, .protocolError, "expected HELLO as the first frame, got REQUEST")), .close]
        )
        #expect(server.receive(testHello, now: t(0)) == [])
    }

    @Test func invalidSettingInAHandBuiltHello() {
        var server = Server(now: t(0))
        let hello = Frame.hello(Frame.Hello(apiKey: buffer("k"), clientName: "", settings: [Setting(.maxFrameSize, 5)]))
        #expect(
            server.receive(hello, now: t(0))
                == [.write(goAwayFrame(0, .protocolError, "malformed HELLO frame: MAX_FRAME_SIZE 5 is outside 16384...16777215")), .close]
        )
    }

    /// Section 4: a setting only the server defines is ignored in a HELLO,
    /// even with a value that would be invalid from a server.
    @Test func serverOnlySettingsInAHelloAreIgnored() {
        var server = Server(configuration: serverConfiguration(maxInFlight: 2), now: t(0))
        let hello = Frame.hello(
            Frame.Hello(
                apiKey: buffer("k"), clientName: "",
                settings: [
                    Setting(.maxRequestsInFlight, 0), Setting(.idleTimeoutMilliseconds, 1), Setting(.maxFrameSize, 16_384),
                ]))
        #expect(server.receive(hello, now: t(0)) == [.authenticate(apiKey: buffer("k"), clientName: "", version: 1)])
        #expect(
            server.authenticationSucceeded(now: t(1))
                == [.write(.welcome(Frame.Welcome(version: 1, settings: ServerSettings(maxRequestsInFlight: 2).settings)))]
        )
        // The server's own limit of 2 holds (not the client's 0), and the client's MAX_FRAME_SIZE was taken.
        #expect(server.receive(request(1), now: t(2)) == [dispatch(1)])
        #expect(server.receive(request(2), now: t(2)) == [dispatch(2), .pauseReading])
        #expect(
            server.respond(1, payload: ByteBuffer(repeating: 7, count: 16_385), now: t(3))
                == [
                    .write(errorFrame(1, .resourceExhausted, "response of 16385 bytes exceeds the client's MAX_FRAME_SIZE of 16384")),
                    .resumeReading,
                ]
        )
    }

    @Test func authenticationFailed() {
        var server = Server(now: t(0))
        _ = server.receive(testHello, now: t(0))
        _ = server.receive(request(1), now: t(1))
        let actions = server.authenticationFailed(message: "unknown API key", now: t(2))
        #expect(actions == [.write(goAwayFrame(0, .unauthenticated, "unknown API key")), .close])
        #expect(
            writtenBytes(actions)
                == hex("00 00 00 19 09 00 00 00 00 00 | 00 00 00 00 | 00 00 00 05 | 00 0F") + Array("unknown API key".utf8)
        )
        // The pipelined request was never accepted, so it is never dispatched or answered.
        #expect(server.authenticationSucceeded(now: t(3)) == [])
        #expect(server.isClosed)
    }

    @Test func connectionLimitReachedIsGoAwayTooManyConnectionsAndNothingRuns() {
        var server = Server(now: t(0))
        _ = server.receive(testHello, now: t(0))
        _ = server.receive(request(1), now: t(1))
        let reason = "API key k has 2 connections, the limit is 2"
        let actions = server.connectionLimitReached(reason: reason, now: t(2))
        #expect(actions == [.write(goAwayFrame(0, .tooManyConnections, reason)), .close])
        #expect(
            writtenBytes(actions)
                == hex("00 00 00 35 09 00 00 00 00 00 | 00 00 00 00 | 00 00 00 09 | 00 2B") + Array(reason.utf8)
        )
        // Refused like a bad key: the pipelined request is never dispatched or answered.
        #expect(server.authenticationSucceeded(now: t(3)) == [])
        #expect(server.isClosed)
    }

    @Test func connectionLimitReachedIsIgnoredOutsideAuthentication() {
        var open = openServer()
        #expect(open.connectionLimitReached(reason: "late", now: t(1)) == [])
        #expect(!open.isClosed)
    }

    @Test func helloTimeout() {
        var server = Server(now: t(0))
        #expect(server.timerFired(now: t(9_999)) == [])
        let actions = server.timerFired(now: t(10_000))
        #expect(actions == [.write(goAwayFrame(0, .helloTimeout, "no HELLO within 10 s")), .close])
        #expect(writtenBytes(actions).prefix(20) == hex("00 00 00 1E 09 00 00 00 00 00 | 00 00 00 00 | 00 00 00 07 | 00 14")[...])
    }

    @Test func gracefulShutdownBeforeHello() {
        var server = Server(now: t(0))
        #expect(server.beginGracefulShutdown(now: t(1)) == [.write(goAwayFrame(0, .noError, "server is shutting down")), .close])
    }

    @Test func secondHelloIsAProtocolError() {
        var server = openServer()
        _ = server.receive(request(1), now: t(1))
        #expect(server.receive(testHello, now: t(2)) == [.write(goAwayFrame(1, .protocolError, "second HELLO frame"))])
    }

    @Test func serverFramesFromAClient() {
        for frame: Frame in [.welcome(Frame.Welcome(version: 1)), .response(1, ByteBuffer()), errorFrame(1, .internal, "x")] {
            var server = openServer()
            #expect(
                server.receive(frame, now: t(1))
                    == [.write(goAwayFrame(0, .protocolError, "\(frame.type) frames are sent by servers only")), .close]
            )
        }
    }
}

@Suite struct ServerZeroRTTTests {
    @Test func pipelinedRequestsWaitForAuthentication() {
        var server = Server(configuration: serverConfiguration(), now: t(0))
        _ = server.receive(testHello, now: t(0))
        #expect(server.receive(request(1), now: t(1)) == [])
        #expect(server.receive(request(2, timeout: 1000), now: t(2)) == [])
        #expect(server.receive(.ping(42), now: t(3)) == [])
        #expect(server.receive(request(5), now: t(4)) == [])
        #expect(
            server.authenticationSucceeded(now: t(10))
                == [
                    .write(.welcome(Frame.Welcome(version: 1, settings: ServerSettings(maxRequestsInFlight: 100).settings))),
                    dispatch(1),
                    dispatch(2, timeoutMs: 1000, at: 2),
                    .write(.pong(42)),
                    dispatch(5),
                ]
        )
    }

    @Test func beyondTheLimitWhileAuthenticating() {
        var server = Server(configuration: serverConfiguration(maxInFlight: 2), now: t(0))
        _ = server.receive(testHello, now: t(0))
        #expect(server.receive(request(1), now: t(1)) == [])
        #expect(server.receive(request(2), now: t(1)) == [.pauseReading])
        #expect(server.receive(request(3), now: t(1)) == [])
        #expect(
            server.authenticationSucceeded(now: t(2))
                == [
                    .write(.welcome(Frame.Welcome(version: 1, settings: ServerSettings(maxRequestsInFlight: 2).settings))),
                    dispatch(1),
                    dispatch(2),
                    .write(errorFrame(3, .resourceExhausted, "too many requests in flight (limit 2)")),
                ]
        )
        #expect(server.respond(1, payload: ByteBuffer(), now: t(3)) == [.write(.response(1, ByteBuffer())), .resumeReading])
    }

    @Test func cancelWhileAuthenticating() {
        var server = Server(configuration: serverConfiguration(), now: t(0))
        _ = server.receive(testHello, now: t(0))
        _ = server.receive(request(1), now: t(1))
        _ = server.receive(request(2), now: t(1))
        #expect(server.receive(.cancel(1), now: t(2)) == [])
        #expect(
            server.authenticationSucceeded(now: t(3)).dropFirst()
                == [.write(errorFrame(1, .cancelled, "cancelled by the client")), dispatch(2)]
        )
    }

    @Test func deadlinePassedWhileAuthenticating() {
        var server = Server(configuration: serverConfiguration(), now: t(0))
        _ = server.receive(testHello, now: t(0))
        _ = server.receive(request(1, timeout: 100), now: t(0))
        _ = server.receive(request(2, timeout: 500), now: t(0))
        #expect(
            server.authenticationSucceeded(now: t(100)).dropFirst()
                == [
                    .write(errorFrame(1, .deadlineExceeded, "deadline of 100 ms exceeded before the request started")),
                    dispatch(2, timeoutMs: 500, at: 0),
                ]
        )
        #expect(server.nextTimeout == t(500))
    }

    @Test func protocolErrorWhileAuthenticating() {
        var server = Server(configuration: serverConfiguration(), now: t(0))
        _ = server.receive(testHello, now: t(0))
        _ = server.receive(request(3), now: t(0))
        #expect(
            server.receive(request(3), now: t(0))
                == [.write(goAwayFrame(0, .protocolError, "request id 3 is not above the highest id so far (3)")), .close]
        )
    }

    @Test func clientGoAwayWhileAuthenticating() {
        var server = Server(configuration: serverConfiguration(), now: t(0))
        _ = server.receive(testHello, now: t(0))
        _ = server.receive(request(1), now: t(0))
        #expect(server.receive(goAwayFrame(0, .noError, "done"), now: t(0)) == [])
        let actions = server.authenticationSucceeded(now: t(1))
        #expect(actions.dropFirst() == [dispatch(1)])
        #expect(server.respond(1, payload: ByteBuffer(), now: t(2)) == [.write(.response(1, ByteBuffer())), .close])
    }
}
