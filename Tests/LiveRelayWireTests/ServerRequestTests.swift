import NIOCore
import Testing

@testable import LiveRelayWire

@Suite struct ServerRequestTests {
    @Test func outOfOrderReplies() {
        var server = openServer()
        #expect(server.receive(request(1), now: t(1)) == [dispatch(1)])
        #expect(server.receive(request(4), now: t(1)) == [dispatch(4)])
        #expect(
            server.fail(4, status: .notFound, message: "no such activity", details: buffer([0x1A, 0x01, 0x78]), now: t(2))
                == [
                    .write(
                        .error(4, Frame.RequestError(status: .notFound, message: "no such activity", details: buffer([0x1A, 0x01, 0x78]))))
                ])
        #expect(server.respond(1, payload: buffer([1]), now: t(3)) == [.write(.response(1, buffer([1])))])
        // A second result for the same request, or one for an unknown id, writes nothing.
        #expect(server.respond(1, payload: buffer([1]), now: t(3)) == [])
        #expect(server.respond(99, payload: buffer([1]), now: t(3)) == [])
    }

    @Test func duplicateRequestIDIsAConnectionErrorThatStillAnswersAcceptedRequests() {
        var server = openServer()
        _ = server.receive(request(1), now: t(1))
        _ = server.receive(request(2), now: t(1))
        let actions = server.receive(request(2), now: t(2))
        let reason = "request id 2 is not above the highest id so far (2)"
        #expect(actions == [.write(goAwayFrame(2, .protocolError, reason))])
        #expect(writtenBytes(actions) == hex("00 00 00 3D 09 00 00 00 00 00 | 00 00 00 02 | 00 00 00 01 | 00 33") + Array(reason.utf8))
        // Nothing more is read: later frames are discarded.
        #expect(server.receive(request(3), now: t(3)) == [])
        #expect(server.receive(.ping(1), now: t(3)) == [])
        #expect(server.receive(.cancel(1), now: t(3)) == [])
        // Accepted requests are still answered, then the connection closes.
        #expect(server.respond(1, payload: ByteBuffer(), now: t(4)) == [.write(.response(1, ByteBuffer()))])
        #expect(server.fail(2, status: .internal, message: "x", now: t(5)) == [.write(errorFrame(2, .internal, "x")), .close])
        #expect(server.isClosed)
    }

    @Test func lowerRequestIDIsAConnectionError() {
        var server = openServer()
        _ = server.receive(request(10), now: t(1))
        #expect(
            server.receive(request(9), now: t(1))
                == [.write(goAwayFrame(10, .protocolError, "request id 9 is not above the highest id so far (10)"))]
        )
    }

    @Test func decodingErrorAfterRequests() {
        var server = openServer()
        _ = server.receive(request(7), now: t(1))
        let error = FrameDecodingError.frameTooLarge(type: 3, length: 2_000_000, limit: 1_048_576)
        #expect(
            server.receiveDecodingError(error, now: t(2))
                == [.write(goAwayFrame(7, .frameSizeError, "REQUEST frame of 2000000 bytes exceeds the limit of 1048576 bytes"))]
        )
        #expect(server.respond(7, payload: ByteBuffer(), now: t(3)) == [.write(.response(7, ByteBuffer())), .close])
    }

    @Test func unknownTypeWithNothingInFlightClosesAtOnce() {
        var server = openServer()
        #expect(
            server.receiveDecodingError(.unknownFrameType(0x0C), now: t(1))
                == [.write(goAwayFrame(0, .protocolError, "unknown frame type 0x0C")), .close]
        )
    }

    // MARK: Cancellation

    @Test func cancelInFlight() {
        var server = openServer()
        _ = server.receive(request(1), now: t(1))
        let actions = server.receive(.cancel(1), now: t(2))
        #expect(actions == [.write(errorFrame(1, .cancelled, "cancelled by the client")), .cancelWork(1)])
        #expect(writtenBytes(actions) == hex("00 00 00 1A 05 00 00 00 00 01 | 01 | 00 17") + Array("cancelled by the client".utf8))
        // The work's late result is dropped: exactly one reply per request.
        #expect(server.respond(1, payload: buffer([1]), now: t(3)) == [])
    }

    @Test func cancelRacingTheReply() {
        var server = openServer()
        _ = server.receive(request(1), now: t(1))
        #expect(server.respond(1, payload: buffer([1]), now: t(2)) == [.write(.response(1, buffer([1])))])
        // The CANCEL crossed the RESPONSE on the wire: ignored.
        #expect(server.receive(.cancel(1), now: t(3)) == [])
    }

    @Test func cancelForAnIDNeverSent() {
        var server = openServer()
        _ = server.receive(request(2), now: t(1))
        #expect(server.receive(.cancel(1), now: t(2)) == [])  // below the highest: ignored
        #expect(
            server.receive(.cancel(3), now: t(2))
                == [.write(goAwayFrame(2, .protocolError, "CANCEL for request id 3, above the highest id so far (2)"))]
        )
    }

    // MARK: Deadlines

    @Test func deadlineExpires() {
        var server = openServer()
        #expect(server.receive(request(1, timeout: 50), now: t(10)) == [dispatch(1, timeoutMs: 50, at: 10)])
        #expect(server.receive(request(2, timeout: 20), now: t(20)) == [dispatch(2, timeoutMs: 20, at: 20)])
        #expect(server.nextTimeout == t(40))
        #expect(server.timerFired(now: t(39)) == [])
        let actions = server.timerFired(now: t(40))
        #expect(actions == [.write(errorFrame(2, .deadlineExceeded, "deadline of 20 ms exceeded")), .cancelWork(2)])
        #expect(writtenBytes(actions) == hex("00 00 00 1D 05 00 00 00 00 02 | 04 | 00 1A") + Array("deadline of 20 ms exceeded".utf8))
        #expect(server.nextTimeout == t(60))
        // Once expired, the result is dropped.
        #expect(server.respond(2, payload: buffer([1]), now: t(41)) == [])
        // Completed before its deadline: no DEADLINE_EXCEEDED later.
        #expect(server.respond(1, payload: buffer([1]), now: t(59)) == [.write(.response(1, buffer([1])))])
        #expect(server.timerFired(now: t(60)) == [])
        #expect(server.nextTimeout == nil)
    }

    @Test func manyDeadlinesExpireInOrder() {
        var server = openServer()
        for id in 1...10 {
            _ = server.receive(request(RequestID(UInt32(id)), timeout: UInt32(100 - id)), now: t(0))
        }
        let actions = server.timerFired(now: t(95))
        #expect(
            actions
                == (5...10).reversed().flatMap { id -> [Server.Action] in
                    [
                        .write(errorFrame(RequestID(UInt32(id)), .deadlineExceeded, "deadline of \(100 - id) ms exceeded")),
                        .cancelWork(RequestID(UInt32(id))),
                    ]
                }
        )
        #expect(server.nextTimeout == t(96))
    }

    // MARK: Limits

    @Test func tooManyInFlight() {
        var server = openServer(serverConfiguration(maxInFlight: 2))
        #expect(server.receive(request(1), now: t(1)) == [dispatch(1)])
        #expect(server.receive(request(2), now: t(1)) == [dispatch(2), .pauseReading])
        let actions = server.receive(request(3), now: t(1))
        #expect(actions == [.write(errorFrame(3, .resourceExhausted, "too many requests in flight (limit 2)"))])
        #expect(
            writtenBytes(actions) == hex("00 00 00 28 05 00 00 00 00 03 | 08 | 00 25") + Array("too many requests in flight (limit 2)".utf8)
        )
        #expect(server.respond(1, payload: ByteBuffer(), now: t(2)) == [.write(.response(1, ByteBuffer())), .resumeReading])
        #expect(server.receive(request(4), now: t(3)) == [dispatch(4), .pauseReading])
        #expect(
            server.receive(.cancel(2), now: t(4)) == [
                .write(errorFrame(2, .cancelled, "cancelled by the client")), .cancelWork(2), .resumeReading,
            ])
    }

    @Test func responseLargerThanTheClientAccepts() {
        var server = Server(now: t(0))
        let hello = Frame.hello(Frame.Hello(apiKey: buffer("k"), clientName: "", settings: [Setting(.maxFrameSize, 16_384)]))
        _ = server.receive(hello, now: t(0))
        _ = server.authenticationSucceeded(now: t(0))
        _ = server.receive(request(1), now: t(0))
        _ = server.receive(request(2), now: t(0))
        let big = ByteBuffer(repeating: 7, count: 16_385)
        #expect(
            server.respond(1, payload: big, now: t(1))
                == [.write(errorFrame(1, .resourceExhausted, "response of 16385 bytes exceeds the client's MAX_FRAME_SIZE of 16384"))]
        )
        // An ERROR that would not fit loses its details and is cut to fit.
        let actions = server.fail(2, status: .internal, message: String(repeating: "m", count: 20_000), details: big, now: t(1))
        #expect(actions == [.write(errorFrame(2, .internal, String(repeating: "m", count: 16_381)))])
        #expect(writtenBytes(actions).count == 10 + 16_384)
    }

    // MARK: Ping

    @Test func pingPong() {
        var server = openServer()
        let actions = server.receive(.ping(0x0102_0304_0506_0708), now: t(1))
        #expect(writtenBytes(actions) == hex("00 00 00 08 08 00 00 00 00 00 01 02 03 04 05 06 07 08"))
        #expect(server.receive(.pong(5), now: t(1)) == [])
    }

    @Test func pingFlood() {
        var server = openServer()
        for _ in 1...10 {
            _ = server.receive(.ping(1), now: t(1))
        }
        let actions = server.receive(.ping(1), now: t(2))
        let reason = "too many pings: more than 10 PING frames in 60 s without a request"
        #expect(actions == [.write(goAwayFrame(0, .enhanceYourCalm, reason)), .close])
        #expect(writtenBytes(actions).prefix(20) == hex("00 00 00 4C 09 00 00 00 00 00 | 00 00 00 00 | 00 00 00 08 | 00 42")[...])
    }

    @Test func requestsAndTimeResetThePingCount() {
        var server = openServer()
        for _ in 1...10 { _ = server.receive(.ping(1), now: t(1)) }
        _ = server.receive(request(1), now: t(2))
        for _ in 1...10 { #expect(server.receive(.ping(1), now: t(3)) == [.write(.pong(1))]) }
        // A new window after 60 s.
        for _ in 1...10 { #expect(server.receive(.ping(1), now: t(60_002)) == [.write(.pong(1))]) }
        #expect(
            server.receive(.ping(1), now: t(60_003)).first
                == .write(goAwayFrame(1, .enhanceYourCalm, "too many pings: more than 10 PING frames in 60 s without a request")))
    }

    // MARK: Idle

    @Test func idleTimeout() {
        var server = openServer(serverConfiguration(idleMs: 1_000))
        #expect(server.nextTimeout == t(1_000))
        _ = server.receive(request(1), now: t(500))
        #expect(server.nextTimeout == nil)  // something in flight: not idle
        _ = server.respond(1, payload: ByteBuffer(), now: t(700))
        #expect(server.nextTimeout == t(1_700))
        _ = server.receive(.ping(9), now: t(800))
        #expect(server.nextTimeout == t(1_800))
        #expect(server.timerFired(now: t(1_799)) == [])
        let actions = server.timerFired(now: t(1_800))
        #expect(actions == [.write(goAwayFrame(1, .idleTimeout, "idle for 1000 ms")), .close])
        #expect(
            writtenBytes(actions) == hex("00 00 00 1A 09 00 00 00 00 00 | 00 00 00 01 | 00 00 00 06 | 00 10")
                + Array("idle for 1000 ms".utf8))
    }

    @Test func noIdleTimeoutWhenDisabled() {
        let server = openServer(serverConfiguration(idleMs: 0))
        #expect(server.nextTimeout == nil)
    }

    // MARK: GOAWAY

    @Test func gracefulDrain() {
        var server = openServer()
        _ = server.receive(request(1), now: t(1))
        _ = server.receive(request(2), now: t(1))
        let goAway = server.beginGracefulShutdown(now: t(2))
        #expect(goAway == [.write(goAwayFrame(2, .noError, "server is shutting down"))])
        #expect(
            writtenBytes(goAway) == hex("00 00 00 21 09 00 00 00 00 00 | 00 00 00 02 | 00 00 00 00 | 00 17")
                + Array("server is shutting down".utf8))
        #expect(server.beginGracefulShutdown(now: t(2)) == [])
        // A request that crossed the GOAWAY: refused, safe to retry elsewhere.
        let refused = server.receive(request(3), now: t(3))
        #expect(refused == [.write(errorFrame(3, .unavailable, "server is going away"))])
        #expect(writtenBytes(refused) == hex("00 00 00 17 05 00 00 00 00 03 | 0E | 00 14") + Array("server is going away".utf8))
        #expect(server.receive(.ping(1), now: t(3)) == [.write(.pong(1))])
        #expect(server.respond(1, payload: ByteBuffer(), now: t(4)) == [.write(.response(1, ByteBuffer()))])
        #expect(server.respond(2, payload: ByteBuffer(), now: t(5)) == [.write(.response(2, ByteBuffer())), .close])
    }

    /// A key revoked while its connection is open: GOAWAY UNAUTHENTICATED, the
    /// calls accepted before it answered, nothing new taken, then close.
    @Test func revokedCredentialsAnswerWhatWasAcceptedAndClose() {
        var server = openServer()
        _ = server.receive(request(1), now: t(1))
        let goAway = server.credentialsRevoked(reason: "API key k was revoked", now: t(2))
        #expect(goAway == [.write(goAwayFrame(1, .unauthenticated, "API key k was revoked"))])
        #expect(server.credentialsRevoked(reason: "again", now: t(2)) == [], "one GOAWAY")
        #expect(server.receive(request(2), now: t(3)).isEmpty, "a call after the GOAWAY is not taken")
        #expect(server.respond(1, payload: ByteBuffer(), now: t(4)) == [.write(.response(1, ByteBuffer())), .close])
        var idle = openServer()
        #expect(idle.credentialsRevoked(reason: "gone", now: t(1)) == [.write(goAwayFrame(0, .unauthenticated, "gone")), .close])
    }

    @Test func gracefulShutdownWhenIdleClosesAtOnce() {
        var server = openServer()
        #expect(server.beginGracefulShutdown(now: t(1)) == [.write(goAwayFrame(0, .noError, "server is shutting down")), .close])
    }

    @Test func connectionErrorDuringDrainKeepsTheLastID() {
        var server = openServer()
        _ = server.receive(request(1), now: t(1))
        _ = server.beginGracefulShutdown(now: t(2))
        _ = server.receive(request(5), now: t(3))
        #expect(
            server.receive(request(5), now: t(4))
                == [.write(goAwayFrame(1, .protocolError, "request id 5 is not above the highest id so far (5)"))]
        )
        #expect(server.respond(1, payload: ByteBuffer(), now: t(5)) == [.write(.response(1, ByteBuffer())), .close])
    }

    @Test func clientGracefulGoAway() {
        var server = openServer()
        _ = server.receive(request(1), now: t(1))
        _ = server.receive(request(2), now: t(1))
        #expect(server.receive(goAwayFrame(0, .noError, "client closing"), now: t(2)) == [])
        #expect(server.receive(.cancel(1), now: t(3)) == [.write(errorFrame(1, .cancelled, "cancelled by the client")), .cancelWork(1)])
        #expect(
            server.receive(request(3), now: t(3))
                == [.write(goAwayFrame(2, .protocolError, "REQUEST 3 after the client's GOAWAY"))]
        )
        #expect(server.respond(2, payload: ByteBuffer(), now: t(4)) == [.write(.response(2, ByteBuffer())), .close])
    }

    @Test func clientErrorGoAwayStopsAllWork() {
        var server = openServer()
        _ = server.receive(request(2), now: t(1))
        _ = server.receive(request(1_000), now: t(1))
        #expect(
            server.receive(goAwayFrame(0, .protocolError, "RESPONSE for unknown request id 9"), now: t(2))
                == [.cancelWork(2), .cancelWork(1_000), .close]
        )
        #expect(server.respond(2, payload: ByteBuffer(), now: t(3)) == [])
    }

    @Test func peerClosedStopsAllWork() {
        var server = openServer()
        _ = server.receive(request(3), now: t(1))
        _ = server.receive(request(8), now: t(1))
        _ = server.respond(3, payload: ByteBuffer(), now: t(2))
        #expect(server.peerClosed() == [.cancelWork(8)])
        #expect(server.isClosed)
        #expect(server.respond(8, payload: ByteBuffer(), now: t(3)) == [])
        #expect(server.timerFired(now: t(100_000)) == [])
        #expect(server.nextTimeout == nil)
    }
}
