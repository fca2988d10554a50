import Foundation
import LiveRelayAPNs
import LiveRelayHTTP2
import LiveRelayTLS
import LiveRelayTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import LiveRelayAPNsClient

/// What the handler told its pool.
final class RecordingDelegate: APNsConnectionDelegate, @unchecked Sendable {
    let lock = NIOLock()
    var bounced: [APNsPendingRequest] = []
    var closed = false
    var updates: [String] = []
    func connectionUpdated(_ id: Int, phase: APNsPoolStateMachine<APNsPendingRequest>.ConnectionPhase, streamLimit: Int) {
        lock.withLock { updates.append("\(phase) \(streamLimit)") }
    }
    func connectionClosed(_ id: Int, connectError: String?) { lock.withLock { closed = true } }
    var finished = 0
    func requestsFinished(on id: Int, results: [Result<APNsResponse, APNsTransportError>]) {
        lock.withLock { finished += results.count }
    }
    func bounced(_ pending: APNsPendingRequest, from id: Int) { lock.withLock { bounced.append(pending) } }
}

/// The connection handler on an EmbeddedChannel with swift-nio-http2 as the server
/// (``HTTP2ServerPeer``): the handler's bytes go to an independent HTTP/2
/// implementation and its frames come back as bytes, so each stream path is
/// driven exactly, without a socket or TLS.
@Suite("APNs connection handler: streams against nio-http2")
struct ConnectionHandlerTests {
    let channel = EmbeddedChannel()
    let delegate = RecordingDelegate()
    let handler: APNsConnectionHandler
    let server: HTTP2ServerPeer

    init() throws {
        try self.init(timeouts: .init(), tickInterval: .seconds(3600))
    }

    init(timeouts: APNsConnectionStateMachine.Timeouts, tickInterval: TimeAmount) throws {
        handler = try APNsConnectionHandler(
            id: 7, timeouts: timeouts, tickInterval: tickInterval, authority: "api.push.apple.com",
            tokenSource: ProviderTokenSource(key: PoolIntegrationTests.key), delegate: delegate)
        server = try HTTP2ServerPeer(settings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: 10)])
        try channel.pipeline.syncOperations.addHandler(handler)
        channel.pipeline.fireUserInboundEventTriggered(TLSEvent.handshakeCompleted(negotiatedProtocol: "h2"))
        // Preface and SETTINGS both ways.
        _ = try serverFrames()
        try fromServer([])
        _ = try serverFrames()
    }

    func send(_ n: Int) -> EventLoopFuture<APNsResponse> {
        let promise = channel.eventLoop.makePromise(of: APNsResponse.self)
        handler.send([APNsPendingRequest(request: PoolIntegrationTests.request(n), promise: promise)])
        channel.embeddedEventLoop.run()
        return promise.futureResult
    }

    /// Every frame the handler wrote since the last call, as the server decoded it.
    func serverFrames() throws -> [HTTP2Frame] {
        var bytes = ByteBuffer()
        while var chunk = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&chunk) }
        return try server.receive(bytes)
    }

    /// The frames of push streams (not the connection's own).
    func outbound() throws -> [HTTP2Frame] {
        try serverFrames().filter { $0.streamID != .rootStream }
    }

    /// The server writes `frames`; the handler reads them in one read.
    func fromServer(_ frames: [HTTP2Frame]) throws {
        try channel.writeInbound(try server.send(frames))
    }

    func answer(_ id: HTTP2StreamID, status: String, body: String? = nil) throws {
        try fromServer(
            HTTP2ServerPeer.answer(id, status: status, fields: [("apns-id", "11111111-2222-3333-4444-555555555555")], body: body))
    }

    func result(_ future: EventLoopFuture<APNsResponse>) -> Result<APNsResponse, APNsTransportError>? {
        var outcome: Result<APNsResponse, APNsTransportError>?
        future.whenComplete { outcome = $0.mapError { $0 as? APNsTransportError ?? .malformedResponse("\($0)") } }
        channel.embeddedEventLoop.run()
        return outcome
    }

    @Test func eachPushIsHeadersAndDataOnTheNextOddStreamAndItsAnswerCompletesIt() throws {
        let first = send(1), second = send(2)
        let frames = try outbound()
        #expect(frames.map(\.streamID) == [1, 1, 3, 3])
        guard case .headers(let headers) = frames[0].payload, case .data(let data) = frames[1].payload else {
            Issue.record("expected HEADERS then DATA, got \(frames.map(\.payload))")
            return
        }
        #expect(headers.headers.first(name: ":path") == "/3/device/" + PoolIntegrationTests.request(1).deviceToken)
        #expect(headers.headers.first(name: "authorization")?.hasPrefix("bearer ") == true)
        #expect(!headers.endStream && data.endStream)
        // Answers may come in any order.
        try answer(3, status: "400", body: #"{"reason":"BadDeviceToken"}"#)
        try answer(1, status: "200")
        #expect(try result(first)?.get() == APNsResponse(status: 200, apnsID: "11111111-2222-3333-4444-555555555555"))
        #expect(try result(second)?.get().reason == "BadDeviceToken")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// A batch leaves in one write, each push's HEADERS and DATA side by side.
    @Test func aBatchIsOneWriteWithEachPushsFramesTogether() throws {
        let promises = (1...3).map { _ in channel.eventLoop.makePromise(of: APNsResponse.self) }
        handler.send(zip(1...3, promises).map { APNsPendingRequest(request: PoolIntegrationTests.request($0), promise: $1) })
        var writes = 0
        var bytes = ByteBuffer()
        while var chunk = try channel.readOutbound(as: ByteBuffer.self) {
            writes += 1
            bytes.writeBuffer(&chunk)
        }
        #expect(writes == 1)
        let frames = try server.receive(bytes)
        #expect(frames.map(\.streamID) == [1, 1, 3, 3, 5, 5])
        for promise in promises { promise.fail(APNsTransportError.shutDown) }
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// The pool hears of a phase or a limit that changed, not of every stream's end
    /// (it counts those from `requestsFinished`).
    @Test func thePoolIsToldOfChangesNotOfEachStreamsEnd() throws {
        #expect(delegate.lock.withLock { delegate.updates } == ["ready 1", "ready 10"])
        let futures = (1...3).map { send($0) }
        _ = try outbound()
        for id in [1, 3, 5] { try answer(HTTP2StreamID(id), status: "200") }
        for future in futures { #expect(try result(future)?.get().status == 200) }
        #expect(delegate.lock.withLock { (delegate.updates, delegate.finished) } == (["ready 1", "ready 10"], 3))
        try fromServer([
            HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 4)])))
        ])
        #expect(delegate.lock.withLock { delegate.updates } == ["ready 1", "ready 10", "ready 4"])
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// The server lowers its stream limit below the streams in flight: they all
    /// finish, new pushes go back to the pool until the count is under the new
    /// limit, and then streams open again.
    @Test func aLowerStreamLimitWhileStreamsAreOpenHoldsNewOnesUntilTheyFinish() throws {
        let inFlight = (1...3).map { send($0) }
        #expect(try outbound().count == 6)
        try fromServer([
            HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 2)])))
        ])
        #expect(delegate.lock.withLock { delegate.updates.last } == "ready 2")
        _ = send(4)
        #expect(delegate.lock.withLock { delegate.bounced.count } == 1)
        #expect(try outbound().isEmpty)
        try answer(1, status: "200")
        try answer(3, status: "200")
        // One stream left of three: under the limit of 2 again.
        let next = send(5)
        #expect(try outbound().map(\.streamID) == [7, 7])
        try answer(5, status: "200")
        try answer(7, status: "200")
        for future in inFlight + [next] { #expect(try result(future)?.get().status == 200) }
        delegate.lock.withLock { delegate.bounced }.first?.complete(.failure(.shutDown))
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// Answers whose bodies add up to more than the connection's 1 MiB window all
    /// arrive: the session gives the window back as the handler reads them.
    @Test func answersBeyondTheConnectionWindowAllArrive() throws {
        let body = #"{"reason":""# + String(repeating: "x", count: 60_000) + #""}"#
        var statuses: [Int] = []
        for round in 0..<3 {
            let futures = (0..<10).map { send(round * 10 + $0) }
            let ids = try outbound().map(\.streamID).reduce(into: [HTTP2StreamID]()) { if $0.last != $1 { $0.append($1) } }
            #expect(ids.count == 10)
            try fromServer(ids.flatMap { HTTP2ServerPeer.answer($0, status: "400", body: body) })
            // The handler's WINDOW_UPDATEs reach the server, which then sends what it held.
            for _ in 0..<3 {
                _ = try serverFrames()
                try fromServer([])
            }
            statuses += futures.compactMap { try? result($0)?.get().status }
        }
        #expect(statuses == Array(repeating: 400, count: 30))
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// The shared fields are reused only while the call, the token generation and the
    /// body's length stay the same; whatever changes, the result is the one built from scratch.
    @Test func sharedHeaderFieldsEqualTheOnesBuiltForEachPush() {
        var builder = APNsRequestHeaders()
        func request(_ n: Int, bundle: String = "com.example.app", priority: Int = 10, body: String = "{}") -> APNsRequest {
            APNsRequest(
                deviceToken: String(repeating: "ab", count: 31) + String(format: "%02x", n),
                headers: APNsHeaders(bundleID: bundle, priority: priority, expiration: Int64(n < 4 ? 0 : 1_700_000_000)),
                payload: APNsPayload(bytes: Array(body.utf8)),
                apnsID: n == 2 ? nil : APNsCallID(instance: 1, call: 2).apnsID(push: UInt64(n)))
        }
        let sequence: [(APNsRequest, token: String, generation: Int)] = [
            (request(0), "t1", 1), (request(1), "t1", 1), (request(2), "t1", 1), (request(3), "t2", 2),
            (request(4), "t2", 2), (request(5, priority: 5), "t2", 2), (request(6, bundle: "com.example.other"), "t2", 2),
            (request(7, body: #"{"aps":{}}"#), "t2", 2), (request(8, body: #"{"aps":{}}"#), "t3", 3),
        ]
        for (request, token, generation) in sequence {
            let shared = builder.headers(for: request, authority: "api.push.apple.com", token: token, generation: generation)
            let alone = APNsRequestHeaders.headers(for: request, authority: "api.push.apple.com", bearer: token)
            #expect(
                shared.entries.map { [$0.name, $0.value, "\($0.indexable)"] }
                    == alone.entries.map { [$0.name, $0.value, "\($0.indexable)"] })
        }
    }

    /// The answers of one read reach a sink in one call at the read's end, after the
    /// pool heard the requests finished (so the slots they free are free by then).
    @Test func answersOfOneReadReachTheSinkTogether() throws {
        final class Sink: APNsAnswerSink, @unchecked Sendable {
            var calls: [[APNsAnswer]] = []
            var finishedBefore: [Int] = []
            let delegate: RecordingDelegate
            init(delegate: RecordingDelegate) { self.delegate = delegate }
            func received(_ answers: [APNsAnswer]) {
                calls.append(answers)
                finishedBefore.append(delegate.lock.withLock { delegate.finished })
            }
        }
        let sink = Sink(delegate: delegate)
        handler.send((1...3).map { APNsPendingRequest(request: PoolIntegrationTests.request($0), sink: sink, tag: UInt64(100 + $0)) })
        channel.embeddedEventLoop.run()
        #expect(try outbound().map(\.streamID) == [1, 1, 3, 3, 5, 5])
        // One read with two answers: held until the read completes.
        channel.pipeline.fireChannelRead(
            try server.send(HTTP2ServerPeer.answer(3, status: "200") + HTTP2ServerPeer.answer(1, status: "410")))
        #expect(sink.calls.isEmpty)
        channel.pipeline.fireChannelReadComplete()
        #expect(sink.calls.map { $0.map(\.tag) } == [[102, 101]])
        #expect(sink.finishedBefore == [2])
        // An answer outside a read (a timeout, a closed connection) goes at once.
        channel.pipeline.fireChannelInactive()
        #expect(sink.calls.count == 2)
        #expect(sink.calls.last?.map(\.tag) == [103])
        #expect(sink.calls.last?.first.map { $0.result == .failure(.connectionLost) } == true)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test func aRequestPastItsSendByTimeFailsWithoutAFrameOnTheWire() throws {
        var late = PoolIntegrationTests.request(1)
        late.sendBy = .now() - .milliseconds(1)
        let promise = channel.eventLoop.makePromise(of: APNsResponse.self)
        handler.send([APNsPendingRequest(request: late, promise: promise)])
        channel.embeddedEventLoop.run()
        #expect(result(promise.futureResult) == .failure(.expiredBeforeSending))
        #expect(try outbound().isEmpty)
        // One in time still goes, on the first stream id: the late one took none.
        var inTime = PoolIntegrationTests.request(2)
        inTime.sendBy = .now() + .seconds(60)
        let sent = channel.eventLoop.makePromise(of: APNsResponse.self)
        handler.send([APNsPendingRequest(request: inTime, promise: sent)])
        channel.embeddedEventLoop.run()
        #expect(try outbound().map(\.streamID) == [1, 1])
        _ = try channel.finish(acceptAlreadyClosed: true)
        sent.fail(APNsTransportError.shutDown)
    }

    @Test func aRetryAfterHeaderReachesTheResponseAndAnHTTPDateIsIgnored() throws {
        let first = send(1), second = send(2)
        _ = try outbound()
        for (id, value) in [(HTTP2StreamID(1), "3"), (HTTP2StreamID(3), "Wed, 21 Oct 2015 07:28:00 GMT")] {
            try fromServer(
                HTTP2ServerPeer.answer(id, status: "429", fields: [("retry-after", value)], body: #"{"reason":"TooManyRequests"}"#))
        }
        #expect(try result(first)?.get() == APNsResponse(status: 429, reason: "TooManyRequests", retryAfterSeconds: 3))
        #expect(try result(second)?.get() == APNsResponse(status: 429, reason: "TooManyRequests"))
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test func refusedStreamIsUnprocessedButAResetAfterHeadersMayHaveBeenProcessed() throws {
        let refused = send(1), reset = send(2)
        _ = try outbound()
        try fromServer([
            HTTP2Frame(streamID: 1, payload: .rstStream(.refusedStream)), HTTP2Frame(streamID: 3, payload: .rstStream(.internalError)),
        ])
        #expect(result(refused) == .failure(.refusedByGoAway))
        #expect(result(reset) == .failure(.connectionLost))
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test func goAwayFailsTheStreamsAboveItsLastIDAsUnprocessed() throws {
        let kept = send(1), dropped = send(2)
        _ = try outbound()
        try fromServer([HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: 1, errorCode: .noError, opaqueData: nil))])
        #expect(result(dropped) == .failure(.refusedByGoAway))
        #expect(result(kept) == nil, "stream 1 may still be answered")
        try answer(1, status: "200")
        #expect(try result(kept)?.get().status == 200)
        // A new request after GOAWAY goes back to the pool instead of opening a stream.
        _ = send(3)
        let bounced = delegate.lock.withLock { delegate.bounced }
        #expect(bounced.count == 1)
        #expect(try outbound().isEmpty)
        bounced.first?.complete(.failure(.shutDown))  // the pool's to finish; here, the test's
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// A malformed answer is a stream error: that stream is reset, the others go on.
    @Test func anHTTP2StreamErrorDoesNotEndTheOtherPushes() throws {
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let malformed = send(1), inFlight = send(2)
        _ = try outbound()
        // HEADERS on stream 1 with `:status` twice (HPACK static entries 8 and 8): malformed (RFC 9113 §8.1.1).
        try channel.writeInbound(ByteBuffer(bytes: [0, 0, 2, 0x1, 0x5, 0, 0, 0, 1, 0x88, 0x88]))
        #expect(
            try serverFrames().contains {
                $0.streamID == 1 && { if case .rstStream(.protocolError) = $0.payload { return true } else { return false } }($0)
            })
        #expect(result(malformed) == .failure(.connectionLost))
        #expect(channel.isActive)
        try answer(3, status: "200")
        #expect(try result(inFlight)?.get().status == 200)
        // A TLS or I/O error does end it.
        channel.pipeline.fireErrorCaught(TLSError.uncleanShutdown)
        #expect(!channel.isActive)
    }

    /// Bytes that are not HTTP/2 end the connection: a GOAWAY, then the close, and
    /// the pushes in flight fail as lost (the server may have had them).
    @Test func aServerProtocolErrorEndsTheConnectionWithGoAway() throws {
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let inFlight = send(1)
        _ = try outbound()
        // DATA on stream 0: a connection error (RFC 9113 §6.1).
        try channel.writeInbound(ByteBuffer(bytes: [0, 0, 1, 0, 0, 0, 0, 0, 0, 0x41]))
        #expect(try serverFrames().contains { if case .goAway(_, .protocolError, _) = $0.payload { return true } else { return false } })
        #expect(!channel.isActive)
        #expect(result(inFlight) == .failure(.connectionLost))
    }

    /// A push unanswered past its timeout fails, and the server is told to drop it.
    @Test func aTimedOutPushIsResetAndFails() throws {
        let timing = try ConnectionHandlerTests(timeouts: .init(responseTimeout: .milliseconds(1)), tickInterval: .seconds(1))
        let late = timing.send(1)
        _ = try timing.outbound()
        Thread.sleep(forTimeInterval: 0.01)
        timing.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(timing.result(late) == .failure(.timedOut))
        #expect(
            try timing.outbound().contains { if case .rstStream(.cancel) = $0.payload { return $0.streamID == 1 } else { return false } })
        _ = try timing.channel.finish(acceptAlreadyClosed: true)
    }

    /// An idle connection is pinged; nio-http2's acknowledgement keeps it, silence closes it.
    @Test func anIdleConnectionIsPingedAndClosedWhenTheAckDoesNotCome() throws {
        func pings(_ frames: [HTTP2Frame]) -> [UInt64] {
            frames.compactMap { if case .ping(let data, ack: false) = $0.payload { return data.integer } else { return nil } }
        }
        let answered = try ConnectionHandlerTests(
            timeouts: .init(idlePingInterval: .milliseconds(1), pingTimeout: .milliseconds(5)), tickInterval: .seconds(1))
        try answered.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        Thread.sleep(forTimeInterval: 0.01)
        answered.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(pings(try answered.serverFrames()).count == 1)
        try answered.fromServer([])  // the acknowledgement
        // Past the PING timeout: acknowledged, so the next tick pings again rather than closing.
        Thread.sleep(forTimeInterval: 0.01)
        answered.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(answered.channel.isActive)
        #expect(pings(try answered.serverFrames()).count == 1)

        let silent = try ConnectionHandlerTests(
            timeouts: .init(idlePingInterval: .milliseconds(1), pingTimeout: .milliseconds(1)), tickInterval: .seconds(1))
        try silent.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        Thread.sleep(forTimeInterval: 0.01)
        silent.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(pings(try silent.serverFrames()).count == 1)
        Thread.sleep(forTimeInterval: 0.01)
        silent.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!silent.channel.isActive)
        #expect(silent.delegate.lock.withLock { silent.delegate.closed })
    }

    @Test func connectionLossFailsWhatWasWrittenAsLost() throws {
        let inFlight = send(1)
        _ = try outbound()
        channel.pipeline.fireChannelInactive()
        #expect(result(inFlight) == .failure(.connectionLost))
        #expect(delegate.lock.withLock { delegate.closed })
    }
}

@Suite struct RequestHeaderTests {
    /// The headers every push shares go into HPACK's dynamic table; the ones
    /// unique to a push (its token's path, its apns-id) must not, or each push
    /// would evict the shared ones and send them in full again.
    @Test func valuesUniqueToOnePushAreNotIndexed() {
        let request = APNsRequest(
            deviceToken: String(repeating: "ab", count: 32),
            headers: APNsHeaders(bundleID: "com.example.app", expiration: 0),
            payload: APNsPayload(bytes: Array(#"{"aps":{"timestamp":1,"event":"update"}}"#.utf8)),
            apnsID: APNsCallID(instance: 1, call: 2).apnsID(push: 3))
        let headers = APNsRequestHeaders.headers(for: request, authority: "api.push.apple.com", bearer: "token")
        var indexing: [String: Bool] = [:]
        for header in headers.entries { indexing[header.name] = header.indexable }
        #expect(indexing[":path"] == false)
        #expect(indexing["apns-id"] == false)
        for shared in [":authority", "authorization", "apns-topic", "apns-push-type", "apns-priority"] {
            #expect(indexing[shared] == true, "\(shared)")
        }
        #expect(headers.first(name: "apns-id") == "00000010-0000-4002-8000-000000000003")
    }
}
