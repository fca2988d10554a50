import LiveRelayAPNs
import LiveRelayHTTP2
import LiveRelayTLS
import NIOCore

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

/// The handler of one APNs connection, above the TLS handler: it owns the
/// connection's HTTP/2 session (``HTTP2ClientSession``, libnghttp2 with no I/O)
/// and its ``APNsConnectionStateMachine``, feeds the session the server's bytes,
/// writes what the session has to send, and turns the session's events into the
/// state machine's inputs and each push's answer. Bytes and events only; every
/// decision is the state machine's, every frame nghttp2's.
///
/// Streams are opened only when the state machine grants a slot, and their
/// frames are taken from the session at once: no request waits unseen inside
/// nghttp2, so the send-by check and GOAWAY accounting see every one.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// One push in flight on this connection.
    struct Stream {
        var pending: APNsPendingRequest
        var generation: Int
        /// The state machine's name for it.
        var key: APNsConnectionStateMachine.StreamKey
        var status: Int?
        var apnsID: String?
        /// A `retry-after` in delay-seconds; APNs sends none, a proxy in front of it may.
        var retryAfterSeconds: Int?
        var responseBody: [UInt8] = []
        /// `apns-channel-id` of a broadcast's or a management call's answer (never read for a push).
        var channelID: String?

        /// Keeps up to 64 KiB of the answer's body (APNs's are a short JSON reason); the rest is dropped.
        mutating func append(body bytes: [UInt8]) {
            guard responseBody.count + bytes.count <= 64 * 1024 else { return }
            responseBody.append(contentsOf: bytes)
        }

        /// One field of the answer's headers. A final `:status` replaces an informational
        /// one; every other field keeps its first value (trailers add nothing).
        mutating func read(name: String, value: String) {
            let isDevicePush = pending.request.isDevicePush
            switch name {
            case ":status" where status.map({ $0 < 200 }) ?? true: status = Int(value)
            case "apns-id" where apnsID == nil: apnsID = value
            case "retry-after" where retryAfterSeconds == nil:
                retryAfterSeconds = APNsResponse.retryAfterSeconds(parsing: value)
            // The channel endpoints name their id header apns-request-id.
            case "apns-request-id" where !isDevicePush && apnsID == nil: apnsID = value
            case "apns-channel-id" where !isDevicePush && channelID == nil: channelID = value
            default: break
            }
        }
    }

    let id: Int
    private var machine: APNsConnectionStateMachine
    private let session: HTTP2ClientSession
    private let authority: String
    private let tokenSource: ProviderTokenSource
    private let delegate: APNsConnectionDelegate
    private let tickInterval: TimeAmount
    /// By HTTP/2 stream id, which every session event names: one lookup per event.
    private var streams: [Int32: Stream] = [:]
    /// Streams submitted whose HEADERS have not left the session yet, in id order
    /// (nearly always empty: a push's frames are taken as soon as it is submitted).
    private var unsent: [(http2ID: Int32, key: APNsConnectionStateMachine.StreamKey)] = []
    /// The fields every push of a call shares, built once per call and token.
    private var requestHeaders = APNsRequestHeaders()
    /// What the session gave to write and is not yet written: a batch's pushes leave in one write.
    private var output = ByteBuffer()
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
    ) throws {
        self.id = id
        self.machine = APNsConnectionStateMachine(timeouts: timeouts, now: .now())
        self.session = try HTTP2ClientSession()
        self.authority = authority
        self.tokenSource = tokenSource
        self.delegate = delegate
        self.tickInterval = tickInterval
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        output = context.channel.allocator.buffer(capacity: 4096)
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

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSEvent {
            guard negotiated == "h2" else {
                lastError = "ALPN negotiated \(negotiated ?? "nothing"), APNs needs h2"
                context.close(promise: nil)
                return
            }
            // The preface and our SETTINGS.
            writeOutput()
            run(machine.connected(now: .now()))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        do {
            try session.receive(unwrapInboundIn(data))
        } catch {
            fail("\(error)")
            return
        }
        machine.frameReceived(now: .now())
        handleEvents()
        // Acknowledgements, window updates, and a GOAWAY if the server broke the protocol.
        writeOutput()
        if session.isFinished {
            fail("the HTTP/2 session ended")
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        deliverFinished()
        context.fireChannelReadComplete()
    }

    /// TLS and I/O errors end the connection. HTTP/2 errors never arrive here:
    /// nghttp2 answers a stream error with RST_STREAM (the other pushes go on) and a
    /// connection error with GOAWAY, after which the session is finished.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail("\(error)")
    }

    func channelInactive(context: ChannelHandlerContext) {
        ticker?.cancel()
        reading = false
        run(machine.connectionClosed())
        deliverFinished()
        reportClosed()
        context.fireChannelInactive()
    }

    private func fail(_ error: String) {
        if lastError == nil { lastError = error }
        context?.close(promise: nil)
    }

    // MARK: Requests

    /// Opens a stream for each, in order, and writes them in one go: each push's
    /// HEADERS and DATA are taken from the session right after it is submitted, so
    /// a push's frames stay together (a server that sends GOAWAY in the middle of a
    /// burst sees whole requests, never DATA of a stream it refused ahead of one it
    /// kept), and the batch is one write.
    func send(_ requests: [APNsPendingRequest]) {
        for pending in requests {
            open(pending)
        }
        writeOutput()
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
        guard context != nil, case .opened(let key) = machine.openStream(now: .now()) else {
            delegate.bounced(pending, from: id)
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
        let headers = requestHeaders.headers(
            for: pending.request, authority: authority, token: token.token, generation: token.generation)
        let http2ID: Int32
        do {
            // The call's one buffer, shared by every stream of its fan-out (the session only reads it).
            http2ID = try session.submitRequest(headers, body: pending.request.payload.buffer)
        } catch {
            // Stream ids spent, or a GOAWAY already in: never sent, and a new connection takes over.
            run(machine.streamClosed(key, now: .now()))
            delegate.bounced(pending, from: id)
            closeGracefully()
            return
        }
        streams[http2ID] = Stream(pending: pending, generation: token.generation, key: key)
        takeOutput()
        // From the moment its HEADERS leave the session, the server may have it.
        if http2ID <= session.headersSentThrough {
            machine.streamIDAssigned(key, http2ID: Int(http2ID))
        } else {
            unsent.append((http2ID, key))
        }
    }

    /// Moves what the session has to send into `output`, and acts on what that did
    /// (HEADERS sent, streams closed by our resets).
    private func takeOutput() {
        do {
            try session.write(into: &output)
        } catch {
            fail("\(error)")
            return
        }
        if !unsent.isEmpty { markUnsentAsSent() }
        handleEvents()
    }

    /// Streams that waited inside the session and have now been sent. The session
    /// sends a client's HEADERS in stream id order, so one number tells. (The
    /// machine ignores a stream that failed meanwhile.)
    private func markUnsentAsSent() {
        let sentThrough = session.headersSentThrough
        let sent = unsent.prefix { $0.http2ID <= sentThrough }
        for stream in sent { machine.streamIDAssigned(stream.key, http2ID: Int(stream.http2ID)) }
        unsent.removeFirst(sent.count)
    }

    /// Takes the session's output and writes everything held.
    private func writeOutput() {
        takeOutput()
        guard let context, output.readableBytes > 0 else { return }
        let bytes = output
        output = context.channel.allocator.buffer(capacity: 4096)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
    }

    // MARK: Session events

    private func handleEvents() {
        for event in session.takeEvents() {
            switch event {
            case .headerField(let http2ID, let name, let value):
                guard let index = streams.index(forKey: http2ID) else { continue }  // failed already
                streams.values[index].read(name: name, value: value)
            case .data(let http2ID, let bytes):
                guard let index = streams.index(forKey: http2ID) else { continue }
                streams.values[index].append(body: bytes)
            case .endOfStream(let http2ID):
                guard let index = streams.index(forKey: http2ID) else { continue }
                complete(at: index)
            case .streamClosed(let http2ID, let errorCode):
                streamClosed(http2ID, errorCode: errorCode)
            case .settings(let limit):
                run(machine.settingsReceived(maxConcurrentStreams: limit, now: .now()))
            case .pingAcknowledged(let data):
                machine.pingAckReceived(data: data, now: .now())
            case .goAway(let lastStreamID, _):
                run(machine.goAwayReceived(lastStreamID: Int(lastStreamID), now: .now()))
            }
        }
    }

    /// The answer is complete: a response, or a malformed one. The stream is moved
    /// out, not copied (its request, promise and strings), once, when it ends.
    private func complete(at index: Dictionary<Int32, Stream>.Index) {
        let stream = streams.remove(at: index).value
        guard let status = stream.status else {
            ended(stream, .failure(.malformedResponse("no :status")))
            return
        }
        let parsed =
            stream.pending.request.management == nil
            ? APNsResponse(status: status, apnsID: stream.apnsID, body: stream.responseBody)
            : APNsResponse(managementStatus: status, requestID: stream.apnsID, channelID: stream.channelID, body: stream.responseBody)
        if var response = parsed {
            response.retryAfterSeconds = stream.retryAfterSeconds
            ended(stream, .success(response))
        } else {
            ended(stream, .failure(.malformedResponse("status \(status) without a JSON reason")))
        }
    }

    /// The session closed a stream: after its answer (nothing left to do), or without one.
    private func streamClosed(_ http2ID: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: http2ID) else { return }  // answered or failed already
        // Not processed, so safe to send elsewhere: REFUSED_STREAM (a reset, or a GOAWAY
        // that left the stream out), or HEADERS that never left.
        let unprocessed = errorCode == Self.refusedStream || !machine.isSent(stream.key)
        ended(stream, .failure(unprocessed ? .refusedByGoAway : .connectionLost))
    }

    /// RFC 9113 §7: REFUSED_STREAM, "the stream was not processed".
    private static let refusedStream: UInt32 = 0x7

    /// `stream`, already out of `streams`, is over with `result`.
    private func ended(_ stream: Stream, _ result: Result<APNsResponse, APNsTransportError>) {
        let actions = machine.streamClosed(stream.key, now: .now())
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
                // The machine names streams by its keys; these are few (timeouts, a GOAWAY, a close).
                let failing = Set(keys)
                for (http2ID, stream) in streams where failing.contains(stream.key) {
                    streams[http2ID] = nil
                    // The server may still answer; tell it not to bother.
                    if error == .timedOut { session.resetStream(http2ID) }
                    finish(stream.pending, .failure(error))
                }
                writeOutput()
            case .sendPing(let data):
                do {
                    try session.submitPing(data)
                    writeOutput()
                } catch {
                    fail("\(error)")
                }
            case .closeConnection(let reason):
                switch reason {
                case .goAwayDrained, .closedByUser:
                    // Our GOAWAY first: the server learns we are done rather than seeing the connection drop.
                    session.terminate()
                    writeOutput()
                case .pingTimeout:
                    if lastError == nil { lastError = "PING not answered" }
                case .connectionLost:
                    break
                }
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
