import NIOCore
import Testing

@testable import LiveRelayWire

typealias Client = ClientConnectionStateMachine

func clientConfiguration(
    keepalive: TimeAmount? = .seconds(30),
    firstRequestID: RequestID = 1
) -> Client.Configuration {
    Client.Configuration(
        apiKey: ByteBuffer(string: "lr_test_key"),
        clientName: "tests",
        keepaliveInterval: keepalive,
        firstRequestID: firstRequestID
    )
}

func welcome(maxInFlight: UInt32 = 100, maxFrameSize: UInt32 = 1_048_576) -> Frame {
    .welcome(Frame.Welcome(version: 1, settings: ServerSettings(maxFrameSize: maxFrameSize, maxRequestsInFlight: maxInFlight).settings))
}

func connectedClient(_ configuration: Client.Configuration = clientConfiguration(), maxInFlight: UInt32 = 100) -> Client {
    var client = Client(configuration: configuration)
    _ = client.connect(now: t(0))
    _ = client.receive(welcome(maxInFlight: maxInFlight), now: t(0))
    return client
}

extension Client {
    mutating func send(_ timeout: TimeAmount? = nil, payload: [UInt8] = [0x0A, 0x01, 0x78], now: NIODeadline = t(1)) -> RequestID? {
        if case .send(let id, _) = self.startRequest(method: pingMethod, payload: buffer(payload), timeout: timeout, now: now) {
            return id
        }
        return nil
    }
}

func failure(_ status: StatusCode, _ message: String, _ disposition: Client.RetryDisposition) -> Client.CallFailure {
    Client.CallFailure(status: status, message: message, disposition: disposition)
}

@Suite struct ClientConnectionStateMachineTests {
    @Test func prefaceAndHello() {
        var client = Client(configuration: clientConfiguration())
        let actions = client.connect(now: t(0))
        let hello = Frame.hello(
            Frame.Hello(apiKey: ByteBuffer(string: "lr_test_key"), clientName: "tests", settings: [Setting(.maxFrameSize, 1_048_576)])
        )
        #expect(actions == [.writePreface, .write(hello)])
        #expect(
            encoded(hello)
                == hex("00 00 00 1D 01 00 00 00 00 00 | 00 01 00 01 | 00 0B") + Array("lr_test_key".utf8) + [5]
                + Array("tests".utf8) + hex("00 01 00 10 00 00")
        )
        #expect(client.connect(now: t(1)) == [])
    }

    @Test func zeroRTTRequestThenWelcomeThenResponse() {
        var client = Client(configuration: clientConfiguration())
        _ = client.connect(now: t(0))
        #expect(
            client.startRequest(method: pingMethod, payload: buffer([0x0A, 0x01, 0x78]), timeout: .milliseconds(5000), now: t(0))
                == .send(1, request(1, timeout: 5000))
        )
        #expect(client.receive(welcome(maxInFlight: 50), now: t(1)) == [.connected(version: 1, ServerSettings(maxRequestsInFlight: 50))])
        #expect(client.serverSettings.maxRequestsInFlight == 50)
        #expect(client.receive(.response(1, buffer([0x0A])), now: t(2)) == [.succeed(1, buffer([0x0A]))])
        #expect(client.outstandingCount == 0)
    }

    @Test func idsStrictlyIncrease() {
        var client = connectedClient()
        #expect([client.send(), client.send(), client.send()] == [1, 2, 3])
        var late = connectedClient(clientConfiguration(firstRequestID: 1_000))
        #expect(late.send() == 1_000)
    }

    @Test func idExhaustion() {
        var client = connectedClient(clientConfiguration(firstRequestID: .max))
        #expect(client.send() == .max)
        #expect(
            client.startRequest(method: pingMethod, payload: ByteBuffer(), timeout: nil, now: t(1))
                == .fail(failure(.unavailable, "request ids exhausted: open a new connection", .notProcessed))
        )
    }

    @Test func waitsAtTheServersLimit() {
        var client = connectedClient(maxInFlight: 2)
        #expect(client.send() == 1)
        #expect(client.send() == 2)
        #expect(client.startRequest(method: pingMethod, payload: ByteBuffer(), timeout: nil, now: t(1)) == .wait)
        #expect(client.receive(.response(2, ByteBuffer()), now: t(2)) == [.succeed(2, ByteBuffer()), .requestSlotsAvailable])
        #expect(client.send() == 3)
        #expect(client.receive(.response(1, ByteBuffer()), now: t(2)) == [.succeed(1, ByteBuffer())])
    }

    @Test func localChecksBeforeSending() {
        var client = connectedClient()
        #expect(
            client.startRequest(method: "", payload: ByteBuffer(), timeout: nil, now: t(1))
                == .fail(failure(.internal, "method must be 1 to 255 bytes of printable ASCII", .notProcessed))
        )
        #expect(
            client.startRequest(method: "/a b", payload: ByteBuffer(), timeout: nil, now: t(1))
                == .fail(failure(.internal, "method must be 1 to 255 bytes of printable ASCII", .notProcessed))
        )
        var small = Client(configuration: clientConfiguration())
        _ = small.connect(now: t(0))
        _ = small.receive(welcome(maxFrameSize: 16_384), now: t(0))
        let payload = ByteBuffer(repeating: 1, count: 16_384 - 5 - pingMethod.utf8.count + 1)
        #expect(
            small.startRequest(method: pingMethod, payload: payload, timeout: nil, now: t(1))
                == .fail(failure(.resourceExhausted, "request of 16385 bytes exceeds the server's MAX_FRAME_SIZE of 16384", .notProcessed))
        )
        #expect(
            client.startRequest(method: pingMethod, payload: ByteBuffer(), timeout: .zero, now: t(1))
                == .fail(failure(.deadlineExceeded, "deadline passed before the call was sent", .notProcessed))
        )
        // Sub-millisecond timeouts round up, never to 0 ("no deadline").
        #expect(
            client.startRequest(method: pingMethod, payload: ByteBuffer(), timeout: .microseconds(10), now: t(1))
                == .send(1, request(1, timeout: 1, payload: []))
        )
    }

    @Test func errorReplies() {
        var client = connectedClient()
        _ = client.send()
        _ = client.send()
        let details = buffer([0x1A, 0x01, 0x78])
        #expect(
            client.receive(.error(1, Frame.RequestError(status: .notFound, message: "no such activity", details: details)), now: t(2))
                == [.fail(1, Client.CallFailure(status: .notFound, message: "no such activity", details: details, disposition: .answered))]
        )
        #expect(
            client.receive(errorFrame(2, .unavailable, "server is going away"), now: t(2))
                == [.fail(2, failure(.unavailable, "server is going away", .notProcessed))]
        )
    }

    @Test func replyForAnUnknownIDIsAConnectionError() {
        var client = connectedClient()
        _ = client.send()
        _ = client.send()
        let actions = client.receive(.response(9, ByteBuffer()), now: t(2))
        let reason = "RESPONSE for unknown request id 9"
        #expect(
            actions == [
                .write(goAwayFrame(0, .protocolError, reason)),
                .fail(1, failure(.internal, "connection failed: \(reason)", .mayHaveBeenProcessed)),
                .fail(2, failure(.internal, "connection failed: \(reason)", .mayHaveBeenProcessed)),
                .close,
            ]
        )
        let bytes = encoded(goAwayFrame(0, .protocolError, reason))
        #expect(bytes == hex("00 00 00 2B 09 00 00 00 00 00 | 00 00 00 00 | 00 00 00 01 | 00 21") + Array(reason.utf8))
        #expect(client.isClosed)
        #expect(
            client.startRequest(method: pingMethod, payload: ByteBuffer(), timeout: nil, now: t(3))
                == .fail(failure(.unavailable, "connection is not open", .notProcessed))
        )
    }

    @Test func duplicateReplyIsAConnectionError() {
        var client = connectedClient()
        _ = client.send()
        _ = client.send()
        _ = client.receive(.response(1, ByteBuffer()), now: t(2))
        #expect(
            client.receive(errorFrame(1, .internal, "again"), now: t(2)).first
                == .write(goAwayFrame(0, .protocolError, "ERROR for unknown request id 1"))
        )
    }

    @Test func framesAServerNeverSends() {
        for frame: Frame in [request(1), .cancel(1), testHello] {
            var client = connectedClient()
            #expect(
                client.receive(frame, now: t(1))
                    == [.write(goAwayFrame(0, .protocolError, "\(frame.type) frames are sent by clients only")), .close]
            )
        }
        var client = connectedClient()
        #expect(client.receive(welcome(), now: t(1)).first == .write(goAwayFrame(0, .protocolError, "second WELCOME frame")))
    }

    @Test func frameBeforeWelcome() {
        var client = Client(configuration: clientConfiguration())
        _ = client.connect(now: t(0))
        _ = client.send(now: t(0))
        #expect(
            client.receive(.response(1, ByteBuffer()), now: t(1))
                == [
                    .write(goAwayFrame(0, .protocolError, "expected WELCOME, got RESPONSE")),
                    .fail(1, failure(.internal, "connection failed: expected WELCOME, got RESPONSE", .mayHaveBeenProcessed)),
                    .close,
                ]
        )
    }

    @Test func unsupportedVersionInWelcome() {
        var client = Client(configuration: clientConfiguration())
        _ = client.connect(now: t(0))
        #expect(
            client.receive(.welcome(Frame.Welcome(version: 2)), now: t(1))
                == [.write(goAwayFrame(0, .unsupportedVersion, "server chose version 2, client speaks 1...1")), .close]
        )
    }

    @Test func unauthenticated() {
        var client = Client(configuration: clientConfiguration())
        _ = client.connect(now: t(0))
        _ = client.send(now: t(0))
        _ = client.send(now: t(0))
        #expect(
            client.receive(goAwayFrame(0, .unauthenticated, "unknown API key"), now: t(1))
                == [
                    .fail(1, failure(.unauthenticated, "server is going away (UNAUTHENTICATED): unknown API key", .notProcessed)),
                    .fail(2, failure(.unauthenticated, "server is going away (UNAUTHENTICATED): unknown API key", .notProcessed)),
                    .close,
                ]
        )
    }

    @Test func tooManyConnectionsFailsPipelinedCallsAsRetryableElsewhere() {
        var client = Client(configuration: clientConfiguration())
        _ = client.connect(now: t(0))
        _ = client.send(now: t(0))
        let message = "server is going away (TOO_MANY_CONNECTIONS): API key k has 2 connections, the limit is 2"
        #expect(
            client.receive(goAwayFrame(0, .tooManyConnections, "API key k has 2 connections, the limit is 2"), now: t(1))
                == [.fail(1, failure(.unavailable, message, .notProcessed)), .close]
        )
    }

    @Test func goAwayFailsCallsAboveTheLastIDOnly() {
        var client = connectedClient(maxInFlight: 3)
        _ = client.send()
        _ = client.send()
        _ = client.send()
        #expect(client.startRequest(method: pingMethod, payload: ByteBuffer(), timeout: nil, now: t(1)) == .wait)
        #expect(
            client.receive(goAwayFrame(2, .noError, "server is shutting down"), now: t(2))
                == [
                    .fail(3, failure(.unavailable, "server is going away (NO_ERROR): server is shutting down", .notProcessed)),
                    .requestSlotsAvailable,
                ]
        )
        #expect(
            client.startRequest(method: pingMethod, payload: ByteBuffer(), timeout: nil, now: t(2))
                == .fail(failure(.unavailable, "connection is going away", .notProcessed))
        )
        #expect(client.receive(.response(1, ByteBuffer()), now: t(3)) == [.succeed(1, ByteBuffer())])
        // A later GOAWAY cannot raise the last id.
        #expect(client.receive(goAwayFrame(5, .noError, ""), now: t(3)) == [])
        #expect(client.receive(.response(2, ByteBuffer()), now: t(4)) == [.succeed(2, ByteBuffer()), .close])
    }

    @Test func deadline() {
        var client = connectedClient(clientConfiguration(keepalive: nil))
        #expect(client.send(.milliseconds(100), now: t(0)) == 1)
        #expect(client.nextTimeout == t(100))
        #expect(client.timerFired(now: t(99)) == [])
        #expect(
            client.timerFired(now: t(100))
                == [.write(.cancel(1)), .fail(1, failure(.deadlineExceeded, "deadline of 100 ms exceeded", .mayHaveBeenProcessed))]
        )
        // The id stays taken until the server answers; that answer is dropped.
        #expect(client.outstandingCount == 1)
        #expect(client.receive(errorFrame(1, .deadlineExceeded, "deadline of 100 ms exceeded"), now: t(101)) == [])
        #expect(client.outstandingCount == 0)
    }

    @Test func cancelRace() {
        var client = connectedClient()
        _ = client.send()
        let actions = client.cancel(1, now: t(2))
        #expect(actions == [.write(.cancel(1)), .fail(1, failure(.cancelled, "cancelled by the client", .mayHaveBeenProcessed))])
        #expect(client.cancel(1, now: t(2)) == [])
        // The real reply crossed the CANCEL: dropped, not a protocol error.
        #expect(client.receive(.response(1, ByteBuffer()), now: t(3)) == [])
        // Now the id is gone: another reply for it is.
        #expect(client.receive(.response(1, ByteBuffer()), now: t(3)).last == .close)
    }

    @Test func keepalive() {
        var client = connectedClient()
        #expect(client.nextTimeout == nil)  // no calls: no keepalive
        _ = client.send(now: t(1_000))
        #expect(client.nextTimeout == t(31_000))
        #expect(client.timerFired(now: t(31_000)) == [.write(.ping(1))])
        #expect(client.nextTimeout == t(41_000))
        #expect(client.receive(.pong(1), now: t(31_050)) == [])
        #expect(client.nextTimeout == t(61_050))
        #expect(client.timerFired(now: t(61_050)) == [.write(.ping(2))])
        #expect(
            client.timerFired(now: t(71_050))
                == [
                    .fail(1, failure(.unavailable, "keepalive timeout: no PONG within the keepalive timeout", .mayHaveBeenProcessed)),
                    .close,
                ]
        )
    }

    @Test func serverPing() {
        var client = connectedClient()
        #expect(client.receive(.ping(77), now: t(1)) == [.write(.pong(77))])
    }

    @Test func welcomeTimeout() {
        var client = Client(configuration: clientConfiguration())
        _ = client.connect(now: t(0))
        _ = client.send(now: t(0))
        #expect(client.nextTimeout == t(10_000))
        #expect(
            client.timerFired(now: t(10_000))
                == [.fail(1, failure(.unavailable, "no WELCOME within 10 s", .mayHaveBeenProcessed)), .close]
        )
    }

    @Test func gracefulClientClose() {
        var client = connectedClient()
        _ = client.send()
        #expect(client.beginGracefulShutdown(now: t(2)) == [.write(goAwayFrame(0, .noError, "client closing"))])
        #expect(
            client.startRequest(method: pingMethod, payload: ByteBuffer(), timeout: nil, now: t(2))
                == .fail(failure(.unavailable, "connection is going away", .notProcessed))
        )
        #expect(client.receive(.response(1, ByteBuffer()), now: t(3)) == [.succeed(1, ByteBuffer()), .close])
    }

    @Test func peerClosed() {
        var client = connectedClient()
        _ = client.send()
        _ = client.send()
        _ = client.cancel(2, now: t(2))
        #expect(client.peerClosed() == [.fail(1, failure(.unavailable, "connection closed", .mayHaveBeenProcessed))])
        #expect(client.isClosed)
    }

    @Test func decodingError() {
        var client = connectedClient()
        _ = client.send()
        let error = FrameDecodingError.frameTooLarge(type: 4, length: 2_000_000, limit: 1_048_576)
        #expect(
            client.receiveDecodingError(error, now: t(2))
                == [
                    .write(goAwayFrame(0, .frameSizeError, error.description)),
                    .fail(1, failure(.internal, "connection failed: \(error.description)", .mayHaveBeenProcessed)),
                    .close,
                ]
        )
    }
}
