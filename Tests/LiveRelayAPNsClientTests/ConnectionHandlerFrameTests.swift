import Foundation
import LiveRelayAPNs
import LiveRelayTLS
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

/// The connection handler in frame mode, on an EmbeddedChannel: frames in, frames out,
/// no nio-http2 and no socket, so each stream path is driven exactly.
@Suite("APNs connection handler: streams as frames")
struct ConnectionHandlerFrameTests {
    let channel = EmbeddedChannel()
    let delegate = RecordingDelegate()
    let handler: APNsConnectionHandler

    init() throws {
        handler = APNsConnectionHandler(
            id: 7, timeouts: .init(), tickInterval: .seconds(3600), authority: "api.push.apple.com",
            tokenSource: ProviderTokenSource(key: PoolIntegrationTests.key), delegate: delegate)
        try channel.pipeline.syncOperations.addHandler(handler)
        channel.pipeline.fireUserInboundEventTriggered(TLSEvent.handshakeCompleted(negotiatedProtocol: "h2"))
        try channel.writeInbound(
            HTTP2Frame(
                streamID: .rootStream,
                payload: .settings(
                    .settings([
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: 10)
                    ]))))
    }

    func send(_ n: Int) -> EventLoopFuture<APNsResponse> {
        let promise = channel.eventLoop.makePromise(of: APNsResponse.self)
        handler.send([APNsPendingRequest(request: PoolIntegrationTests.request(n), promise: promise)])
        channel.embeddedEventLoop.run()
        return promise.futureResult
    }

    func outbound() throws -> [HTTP2Frame] {
        var frames: [HTTP2Frame] = []
        while let frame = try channel.readOutbound(as: HTTP2Frame.self) { frames.append(frame) }
        return frames
    }

    func answer(_ id: HTTP2StreamID, status: String, body: String? = nil) throws {
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: status)
        headers.add(name: "apns-id", value: "11111111-2222-3333-4444-555555555555")
        try channel.writeInbound(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: body == nil))))
        if let body {
            try channel.writeInbound(
                HTTP2Frame(
                    streamID: id,
                    payload: .data(
                        .init(
                            data: .byteBuffer(ByteBuffer(string: body)), endStream: true))))
        }
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
        // The close events nio-http2 sends after an answer change nothing.
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: 1, reason: nil))
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
        try channel.writeInbound(
            HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 4)]))))
        #expect(delegate.lock.withLock { delegate.updates } == ["ready 1", "ready 10", "ready 4"])
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// nio-http2 in frame mode reports the connection's receive window but gives none of it back.
    @Test func theConnectionWindowIsGivenBackOnceHalfIsSpent() throws {
        func windowUpdates(afterRootWindow size: Int, on streamID: HTTP2StreamID = .rootStream) throws -> [Int] {
            channel.pipeline.fireUserInboundEventTriggered(
                NIOHTTP2WindowUpdatedEvent(streamID: streamID, inboundWindowSize: size, outboundWindowSize: 65_535))
            return try outbound().compactMap {
                guard $0.streamID == .rootStream, case .windowUpdate(let increment) = $0.payload else { return nil }
                return increment
            }
        }
        #expect(try windowUpdates(afterRootWindow: 40_000) == [])
        #expect(try windowUpdates(afterRootWindow: 30_000) == [35_535])
        #expect(try windowUpdates(afterRootWindow: 0) == [65_535])
        // A stream's window is not topped up: each carries one small answer.
        #expect(try windowUpdates(afterRootWindow: 0, on: 1) == [])
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
            #expect(shared.map { [$0.name, $0.value, "\($0.indexable)"] } == alone.map { [$0.name, $0.value, "\($0.indexable)"] })
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
        func answerFrame(_ id: HTTP2StreamID, _ status: String) -> HTTP2Frame {
            var headers = HPACKHeaders()
            headers.add(name: ":status", value: status)
            return HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: true)))
        }
        // One read with two answers: held until the read completes.
        channel.pipeline.fireChannelRead(answerFrame(3, "200"))
        channel.pipeline.fireChannelRead(answerFrame(1, "410"))
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
            var headers = HPACKHeaders()
            headers.add(name: ":status", value: "429")
            headers.add(name: "retry-after", value: value)
            try channel.writeInbound(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: false))))
            try channel.writeInbound(
                HTTP2Frame(
                    streamID: id,
                    payload: .data(.init(data: .byteBuffer(ByteBuffer(string: #"{"reason":"TooManyRequests"}"#)), endStream: true))))
        }
        #expect(try result(first)?.get() == APNsResponse(status: 429, reason: "TooManyRequests", retryAfterSeconds: 3))
        #expect(try result(second)?.get() == APNsResponse(status: 429, reason: "TooManyRequests"))
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test func refusedStreamIsUnprocessedButAResetAfterHeadersMayHaveBeenProcessed() throws {
        let refused = send(1), reset = send(2)
        _ = try outbound()
        try channel.writeInbound(HTTP2Frame(streamID: 1, payload: .rstStream(.refusedStream)))
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: 1, reason: .refusedStream))
        try channel.writeInbound(HTTP2Frame(streamID: 3, payload: .rstStream(.internalError)))
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: 3, reason: .internalError))
        #expect(result(refused) == .failure(.refusedByGoAway))
        #expect(result(reset) == .failure(.connectionLost))
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test func goAwayFailsTheStreamsAboveItsLastIDAsUnprocessed() throws {
        let kept = send(1), dropped = send(2)
        _ = try outbound()
        try channel.writeInbound(
            HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(
                    lastStreamID: 1, errorCode: .noError, opaqueData: nil)))
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

    @Test func anHTTP2StreamErrorDoesNotEndTheOtherPushes() throws {
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let inFlight = send(1)
        _ = try outbound()
        // nio-http2 has already reset stream 7 (a late frame, say); the connection stays.
        channel.pipeline.fireErrorCaught(NIOHTTP2Errors.noSuchStream(streamID: 7))
        #expect(channel.isActive)
        try answer(1, status: "200")
        #expect(try result(inFlight)?.get().status == 200)
        // A TLS or I/O error does end it.
        channel.pipeline.fireErrorCaught(TLSError.uncleanShutdown)
        #expect(!channel.isActive)
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
        var indexing: [String: HPACKIndexing] = [:]
        for header in headers { indexing[header.name] = header.indexable }
        #expect(indexing[":path"] == .nonIndexable)
        #expect(indexing["apns-id"] == .nonIndexable)
        for shared in [":authority", "authorization", "apns-topic", "apns-push-type", "apns-priority"] {
            #expect(indexing[shared] == .indexable, "\(shared)")
        }
        #expect(headers.first(name: "apns-id") == "00000010-0000-4002-8000-000000000003")
    }
}
