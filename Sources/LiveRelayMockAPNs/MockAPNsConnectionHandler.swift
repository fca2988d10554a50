import LiveRelayAPNs
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Every stream of one connection, after `NIOHTTP2Handler` in frame mode: it sees
/// each `HTTP2Frame`, assembles each stream's request (``MockAPNsStreamRequest``,
/// keyed by stream id), asks the validator and the fault plan for the answer, records
/// it, and writes it as HEADERS (+DATA) frames on that stream id.
///
/// One handler instead of a child channel per stream (the stream multiplexer): a
/// pipeline, a handler and an activation per push cost the mock more than judging the
/// push did, and the mock shares the benchmark's 2 cores with the server it measures.
/// Answers written while reading are flushed once, when the read burst ends.
final class MockAPNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let connection: MockAPNsConnection
    private let connectionWindowTarget: Int
    private let streamWindowTarget: Int
    /// The streams begun and not yet closed by nio-http2 (`StreamClosedEvent`): a
    /// delayed answer is written only while its stream is still here.
    private var streams: [HTTP2StreamID: MockAPNsStreamRequest] = [:]
    private var context: ChannelHandlerContext?
    private var ids = MockAPNsIDs.Generator()
    private var reading = false
    private var unflushed = false

    /// - Parameters:
    ///   - connectionWindowTarget: the connection's inbound window, kept topped up.
    ///   - streamWindowTarget: each stream's inbound window (the advertised initial window size).
    init(connection: MockAPNsConnection, connectionWindowTarget: Int, streamWindowTarget: Int) {
        self.connection = connection
        self.connectionWindowTarget = connectionWindowTarget
        self.streamWindowTarget = streamWindowTarget
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        let frame = unwrapInboundIn(data)
        guard frame.streamID != .rootStream else { return }
        streamFrame(frame.streamID, frame.payload, context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        flushIfNeeded(context: context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            if streams.removeValue(forKey: closed.streamID) != nil { connection.streamEnded() }
        } else if let window = event as? NIOHTTP2WindowUpdatedEvent, let size = window.inboundWindowSize {
            windowChanged(window.streamID, size: size, context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Streams

    private func streamFrame(_ streamID: HTTP2StreamID, _ payload: HTTP2Frame.FramePayload, context: ChannelHandlerContext) {
        guard streams[streamID] != nil || isHeaders(payload) else { return }  // closed already
        let progress = streams[streamID, default: MockAPNsStreamRequest()].receive(payload)
        if progress.began {
            connection.streamBegan(Int(streamID))
            guard streamOpened(streamID) else { return }
        }
        if progress.completed, let request = streams[streamID] { requestComplete(streamID, request, context: context) }
    }

    private func isHeaders(_ payload: HTTP2Frame.FramePayload) -> Bool {
        if case .headers = payload { return true }
        return false
    }

    /// Applies the connection policy to a new stream; false when the connection was dropped.
    private func streamOpened(_ streamID: HTTP2StreamID) -> Bool {
        connection.streamsSeen += 1
        switch connection.shared.policy.action(forStreamNumber: connection.streamsSeen, onConnection: connection.number) {
        case .serve:
            return true
        case .serveThenGoAway:
            connection.goAway(lastStreamID: Int(streamID), reason: "Shutdown")
            return true
        case .drop:
            streams[streamID]?.abandon()
            if let request = streams[streamID] { record(request, streamID: streamID, status: 0, reason: nil, apnsID: nil) }
            connection.drop()
            return false
        }
    }

    private func requestComplete(_ streamID: HTTP2StreamID, _ assembled: MockAPNsStreamRequest, context: ChannelHandlerContext) {
        let shared = connection.shared
        let request = assembled.request
        let now = shared.clock.nowMilliseconds()
        var verdict = shared.validator.validate(
            request, connection: &connection.auth, nowMilliseconds: now, newAPNsID: MockAPNsIDs.randomUUID(using: &ids))
        var isBroadcast = false
        if let operation = verdict.channelOperation {
            if case .broadcast = operation { isBroadcast = true }
            if verdict.status == 200 { verdict.response = shared.answer(operation, apnsID: verdict.apnsID) }
        }
        var delay = Duration.zero
        if shared.faultsActive {
            let sinceStart = ContinuousClock.now - shared.started
            var slow = false
            // Injected errors and outages replace the 200s of pushes and broadcasts; a
            // management call is answered by the registry as it changed it (a create
            // answered 503 after making the channel would leave a channel nobody knows of).
            let injectable = verdict.channelOperation == nil || isBroadcast
            (verdict, delay, slow) = shared.faults.withLockedValue { plan in
                let applied = injectable ? plan.apply(to: verdict, nowMilliseconds: now, sinceStart: sinceStart) : verdict
                let next = plan.nextAnswerDelay()
                return (applied, next.delay, next.slow)
            }
            if slow || verdict.response.retryAfterSeconds != nil {
                let retryAfter = verdict.response.retryAfterSeconds != nil
                shared.recorder.count { counters in
                    if slow { counters.slowAnswers += 1 }
                    if retryAfter { counters.responsesWithRetryAfter += 1 }
                }
            }
        }
        if verdict.providerTokenAccepted { connection.providerTokenAccepted() }
        var fannedOut: [String] = []
        var subscribedTo: String?
        if verdict.status == 200 {
            if isBroadcast, let channelID = verdict.response.channelID {
                fannedOut = shared.channels.subscribers(of: channelID)
            } else if let subscription = verdict.subscription, let path = request.path,
                shared.subscribe(deviceToken: String(path.dropFirst(MockAPNsValidator.devicePathPrefix.count)), subscription)
            {
                subscribedTo = subscription.channelID
            }
        }
        record(
            assembled, streamID: streamID, status: verdict.status, reason: verdict.reason, apnsID: verdict.apnsID,
            channelID: verdict.usesRequestID ? (verdict.response.channelID ?? request.header("apns-channel-id")) : nil,
            fannedOut: fannedOut, subscribedTo: subscribedTo)
        streams[streamID]?.release()

        if delay > .zero {
            let (seconds, attoseconds) = delay.components
            let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) {
                self.respond(streamID, verdict: verdict, context: context)
                self.flushIfNeeded(context: context)
            }
        } else {
            respond(streamID, verdict: verdict, context: context)
        }
    }

    /// Records the stream, or with recording off (``MockAPNsRecorder/keepsRecords``) only
    /// counts it: then nothing of the request is copied.
    private func record(
        _ request: MockAPNsStreamRequest, streamID: HTTP2StreamID, status: Int, reason: String?, apnsID: String?,
        channelID: String? = nil, fannedOut: [String] = [], subscribedTo: String? = nil
    ) {
        let shared = connection.shared
        let now = shared.clock.nowMilliseconds()
        guard shared.recorder.keepsRecords else {
            let expiration = request.headers.first { $0.name == "apns-expiration" }?.value
            shared.recorder.countUnrecorded(
                status: status,
                millisecondsPastExpiration: MockAPNsRecord.millisecondsPastExpiration(expiration, receivedAtMilliseconds: now))
            return
        }
        shared.recorder.record(
            MockAPNsRecord(
                path: request.path ?? "", method: request.method ?? "", headers: request.headers, body: request.body,
                status: status, reason: reason, apnsID: apnsID, connection: connection.number, streamID: Int(streamID),
                receivedAtMilliseconds: now, channelID: channelID, fannedOutTo: fannedOut, subscribedTo: subscribedTo))
    }

    /// Writes the answer on its stream, unless the stream is gone (reset by the client,
    /// or cut off by a GOAWAY) or the connection is. The caller flushes.
    private func respond(_ streamID: HTTP2StreamID, verdict: MockAPNsVerdict, context: ChannelHandlerContext) {
        guard streams[streamID] != nil, context.channel.isActive else { return }
        // The id is new on every answer: indexing it would only churn the HPACK dynamic table
        // (and the encoder's search of it was 6% of the mock's CPU under h2load).
        var fields = HPACKHeaders()
        fields.add(name: ":status", value: String(verdict.status))
        fields.add(name: verdict.usesRequestID ? "apns-request-id" : "apns-id", value: verdict.apnsID, indexing: .nonIndexable)
        switch verdict.channelOperation {
        case .create?, .read?:
            if let channelID = verdict.response.channelID { fields.add(name: "apns-channel-id", value: channelID) }
        default: break
        }
        if let retryAfter = verdict.response.retryAfterSeconds { fields.add(name: "retry-after", value: String(retryAfter)) }
        let body = verdict.responseBody
        if body != nil { fields.add(name: "content-type", value: "application/json; charset=utf-8") }
        unflushed = true
        let headers = HTTP2Frame.FramePayload.headers(.init(headers: fields, endStream: body == nil))
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: headers)), promise: nil)
        if let body {
            let data = HTTP2Frame.FramePayload.data(
                .init(data: .byteBuffer(context.channel.allocator.buffer(bytes: body)), endStream: true))
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: data)), promise: nil)
        }
    }

    // MARK: Flow control and flushing

    /// Tops up an inbound window (the connection's, or a stream's still sending its request).
    private func windowChanged(_ streamID: HTTP2StreamID, size: Int, context: ChannelHandlerContext) {
        let target: Int
        if streamID == .rootStream {
            target = connectionWindowTarget
        } else {
            guard let request = streams[streamID], !request.isComplete else { return }
            target = streamWindowTarget
        }
        guard let increment = HTTP2InboundWindow.increment(windowSize: size, target: target) else { return }
        unflushed = true
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
        // Outside a read burst (a stream closed by a delayed answer) no channelReadComplete will flush it.
        if !reading { flushIfNeeded(context: context) }
    }

    private func flushIfNeeded(context: ChannelHandlerContext) {
        guard unflushed else { return }
        unflushed = false
        context.flush()
    }
}
