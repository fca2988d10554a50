import LiveRelayAPNs
import LiveRelayTLS
import NIOCore
import NIOHPACK
import NIOHTTP2

/// A request waiting for, or travelling on, a stream.
struct APNsPendingRequest: Sendable {
    var request: APNsRequest
    var promise: EventLoopPromise<APNsResponse>
}

/// What a connection tells its pool. Called on the connection's event loop.
protocol APNsConnectionDelegate: AnyObject, Sendable {
    func connectionUpdated(_ id: Int, phase: APNsPoolStateMachine<APNsPendingRequest>.ConnectionPhase, streamLimit: Int)
    func connectionClosed(_ id: Int, connectError: String?)
    func requestFinished(on id: Int, result: Result<APNsResponse, APNsTransportError>)
    func bounced(_ pending: APNsPendingRequest, from id: Int)
}

/// The parent-channel handler of one APNs connection, after `NIOHTTP2Handler`:
/// it sees the root-stream frames (SETTINGS, PING, GOAWAY), owns the
/// connection's ``APNsConnectionStateMachine`` and carries out its actions.
/// Bytes and frames only; every decision is the state machine's.
final class APNsConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    struct Stream {
        var pending: APNsPendingRequest
        var generation: Int
        var channel: Channel?
    }

    let id: Int
    private var machine: APNsConnectionStateMachine
    private let authority: String
    private let tokenSource: ProviderTokenSource
    private let delegate: APNsConnectionDelegate
    private let tickInterval: TimeAmount
    private var streams: [APNsConnectionStateMachine.StreamKey: Stream] = [:]
    private var context: ChannelHandlerContext?
    private var multiplexer: NIOHTTP2Handler.StreamMultiplexer?
    private var ticker: RepeatedTask?
    private var lastError: String?
    private var reportedPhase: APNsPoolStateMachine<APNsPendingRequest>.ConnectionPhase = .connecting
    private var closeReported = false

    init(id: Int, timeouts: APNsConnectionStateMachine.Timeouts, tickInterval: TimeAmount, authority: String,
         tokenSource: ProviderTokenSource, delegate: APNsConnectionDelegate) {
        self.id = id
        self.machine = APNsConnectionStateMachine(timeouts: timeouts, now: .now())
        self.authority = authority
        self.tokenSource = tokenSource
        self.delegate = delegate
        self.tickInterval = tickInterval
    }

    func setMultiplexer(_ multiplexer: NIOHTTP2Handler.StreamMultiplexer) { self.multiplexer = multiplexer }

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
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSEvent, case .handshakeCompleted(let negotiated) = event {
            guard negotiated == "h2" else {
                lastError = "ALPN negotiated \(negotiated ?? "nothing"), APNs needs h2"
                context.close(promise: nil)
                return
            }
            run(machine.connected(now: .now()))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let now = NIODeadline.now()
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

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if lastError == nil { lastError = "\(error)" }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ticker?.cancel()
        run(machine.connectionClosed())
        reportClosed()
        context.fireChannelInactive()
    }

    // MARK: Requests

    /// Opens a stream for `pending`, or hands it back to the pool when there is no slot.
    func send(_ pending: APNsPendingRequest) {
        guard let multiplexer, case .opened(let key) = machine.openStream(now: .now()) else {
            delegate.bounced(pending, from: id)
            return
        }
        let token: (token: String, generation: Int)
        do {
            token = try tokenSource.current()
        } catch {
            _ = machine.streamClosed(key, now: .now())
            finish(pending, key: key, .failure(.connectFailed("provider token: \(error)")))
            return
        }
        streams[key] = Stream(pending: pending, generation: token.generation, channel: nil)
        let headers = Self.headers(for: pending.request, authority: authority, bearer: token.token)
        let body = pending.request.payload.bytes
        let loopBound = NIOLoopBound(self, eventLoop: context!.eventLoop)
        multiplexer.createStreamChannel(promise: nil) { channel in
            channel.eventLoop.makeCompletedFuture {
                let handler = loopBound.value
                handler.streams[key]?.channel = channel
                try channel.pipeline.syncOperations.addHandler(
                    APNsStreamHandler(key: key, headers: headers, body: body, connection: handler))
            }
        }
    }

    /// The stream handler got a complete answer, or its stream ended without one.
    func streamEnded(_ key: APNsConnectionStateMachine.StreamKey, _ result: Result<APNsResponse, APNsTransportError>) {
        guard let stream = streams.removeValue(forKey: key) else { return }  // already failed (timeout, GOAWAY)
        let actions = machine.streamClosed(key, now: .now())
        if case .success(let response) = result, response.status == 403, response.reason == "ExpiredProviderToken" {
            // Before the dispatcher sees the answer, so its retry carries the new token.
            tokenSource.reportExpired(generation: stream.generation)
        }
        finish(stream.pending, key: key, result)
        run(actions)
    }

    func streamIDAssigned(_ key: APNsConnectionStateMachine.StreamKey, _ streamID: HTTP2StreamID) {
        machine.streamIDAssigned(key, http2ID: Int(streamID))
    }

    /// Stops taking streams and closes once those in flight are done.
    func closeGracefully() { run(machine.closeRequested()) }

    private func finish(_ pending: APNsPendingRequest, key: Int, _ result: Result<APNsResponse, APNsTransportError>) {
        delegate.requestFinished(on: id, result: result)
        pending.promise.completeWith(result.mapError { $0 as any Error })
    }

    // MARK: Actions

    private func run(_ actions: [APNsConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .failStreams(let keys, let error):
                for key in keys {
                    guard let stream = streams.removeValue(forKey: key) else { continue }
                    stream.channel?.close(promise: nil)  // resets the stream if it is still open
                    finish(stream.pending, key: key, .failure(error))
                }
            case .sendPing(let data):
                context?.writeAndFlush(wrapOutboundOut(HTTP2Frame(
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
        if phase == .draining && reportedPhase == .draining { return }
        reportedPhase = phase
        delegate.connectionUpdated(id, phase: phase, streamLimit: machine.streamLimit)
    }

    private func reportClosed() {
        guard !closeReported else { return }
        closeReported = true
        delegate.connectionClosed(id, connectError: reportedPhase == .connecting ? (lastError ?? "connection closed") : nil)
    }

    /// The request headers of one push. `authorization` is set here, at stream
    /// open, so a queued or retried request always carries the current token.
    static func headers(for request: APNsRequest, authority: String, bearer: String) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(12)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":path", value: request.path)
        headers.add(name: ":authority", value: authority)
        headers.add(name: "authorization", value: "bearer " + bearer)
        for field in request.headers.fields { headers.add(name: field.name, value: field.value) }
        if let apnsID = request.apnsID { headers.add(name: "apns-id", value: apnsID) }
        headers.add(name: "content-length", value: String(request.payload.count))
        return headers
    }
}

/// One push on one HTTP/2 stream: writes HEADERS and DATA, collects the
/// answer, reports it to the connection. Frames only.
final class APNsStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let key: APNsConnectionStateMachine.StreamKey
    private let headers: HPACKHeaders
    private let body: [UInt8]
    private let connection: APNsConnectionHandler
    private var status: Int?
    private var apnsID: String?
    private var responseBody: [UInt8] = []
    private var done = false
    /// RST_STREAM from the server.
    private var resetByPeer: HTTP2ErrorCode?
    /// The reason of the `StreamClosedEvent`; `.cancel` without an RST_STREAM means
    /// nio-http2 dropped the stream because a GOAWAY excluded it.
    private var closedReason: HTTP2ErrorCode?
    /// False until the HEADERS are on their way: a stream whose HEADERS never left was not sent.
    private var headersWritten = false

    init(key: APNsConnectionStateMachine.StreamKey, headers: HPACKHeaders, body: [UInt8], connection: APNsConnectionHandler) {
        self.key = key
        self.headers = headers
        self.body = body
        self.connection = connection
    }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        let connection = self.connection
        let key = self.key
        let headersPromise = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(.headers(.init(headers: headers, endStream: body.isEmpty))), promise: headersPromise)
        if !body.isEmpty {
            let buffer = context.channel.allocator.buffer(bytes: body)
            context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
        }
        context.flush()
        let loopBound = NIOLoopBound((connection, channel), eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        headersPromise.futureResult.whenSuccess {
            let (connection, channel) = loopBound.value
            handler.value.headersWritten = true
            if let streamID = try? channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID) {
                connection.streamIDAssigned(key, streamID)
            }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if status == nil, let text = frame.headers.first(name: ":status") {
                status = Int(text)
                apnsID = frame.headers.first(name: "apns-id")
            }
            if frame.endStream { complete() }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data, responseBody.count + buffer.readableBytes <= 64 * 1024 {
                responseBody.append(contentsOf: buffer.readableBytesView)
            }
            if frame.endStream { complete() }
        case .rstStream(let code):
            resetByPeer = code
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent { closedReason = closed.reason }
        context.fireUserInboundEventTriggered(event)
    }

    /// nio-http2 reports a stream closed by RST_STREAM or by a GOAWAY as this error, just before channelInactive.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let closed = error as? NIOHTTP2Errors.StreamClosed { closedReason = closed.errorCode }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done {
            done = true
            // Not processed, so safe to send elsewhere: REFUSED_STREAM, a GOAWAY that
            // excluded the stream (nio-http2 closes those with CANCEL, no RST_STREAM
            // seen), or HEADERS that never left.
            let unprocessed = resetByPeer == .refusedStream || (resetByPeer == nil && closedReason == .cancel)
                || !headersWritten
            connection.streamEnded(key, .failure(unprocessed ? .refusedByGoAway : .connectionLost))
        }
        context.fireChannelInactive()
    }

    private func complete() {
        guard !done else { return }
        done = true
        guard let status else {
            connection.streamEnded(key, .failure(.malformedResponse("no :status")))
            return
        }
        if let response = APNsResponse(status: status, apnsID: apnsID, body: responseBody) {
            connection.streamEnded(key, .success(response))
        } else {
            connection.streamEnded(key, .failure(.malformedResponse("status \(status) without a JSON reason")))
        }
    }
}
