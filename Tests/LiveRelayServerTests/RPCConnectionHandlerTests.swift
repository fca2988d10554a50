import LiveRelayMessages
import LiveRelayService
import LiveRelayTestSupport
import LiveRelayWire
import NIOCore
import NIOEmbedded
import Testing

@testable import LiveRelayServer

/// The handler's own duties, without TLS or sockets: turning bytes into state
/// machine events, calling the service, writing and flushing what comes back,
/// holding reads back, and running timers on the loop's clock. The protocol
/// rules themselves are the state machine's and tested in LiveRelayWireTests;
/// these tests check that the handler carries them out.
@Suite("RPCConnectionHandler in an EmbeddedChannel")
struct RPCConnectionHandlerTests {
    @Test func helloIsAnsweredWithWelcomeCarryingTheServerSettings() throws {
        let settings = ServerSettings(maxRequestsInFlight: 7, idleTimeoutMilliseconds: 60_000)
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service, settings: settings)
        defer { try? connection.finish(service) }

        #expect(try connection.writtenFrames() == [], "the server speaks only after HELLO")
        #expect(try connection.hello() == [.welcome(Frame.Welcome(version: 1, settings: settings.settings))])
        #expect(connection.channel.isActive)
    }

    @Test func aRequestReachesTheServiceAndItsReplyIsWritten() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }

        // Pipelined behind the HELLO (0-RTT): started only once the key is accepted.
        let first = try connection.hello(then: [ping(1, [7, 8, 9])])
        #expect(first.count == 1)
        guard case .welcome = first.first else { Issue.record("expected WELCOME, got \(first)"); return }
        #expect(service.dispatchedIDs == [1])
        let context = try #require(service.context(1))
        #expect(context.principal.keyID == TestKeys.all.record.keyID)
        #expect(context.deadline == nil, "timeout 0 means no deadline")
        #expect(try connection.writtenFrames() == [], "nothing to answer while the service holds the call")

        service.succeed(1)
        let frames = try connection.writtenFrames()
        #expect(frames.count == 1)
        let reply = try #require(frames.first)
        let payload = try #require(expectResponse(reply, id: 1))
        #expect(try PingReply(serializedBytes: payload).payload == [7, 8, 9])
    }

    @Test func pipelinedCallsAreAnsweredAsTheyCompleteAndShareOneFlush() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()

        try connection.send([ping(1, [1]), ping(2, [2]), ping(3, [3])])
        #expect(service.dispatchedIDs == [1, 2, 3])
        for id: RequestID in [3, 1, 2] { service.succeed(id) }

        let buffers = try connection.writtenBuffers()
        #expect(buffers.count == 1, "completions in one loop turn go out in one write")
        let frames = try connection.frames(in: buffers)
        #expect(frames.map(\.requestID) == [3, 1, 2])
        for frame in frames {
            let payload = try #require(expectResponse(frame, id: frame.requestID))
            #expect(try PingReply(serializedBytes: payload).payload == [UInt8(frame.requestID.rawValue)])
        }
    }

    @Test func unknownAPIKeyGetsGoAwayUnauthenticatedAndNothingRuns() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }

        let unknownKey = "lrk_aaaaaaaaaaaa_" + String(repeating: "f", count: 64)
        let frames = try connection.hello(apiKey: unknownKey, then: [ping(1)])
        #expect(frames == [.goAway(Frame.GoAway(lastRequestID: 0, code: .unauthenticated, reason: "invalid API key"))])
        #expect(!connection.channel.isActive)
        #expect(service.calls.isEmpty, "a request pipelined behind a refused HELLO must not run")
    }

    /// A refused HELLO is one line in the log, whatever its client name holds: a name
    /// is the client's own text, so it must not start a line of its own or fill one.
    @Test func aRefusedHelloIsOneLogLineWithTheClientNameMadeSafe() throws {
        let service = ManualService()
        let logs = LogRecorder()
        let connection = try EmbeddedConnection(service: service, logger: logs.logger())
        defer { try? connection.finish(service) }

        let unknownKey = "lrk_aaaaaaaaaaaa_" + String(repeating: "f", count: 64)
        let forged = "evil\n2026-01-01T00:00:00Z critical: database lost\r\u{1B}[2J\u{202E}" + String(repeating: "x", count: 200)
        let frames = try connection.hello(apiKey: unknownKey, clientName: forged)
        #expect(frames == [.goAway(Frame.GoAway(lastRequestID: 0, code: .unauthenticated, reason: "invalid API key"))])

        let shown = logs.lines.filter { $0.level >= .info }
        #expect(shown.count == 1, "\(shown)")
        let line = try #require(shown.first)
        #expect(line.level == .notice)
        #expect(line.message == "API key refused")
        let client = try #require(line.metadata["client"])
        #expect(client.utf8.count <= 64)
        #expect(client.hasPrefix(#"evil\n2026-01-01T00:00:00Z critical: database lost\r\u{1B}"#), "\(client)")
        for line in logs.lines {
            let text = ([line.message] + line.metadata.values).joined()
            #expect(!text.unicodeScalars.contains { $0.properties.generalCategory == .control }, "\(line)")
        }
    }

    @Test func clientNamesAreLoggedEscapedAndBounded() {
        #expect(RPCConnectionHandler.loggable(clientName: "orders-backend/2.1") == "orders-backend/2.1")
        #expect(RPCConnectionHandler.loggable(clientName: "") == "")
        #expect(RPCConnectionHandler.loggable(clientName: "a\nb\tc\u{0}d\u{7F}") == #"a\nb\tc\0d\u{7F}"#)
        #expect(RPCConnectionHandler.loggable(clientName: "rtl\u{202E}gnp.exe\u{2028}") == #"rtl\u{202E}gnp.exe\u{2028}"#)
        #expect(RPCConnectionHandler.loggable(clientName: "Zürich café") == "Zürich café")
        let long = RPCConnectionHandler.loggable(clientName: String(repeating: "é", count: 100))
        #expect(long == String(repeating: "é", count: 30) + "...")
        #expect(long.utf8.count <= RPCConnectionHandler.maxLoggedClientNameBytes)
        // An escape is never cut in half.
        let escapes = RPCConnectionHandler.loggable(clientName: String(repeating: "\u{1B}", count: 40))
        #expect(escapes == String(repeating: #"\u{1B}"#, count: 10) + "...")
    }

    @Test func malformedFrameGetsGoAwayProtocolErrorByteForByteAndAcceptedCallsAreStillAnswered() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()

        var bytes = RawClient.encode([ping(1)])
        // A header of type 0x0A, which v1 does not define, then a request that must never be read.
        bytes.writeBytes([0x00, 0x00, 0x00, 0x00, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00])
        var after = RawClient.encode([ping(2)])
        bytes.writeBuffer(&after)
        try connection.receive(bytes)

        let reason = "unknown frame type 0x0A"
        let expected: [UInt8] =
            [
                0x00, 0x00, 0x00, 0x21,  // payload length: 4 + 4 + 2 + 23
                0x09,  // GOAWAY
                0x00,  // flags
                0x00, 0x00, 0x00, 0x00,  // connection-level: request id 0
                0x00, 0x00, 0x00, 0x01,  // last_request_id: the call read before the bad header
                0x00, 0x00, 0x00, 0x01,  // PROTOCOL_ERROR
                0x00, 0x17,  // reason length 23
            ] + Array(reason.utf8)
        #expect(Array(buffer: try connection.writtenBytes()) == expected)
        #expect(service.dispatchedIDs == [1])
        #expect(connection.channel.isActive, "open until the accepted call is answered")

        service.succeed(1)
        let frames = try connection.writtenFrames()
        #expect(frames.count == 1)
        _ = frames.first.map { expectResponse($0, id: 1) }
        #expect(!connection.channel.isActive)
        #expect(service.dispatchedIDs == [1])
    }

    @Test func badPrefaceGetsGoAwayProtocolErrorAndClose() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }

        try connection.receive(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: liverelay\r\n\r\n"))
        let frames = try connection.writtenFrames()
        #expect(frames.count == 1)
        let goAway = try #require(frames.first.flatMap { expectGoAway($0, code: .protocolError) })
        #expect(goAway.lastRequestID == 0)
        #expect(goAway.reason.hasPrefix("bad connection preface"), "reason: \(goAway.reason)")
        #expect(goAway.reason.contains("got 47"), "names the byte that came instead: \(goAway.reason)")
        #expect(!connection.channel.isActive)
    }

    @Test func cancelAnswersCancelledStopsTheWorkAndDropsItsLateResult() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()
        try connection.send([ping(1), ping(2)])
        let first = try #require(service.context(1)).cancellation
        let second = try #require(service.context(2)).cancellation

        try connection.send([.cancel(1)])
        #expect(
            try connection.writtenFrames() == [
                .error(1, Frame.RequestError(status: .cancelled, message: "cancelled by the client"))
            ])
        #expect(first.isCancelled, "the service can see that its work is no longer wanted")
        #expect(!second.isCancelled)

        service.succeed(1)
        #expect(try connection.writtenFrames() == [], "one answer per call: the late result is dropped")

        // A CANCEL that crosses the reply on the wire is ignored.
        service.succeed(2)
        let frames = try connection.writtenFrames()
        #expect(frames.count == 1)
        _ = frames.first.map { expectResponse($0, id: 2) }
        try connection.send([.cancel(2)])
        #expect(try connection.writtenFrames() == [])
        #expect(connection.channel.isActive)
    }

    @Test func aPassingDeadlineIsAnsweredDeadlineExceededAtTheDeadline() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()
        // Away from the loop's origin, so a deadline measured from zero would be caught.
        connection.loop.advanceTime(by: .seconds(1))
        let receivedAt = connection.loop.now

        try connection.send([ping(1, timeoutMs: 250)])
        let context = try #require(service.context(1))
        #expect(context.deadline == receivedAt + .milliseconds(250), "receipt time plus the timeout")

        connection.loop.advanceTime(by: .milliseconds(249))
        #expect(try connection.writtenFrames() == [])
        #expect(!context.cancellation.isCancelled)

        connection.loop.advanceTime(by: .milliseconds(1))
        #expect(
            try connection.writtenFrames() == [
                .error(1, Frame.RequestError(status: .deadlineExceeded, message: "deadline of 250 ms exceeded"))
            ])
        #expect(context.cancellation.isCancelled)

        service.succeed(1)
        #expect(try connection.writtenFrames() == [], "answered once, at the deadline")
    }

    @Test func readingStopsAtMaxRequestsInFlightAndResumesWhenASlotFrees() throws {
        let service = ManualService()
        let settings = ServerSettings(maxRequestsInFlight: 2, idleTimeoutMilliseconds: 300_000)
        let connection = try EmbeddedConnection(service: service, settings: settings)
        defer { try? connection.finish(service) }
        _ = try connection.hello()
        connection.channel.read()
        #expect(connection.reads.count == 1, "below the limit a read goes through")

        try connection.send([ping(1), ping(2), ping(3)])
        #expect(service.dispatchedIDs == [1, 2], "the third request stays in the decoder while two are in flight")
        #expect(try connection.writtenFrames() == [], "held back, not refused with RESOURCE_EXHAUSTED")
        connection.channel.read()
        #expect(connection.reads.count == 1, "at the limit the socket is not read")

        service.succeed(1)
        // The freed slot goes to the request already buffered, which fills it again.
        #expect(service.dispatchedIDs == [1, 2, 3])
        #expect(connection.reads.count == 1, "still at the limit")

        service.succeed(2)
        #expect(connection.reads.count == 2, "below the limit: the read held back goes through")
        let frames = try connection.writtenFrames()
        #expect(frames.map(\.requestID) == [1, 2])
        for frame in frames { _ = expectResponse(frame, id: frame.requestID) }
        connection.channel.read()
        #expect(connection.reads.count == 3)
    }

    /// A peer that sends but does not read its replies: once the channel is
    /// not writable (its unsent bytes passed the high water mark), no more of
    /// its requests are read or decoded, so the server buffers no more replies.
    @Test func readingStopsWhileRepliesBackUpAndResumesWhenThePeerReads() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()
        connection.channel.read()
        #expect(connection.reads.count == 1)

        connection.channel.isWritable = false
        connection.channel.pipeline.fireChannelWritabilityChanged()
        try connection.send([ping(1), ping(2)])
        #expect(service.dispatchedIDs == [], "requests wait in the decoder while replies back up")
        connection.channel.read()
        #expect(connection.reads.count == 1, "the socket is not read either")

        connection.channel.isWritable = true
        connection.channel.pipeline.fireChannelWritabilityChanged()
        #expect(service.dispatchedIDs == [1, 2], "the waiting requests run once the replies drain")
        #expect(connection.reads.count == 2, "and the read held back goes through")
        service.succeed(1)
        service.succeed(2)
        #expect(try connection.writtenFrames().map(\.requestID) == [1, 2])
    }

    @Test func gracefulShutdownSendsGoAwayFinishesCallsInFlightThenCloses() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()
        try connection.send([ping(1), ping(2)])

        connection.channel.pipeline.fireUserInboundEventTriggered(RPCConnectionHandler.GracefulShutdown())
        #expect(
            try connection.writtenFrames() == [
                .goAway(Frame.GoAway(lastRequestID: 2, code: .noError, reason: "server is shutting down"))
            ])

        // A request that crossed the GOAWAY is refused unprocessed; PING still works.
        try connection.send([ping(3), .ping(42)])
        #expect(
            try connection.writtenFrames() == [
                .error(3, Frame.RequestError(status: .unavailable, message: "server is going away")),
                .pong(42),
            ])
        #expect(service.dispatchedIDs == [1, 2])

        service.succeed(2)
        let second = try connection.writtenFrames()
        #expect(second.count == 1)
        _ = second.first.map { expectResponse($0, id: 2) }
        #expect(connection.channel.isActive, "call 1 is still in flight")

        service.succeed(1)
        let first = try connection.writtenFrames()
        #expect(first.count == 1)
        _ = first.first.map { expectResponse($0, id: 1) }
        #expect(!connection.channel.isActive, "closed once nothing is in flight")
    }

    @Test func callsTheKeyMayNotMakeAreRefusedOneByOneAndTheConnectionCarriesOn() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello(apiKey: TestKeys.pingOnly.plaintext)

        let unknownMethod = Frame.request(2, Frame.Request(method: "/liverelay.v1.LiveRelay/Teleport", payload: ByteBuffer()))
        // A varint cut short: not a protobuf message.
        let malformed = Frame.request(3, Frame.Request(method: LiveRelayMethod.ping.rawValue, payload: ByteBuffer(bytes: [0xFF])))
        try connection.send([request(1, .registerToken, Fixtures.register), unknownMethod, malformed, ping(4)])

        let frames = try connection.writtenFrames()
        #expect(frames.count == 3)
        guard frames.count == 3 else { return }
        let denied = expectError(frames[0], id: 1, status: .permissionDenied)
        #expect(denied?.message.contains("RegisterToken") == true, "message: \(denied?.message ?? "")")
        let unimplemented = expectError(frames[1], id: 2, status: .unimplemented)
        #expect(unimplemented?.message == "unknown method /liverelay.v1.LiveRelay/Teleport")
        _ = expectError(frames[2], id: 3, status: .invalidArgument)
        #expect(service.dispatchedIDs == [4], "only the allowed, well-formed call reaches the service")

        service.succeed(4)
        let reply = try connection.writtenFrames()
        #expect(reply.count == 1)
        _ = reply.first.map { expectResponse($0, id: 4) }
        #expect(connection.channel.isActive)
    }

    @Test func serviceErrorsBecomeErrorFramesAndInternalsStayHidden() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()

        try connection.send([
            request(1, .startActivity, Fixtures.start),
            request(2, .updateActivity, Fixtures.update),
            request(3, .endActivity, Fixtures.end),
        ])
        let frames = try connection.writtenFrames()
        #expect(frames.count == 3)
        guard frames.count == 3 else { return }
        let notFound = try #require(expectError(frames[0], id: 1, status: .notFound))
        #expect(notFound.message == "no such app")
        #expect(try ErrorDetails(serializedBytes: notFound.details).reason == "UnknownApp")
        let hidden = try #require(expectError(frames[1], id: 2, status: .internal))
        #expect(hidden.message == "internal error")
        #expect(!String(buffer: hidden.details).contains("hunter2"))
        _ = expectResponse(frames[2], id: 3)
    }

    @Test func silentPeerGetsGoAwayHelloTimeoutOnTheLoopClock() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service, helloTimeout: .seconds(2))
        defer { try? connection.finish(service) }

        connection.loop.advanceTime(by: .milliseconds(1_999))
        #expect(try connection.writtenFrames() == [])
        #expect(connection.channel.isActive)

        connection.loop.advanceTime(by: .milliseconds(1))
        #expect(
            try connection.writtenFrames() == [
                .goAway(Frame.GoAway(lastRequestID: 0, code: .helloTimeout, reason: "no HELLO within 2 s"))
            ])
        #expect(!connection.channel.isActive)
    }

    @Test func peerClosingStopsEveryCallInFlight() throws {
        let service = ManualService()
        let connection = try EmbeddedConnection(service: service)
        defer { try? connection.finish(service) }
        _ = try connection.hello()
        try connection.send([ping(1), ping(2)])

        try connection.channel.close().wait()
        #expect(service.calls.count == 2)
        #expect(service.calls.allSatisfy { $0.cancellation.isCancelled }, "nobody is left to read the answers")
        service.succeed(1)
        #expect(try connection.writtenFrames() == [])
    }
}

/// A connection decodes a long pipeline in turns, so the event loop's other connections are read in between.
@Suite struct DecodingTurnTests {
    static func responses(_ frames: [Frame]) -> Int {
        frames.filter { if case .response = $0 { true } else { false } }.count
    }

    @Test func aLongPipelineIsAnsweredInTurnsWithTheLoopsOtherWorkBetween() throws {
        let connection = try EmbeddedConnection(service: NullLiveRelayService())
        _ = try connection.hello()
        try connection.send((1...200).map { ping(RequestID(rawValue: UInt32($0))) })
        // Before the loop runs its queued tasks: the first turn only.
        var flushed: [ByteBuffer] = []
        while let buffer = try connection.channel.readOutbound(as: ByteBuffer.self) { flushed.append(buffer) }
        #expect(Self.responses(try connection.frames(in: flushed)) == RPCConnectionHandler.framesPerTurn)
        // The turns queued behind the loop's other work answer the rest, in order.
        let rest = try connection.writtenFrames()
        #expect(Self.responses(rest) == 200 - RPCConnectionHandler.framesPerTurn)
        if case let .response(id, _) = rest.first { #expect(id == RequestID(rawValue: UInt32(RPCConnectionHandler.framesPerTurn + 1))) }
    }
}
