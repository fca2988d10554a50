import LiveRelayAPNs
import LiveRelayTLS
import NIOCore
import NIOHPACK
import NIOHTTP2

/// A request waiting for, or travelling on, a stream.
///
/// A class, though it is never changed: it is handed on from the pool's lock to
/// its batch, to the connection's loop and into the stream, and a struct of a
/// request (its token, topic, payload, apns-id) and a reply would be copied at
/// each step, with a retain and a release of every one of its references. One
/// allocation per push costs less than those copies.
final class APNsPendingRequest: Sendable {
    /// Who is waiting for the answer.
    enum Reply: Sendable {
        /// One caller of ``APNsConnectionPool/send(_:)``.
        case promise(EventLoopPromise<APNsResponse>)
        /// A sink that takes the answers of one read together (``APNsTransport/send(_:to:)``).
        case sink(any APNsAnswerSink, tag: UInt64)
    }

    let request: APNsRequest
    let reply: Reply

    init(request: APNsRequest, promise: EventLoopPromise<APNsResponse>) {
        self.request = request
        self.reply = .promise(promise)
    }

    init(request: APNsRequest, sink: any APNsAnswerSink, tag: UInt64) {
        self.request = request
        self.reply = .sink(sink, tag: tag)
    }

    /// Answers at once (a request that never reached a connection's reads).
    func complete(_ result: Result<APNsResponse, APNsTransportError>) {
        switch reply {
        case .promise(let promise): promise.completeWith(result.mapError { $0 as any Error })
        case .sink(let sink, let tag): sink.received([APNsAnswer(tag: tag, result: result)])
        }
    }
}

/// What a connection tells its pool. Called on the connection's event loop.
protocol APNsConnectionDelegate: AnyObject, Sendable {
    func connectionUpdated(_ id: Int, phase: APNsPoolStateMachine<APNsPendingRequest>.ConnectionPhase, streamLimit: Int)
    func connectionClosed(_ id: Int, connectError: String?)
    /// Requests of this connection that have their answers (or errors), in the order they finished.
    func requestsFinished(on id: Int, results: [Result<APNsResponse, APNsTransportError>])
    func bounced(_ pending: APNsPendingRequest, from id: Int)
}

/// The handler of one APNs connection, after `NIOHTTP2Handler` in frame mode:
/// it sees every frame (SETTINGS, PING, GOAWAY on the root stream; HEADERS,
/// DATA, RST_STREAM of each push's stream), owns the connection's
/// ``APNsConnectionStateMachine`` and carries out its actions. Bytes and frames
/// only; every decision is the state machine's.
///
/// Why frames and not a child channel per stream: a push is one small request
/// and one small answer, and a stream channel (its pipeline, handlers, promises
/// and activation) cost more CPU than the rest of the push together; measured
/// in docs/BENCHMARKS.md. Stream ids are ours to allocate (odd, increasing in
/// write order); nio-http2 still enforces the protocol on every frame.
final class APNsConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// One push in flight on this connection.
    struct Stream {
        var pending: APNsPendingRequest
        var generation: Int
        var http2ID: HTTP2StreamID
        /// False until the HEADERS reached the socket: a stream whose HEADERS never left was not sent.
        var headersWritten = false
        var status: Int?
        var apnsID: String?
        /// A `retry-after` in delay-seconds; APNs sends none, a proxy in front of it may.
        var retryAfterSeconds: Int?
        var responseBody: [UInt8] = []
        /// `apns-channel-id` of a broadcast's or a management call's answer (never read for a push).
        var channelID: String?
        /// RST_STREAM from the server.
        var resetByPeer: HTTP2ErrorCode?

        /// Keeps up to 64 KiB of the answer's body (APNs's are a short JSON reason); the rest is dropped.
        mutating func append(body buffer: ByteBuffer) {
            guard responseBody.count + buffer.readableBytes <= 64 * 1024 else { return }
            responseBody.append(contentsOf: buffer.readableBytesView)
        }
    }

    let id: Int
    private var machine: APNsConnectionStateMachine
    private let authority: String
    private let tokenSource: ProviderTokenSource
    private let delegate: APNsConnectionDelegate
    private let tickInterval: TimeAmount
    private var streams: [APNsConnectionStateMachine.StreamKey: Stream] = [:]
    private var keysByHTTP2ID: [HTTP2StreamID: APNsConnectionStateMachine.StreamKey] = [:]
    /// The fields every push of a call shares, built once per call and token.
    private var requestHeaders = APNsRequestHeaders()
    /// Client streams are odd; each new one above the last (RFC 9113 §5.1.1).
    private var nextStreamID = 1
    private var context: ChannelHandlerContext?
    private var ticker: RepeatedTask?
    private var lastError: String?
    private var reportedPhase: APNsPoolStateMachine<APNsPendingRequest>.ConnectionPhase = .connecting
    private var reportedLimit = 0
    private var closeReported = false
    /// True between a read and its read-complete: answers finished meanwhile are
    /// held and delivered together at the read's end (one pool step and one
    /// dispatcher step per read, not per push).
    private var reading = false
    private var finished: [Result<APNsResponse, APNsTransportError>] = []
    private var heldAnswers: [(sink: any APNsAnswerSink, answer: APNsAnswer)] = []

    init(
        id: Int, timeouts: APNsConnectionStateMachine.Timeouts, tickInterval: TimeAmount, authority: String,
        tokenSource: ProviderTokenSource, delegate: APNsConnectionDelegate
    ) {
        self.id = id
        self.machine = APNsConnectionStateMachine(timeouts: timeouts, now: .now())
        self.authority = authority
        self.tokenSource = tokenSource
        self.delegate = delegate
        self.tickInterval = tickInterval
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        ticker = context.eventLoop.scheduleRepeatedTask(initialDelay: tickInterval, delay: tickInterval) { _ in
            let handler = loopBound.value
            handler.run(handler.machine.tick(now: .now()))
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        ticker?.cancel()
        self.context = nil
        reading = false
        deliverFinished()
    }

    /// nio-http2 sends five events per push (its stream created, the connection's and
    /// the stream's windows as its DATA leaves, the stream closed, the connection's
    /// window after it). They are told apart by their type before the one cast that
    /// succeeds: a `switch` of `as` patterns makes a failed runtime cast for every
    /// pattern before the match, 8 casts per push. A stream's creation,
    /// which tells this handler nothing (it opened the stream), goes no further.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        let eventType = ObjectIdentifier(type(of: event))
        if eventType == ObjectIdentifier(NIOHTTP2WindowUpdatedEvent.self) {
            windowUpdated(event as! NIOHTTP2WindowUpdatedEvent, context: context)
            return
        }
        if eventType == ObjectIdentifier(StreamClosedEvent.self) {
            let closed = event as! StreamClosedEvent
            streamClosed(closed.streamID, reason: closed.reason)
            return
        }
        if eventType == ObjectIdentifier(NIOHTTP2StreamCreatedEvent.self) { return }
        switch event {
        case let tls as TLSEvent:
            if case .handshakeCompleted(let negotiated) = tls {
                guard negotiated == "h2" else {
                    lastError = "ALPN negotiated \(negotiated ?? "nothing"), APNs needs h2"
                    context.close(promise: nil)
                    return
                }
                run(machine.connected(now: .now()))
            }
            context.fireUserInboundEventTriggered(event)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Each push's stream carries one small answer within its own window; only the
    /// connection's, which every answer body spends, needs giving back.
    private func windowUpdated(_ window: NIOHTTP2WindowUpdatedEvent, context: ChannelHandlerContext) {
        guard window.streamID == .rootStream, let size = window.inboundWindowSize,
            let increment = HTTP2InboundWindow.increment(windowSize: size, target: HTTP2InboundWindow.defaultSize)
        else { return }
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
            promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        let frame = unwrapInboundIn(data)
        let now = NIODeadline.now()
        guard frame.streamID == .rootStream else {
            machine.frameReceived(now: now)
            streamFrame(frame)
            return
        }
        switch frame.payload {
        case .settings(.settings(let settings)):
            let limit = settings.last { $0.parameter == .maxConcurrentStreams }?.value
            run(machine.settingsReceived(maxConcurrentStreams: limit, now: now))
        case .ping(let data, ack: true):
            machine.pingAckReceived(data: data.integer, now: now)
        case .goAway(let lastStreamID, _, _):
            run(machine.goAwayReceived(lastStreamID: Int(lastStreamID), now: now))
        default:
            machine.frameReceived(now: now)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        deliverFinished()
        context.fireChannelReadComplete()
    }

    /// TLS and I/O errors end the connection. HTTP/2 errors do not by themselves:
    /// nio-http2 has already answered them, a stream error with RST_STREAM (a late
    /// frame on a stream we reset must not cost the other pushes in flight) and a
    /// connection error with GOAWAY, after which the server closes the connection
    /// (and the PING and response timeouts cover one that does not).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is any NIOHTTP2Error { return }
        if lastError == nil { lastError = "\(error)" }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ticker?.cancel()
        reading = false
        run(machine.connectionClosed())
        deliverFinished()
        reportClosed()
        context.fireChannelInactive()
    }

    // MARK: Requests

    /// Opens a stream for each, in order, each flushed on its own: nio-http2 sends a
    /// stream's HEADERS at write time but its DATA only at a flush, and then in no
    /// particular order across streams, so one flush for a batch would put every
    /// HEADERS ahead of every DATA. A server that sends GOAWAY in the middle of such a
    /// burst then sees DATA for streams it refused before DATA for streams it kept:
    /// swift-nio-http2 as a server (the mock) took that for a connection error and
    /// dropped the rest of the read, leaving pushes it had promised to answer without
    /// their bodies until they timed out. A flush per push keeps each stream's frames
    /// together, and costs no system call: ``FlushCoalescingHandler`` below makes one
    /// TLS write of each run.
    func send(_ requests: [APNsPendingRequest]) {
        for pending in requests {
            open(pending)
            context?.flush()
        }
    }

    /// Opens a stream for `pending`, or hands it back to the pool when there is no slot.
    /// A request whose send-by time has passed (it waited in the pool's queue, or for
    /// this loop) fails unsent: the last moment before the wire is where "no push is
    /// sent after its expiry" can be kept.
    private func open(_ pending: APNsPendingRequest) {
        if let sendBy = pending.request.sendBy, NIODeadline.now() >= sendBy {
            finish(pending, .failure(.expiredBeforeSending))
            return
        }
        guard let context, nextStreamID <= Int(Int32.max),
            case .opened(let key) = machine.openStream(now: .now())
        else {
            delegate.bounced(pending, from: id)
            if nextStreamID > Int(Int32.max) { closeGracefully() }  // ids spent: a new connection takes over
            return
        }
        let token: (token: String, generation: Int)
        do {
            token = try tokenSource.current()
        } catch {
            _ = machine.streamClosed(key, now: .now())
            finish(pending, .failure(.connectFailed("provider token: \(error)")))
            return
        }
        let http2ID = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        streams[key] = Stream(pending: pending, generation: token.generation, http2ID: http2ID)
        keysByHTTP2ID[http2ID] = key

        let headers = requestHeaders.headers(
            for: pending.request, authority: authority, token: token.token, generation: token.generation)
        // The call's one buffer, shared by every stream of its fan-out (nio-http2 only reads it).
        let body = pending.request.payload.buffer
        let written = context.eventLoop.makePromise(of: Void.self)
        context.write(
            wrapOutboundOut(
                HTTP2Frame(
                    streamID: http2ID, payload: .headers(.init(headers: headers, endStream: body.readableBytes == 0)))), promise: written)
        if body.readableBytes > 0 {
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(
                        streamID: http2ID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        written.futureResult.whenComplete { result in
            let handler = loopBound.value
            switch result {
            case .success:
                guard handler.streams[key] != nil else { return }
                handler.streams[key]!.headersWritten = true
                handler.machine.streamIDAssigned(key, http2ID: Int(http2ID))
            case .failure:
                // nio-http2 refused the stream (a GOAWAY came first, the connection closed): never sent.
                handler.streamEnded(key, .failure(.refusedByGoAway))
            }
        }
    }

    /// A frame of one push's stream. The stream is changed where it is stored and
    /// moved out when it ends: copying it (its request, promise and strings) per
    /// frame would be a visible share of a push's CPU.
    private func streamFrame(_ frame: HTTP2Frame) {
        guard let key = keysByHTTP2ID[frame.streamID], let index = streams.index(forKey: key) else { return }  // failed already
        switch frame.payload {
        case .headers(let headers):
            Self.read(headers.headers, into: &streams.values[index])
            if headers.endStream { complete(at: index) }
        case .data(let data):
            if case .byteBuffer(let buffer) = data.data {
                streams.values[index].append(body: buffer)
            }
            if data.endStream { complete(at: index) }
        case .rstStream(let code):
            streams.values[index].resetByPeer = code
        default:
            break
        }
    }

    /// The fields of an answer's first header block, in one pass (names arrive lowercase, RFC 9113 §8.2.1).
    private static func read(_ headers: HPACKHeaders, into stream: inout Stream) {
        guard stream.status == nil else { return }  // trailers
        let isDevicePush = stream.pending.request.isDevicePush
        for (name, value, _) in headers {
            switch name {
            case ":status": stream.status = Int(value)
            case "apns-id": stream.apnsID = value
            case "retry-after": stream.retryAfterSeconds = APNsResponse.retryAfterSeconds(parsing: value)
            // The channel endpoints name their id header apns-request-id.
            case "apns-request-id" where !isDevicePush: stream.apnsID = stream.apnsID ?? value
            case "apns-channel-id" where !isDevicePush: stream.channelID = value
            default: break
            }
        }
    }

    /// The answer is complete: a response, or a malformed one.
    private func complete(at index: Dictionary<APNsConnectionStateMachine.StreamKey, Stream>.Index) {
        let (key, stream) = streams.remove(at: index)
        guard let status = stream.status else {
            ended(stream, key, .failure(.malformedResponse("no :status")))
            return
        }
        let parsed =
            stream.pending.request.management == nil
            ? APNsResponse(status: status, apnsID: stream.apnsID, body: stream.responseBody)
            : APNsResponse(managementStatus: status, requestID: stream.apnsID, channelID: stream.channelID, body: stream.responseBody)
        if var response = parsed {
            response.retryAfterSeconds = stream.retryAfterSeconds
            ended(stream, key, .success(response))
        } else {
            ended(stream, key, .failure(.malformedResponse("status \(status) without a JSON reason")))
        }
    }

    /// nio-http2 closed a stream: after its answer (nothing left to do), or without one.
    private func streamClosed(_ http2ID: HTTP2StreamID, reason: HTTP2ErrorCode?) {
        guard let key = keysByHTTP2ID.removeValue(forKey: http2ID), let stream = streams[key] else { return }
        // Not processed, so safe to send elsewhere: REFUSED_STREAM, a GOAWAY that excluded
        // the stream (nio-http2 closes those with CANCEL, no RST_STREAM seen), or HEADERS
        // that never left.
        let unprocessed =
            stream.resetByPeer == .refusedStream || (stream.resetByPeer == nil && reason == .cancel)
            || !stream.headersWritten
        streamEnded(key, .failure(unprocessed ? .refusedByGoAway : .connectionLost))
    }

    /// A stream has its answer, or ended without one.
    private func streamEnded(_ key: APNsConnectionStateMachine.StreamKey, _ result: Result<APNsResponse, APNsTransportError>) {
        guard let stream = streams.removeValue(forKey: key) else { return }  // already failed (timeout, GOAWAY)
        ended(stream, key, result)
    }

    /// `stream`, already out of `streams`, is over with `result`.
    private func ended(
        _ stream: Stream, _ key: APNsConnectionStateMachine.StreamKey, _ result: Result<APNsResponse, APNsTransportError>
    ) {
        keysByHTTP2ID[stream.http2ID] = nil
        let actions = machine.streamClosed(key, now: .now())
        if case .success(let response) = result, response.disposition == .refreshProviderTokenAndRetry {
            // Before the dispatcher sees the answer, so its retry carries the new token.
            tokenSource.reportExpired(generation: stream.generation)
        }
        finish(stream.pending, result)
        run(actions)
    }

    /// Stops taking streams and closes once those in flight are done.
    func closeGracefully() { run(machine.closeRequested()) }

    /// A request of this connection is over. Outside a read its answer goes out
    /// at once; inside one, with the read's others at its end.
    private func finish(_ pending: APNsPendingRequest, _ result: Result<APNsResponse, APNsTransportError>) {
        finished.append(result)
        switch pending.reply {
        case .promise(let promise): promise.completeWith(result.mapError { $0 as any Error })
        case .sink(let sink, let tag): heldAnswers.append((sink, APNsAnswer(tag: tag, result: result)))
        }
        if !reading { deliverFinished() }
    }

    /// Tells the pool which requests finished (freeing their slots first, so the
    /// answers' follow-up sends find them), then each sink its answers, in runs.
    private func deliverFinished() {
        if !finished.isEmpty {
            let results = finished
            finished.removeAll(keepingCapacity: true)
            delegate.requestsFinished(on: id, results: results)
        }
        guard !heldAnswers.isEmpty else { return }
        let held = heldAnswers
        heldAnswers.removeAll(keepingCapacity: true)
        var start = 0
        while start < held.count {
            let sink = held[start].sink
            var end = start + 1
            while end < held.count, held[end].sink === sink { end += 1 }
            sink.received(held[start..<end].map(\.answer))
            start = end
        }
    }

    // MARK: Actions

    private func run(_ actions: [APNsConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .failStreams(let keys, let error):
                for key in keys {
                    guard let stream = streams.removeValue(forKey: key) else { continue }
                    keysByHTTP2ID[stream.http2ID] = nil
                    if error == .timedOut, stream.headersWritten {
                        // The server may still answer; tell it not to bother.
                        context?.writeAndFlush(
                            wrapOutboundOut(HTTP2Frame(streamID: stream.http2ID, payload: .rstStream(.cancel))),
                            promise: nil)
                    }
                    finish(stream.pending, .failure(error))
                }
            case .sendPing(let data):
                context?.writeAndFlush(
                    wrapOutboundOut(
                        HTTP2Frame(
                            streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: data), ack: false))), promise: nil)
            case .closeConnection(let reason):
                if lastError == nil, reason == .pingTimeout { lastError = "PING not answered" }
                context?.close(promise: nil)
            case .capacityChanged:
                reportPhase()
            }
        }
        if machine.phase == .draining { reportPhase() }
    }

    private func reportPhase() {
        let phase: APNsPoolStateMachine<APNsPendingRequest>.ConnectionPhase
        switch machine.phase {
        case .connecting: phase = .connecting
        case .ready: phase = .ready
        case .draining: phase = .draining
        case .closed: return
        }
        // A stream's end changes neither (the pool hears of it from `requestsFinished`);
        // telling the pool anyway would cost its lock, twice, per push.
        if phase == reportedPhase && machine.streamLimit == reportedLimit { return }
        reportedPhase = phase
        reportedLimit = machine.streamLimit
        delegate.connectionUpdated(id, phase: phase, streamLimit: machine.streamLimit)
    }

    private func reportClosed() {
        guard !closeReported else { return }
        closeReported = true
        delegate.connectionClosed(id, connectError: reportedPhase == .connecting ? (lastError ?? "connection closed") : nil)
    }
}
