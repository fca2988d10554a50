import LiveRelayAPNs
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What every connection of one server shares: the rules, the faults, the log.
final class MockAPNsShared: Sendable {
    let validator: MockAPNsValidator
    let recorder: MockAPNsRecorder
    let faults: NIOLockedValueBox<MockAPNsFaultPlan>
    let faultsActive: Bool
    let policy: MockAPNsConnectionPolicy
    let clock: MockAPNsClock
    let maxConcurrentStreams: Int
    let limitStreamsUntilAuthenticated: Bool
    /// Broadcast channels and their subscribers.
    let channels: MockAPNsChannelStore
    let environment: APNsEnvironment
    let maxChannelsPerApp: Int
    /// When the server started, on the monotonic clock: outages are placed from it.
    let started = ContinuousClock.now
    private let connectionNumbers = NIOLockedValueBox(0)
    /// Open connections, for shutdown: each entry starts that connection's drain on its own event loop.
    let connections = NIOLockedValueBox<[Int: (channel: Channel, drain: @Sendable () -> Void)]>([:])

    init(configuration: MockAPNsConfiguration, validator: MockAPNsValidator, recorder: MockAPNsRecorder) {
        self.validator = validator
        self.recorder = recorder
        let plan = MockAPNsFaultPlan(
            injectedErrors: configuration.injectedErrors, latency: configuration.latency, outages: configuration.outages,
            seed: configuration.randomSeed)
        self.faultsActive = plan.injects || plan.hasLatency
        self.faults = NIOLockedValueBox(plan)
        self.policy = MockAPNsConnectionPolicy(
            goAwayAfterStreams: configuration.goAwayAfterStreams,
            dropConnectionAfterStreams: configuration.dropConnectionAfterStreams,
            alternate: configuration.alternateConnectionFaults)
        self.clock = configuration.clock
        self.maxConcurrentStreams = max(1, configuration.maxConcurrentStreams)
        self.limitStreamsUntilAuthenticated = configuration.limitStreamsUntilAuthenticated
        self.channels = configuration.channelStore ?? MockAPNsChannelStore()
        self.environment = configuration.environment
        self.maxChannelsPerApp = max(0, configuration.maxChannelsPerApp)
    }

    func nextConnectionNumber() -> Int {
        connectionNumbers.withLockedValue {
            $0 += 1; return $0
        }
    }

    /// The registry's answer to a channel request that passed the validator.
    func answer(_ operation: MockAPNsChannelOperation, apnsID: String) -> APNsResponse {
        let outcome = channels.withRegistry {
            $0.apply(
                operation, environment: environment, maxChannelsPerApp: maxChannelsPerApp,
                newChannelID: MockAPNsChannelStore.randomChannelID)
        }
        var response = APNsResponse(status: outcome.status, reason: outcome.reason, apnsID: apnsID)
        response.channelID = outcome.channelID
        response.body = outcome.body
        return response
    }

    /// Subscribes the token of an accepted push-to-start; false when its channel is unknown here.
    func subscribe(deviceToken: String, _ subscription: MockAPNsSubscription) -> Bool {
        channels.withRegistry {
            $0.subscribe(deviceToken: deviceToken, to: subscription.channelID, bundleID: subscription.bundleID, environment: environment)
        }
    }

    /// The SETTINGS_MAX_CONCURRENT_STREAMS a new connection advertises.
    var initialStreamLimit: Int { limitStreamsUntilAuthenticated ? 1 : maxConcurrentStreams }
}

/// One TCP connection: the per-connection APNs state and the connection-level
/// faults. Lives on the connection's event loop; its stream channels share it.
final class MockAPNsConnection {
    let number: Int
    let shared: MockAPNsShared
    let channel: Channel
    let closer: MockAPNsAbruptCloser
    var auth = MockAPNsConnectionState()
    var streamsSeen = 0
    var openStreams = 0
    var peakOpenStreams = 0
    var highestStreamID = 0
    var draining = false
    var streamLimitRaised = false

    init(number: Int, shared: MockAPNsShared, channel: Channel, closer: MockAPNsAbruptCloser) {
        self.number = number
        self.shared = shared
        self.channel = channel
        self.closer = closer
    }

    /// GOAWAY naming `lastStreamID` as the last stream processed; the connection
    /// closes once the streams up to it are answered.
    func goAway(lastStreamID: Int, reason: String) {
        guard !draining else { return }
        draining = true
        shared.recorder.count { $0.goAwaysSent += 1 }
        let data = channel.allocator.buffer(string: "{\"reason\":" + jsonQuoted(reason) + "}")
        let frame = HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(lastStreamID: HTTP2StreamID(lastStreamID), errorCode: .noError, opaqueData: data))
        channel.writeAndFlush(frame, promise: nil)
        closeIfDrained()
    }

    /// Shutdown: GOAWAY, let what is in flight finish, close (bounded by `deadline`).
    func drain(deadline: TimeAmount) {
        goAway(lastStreamID: highestStreamID, reason: "Shutdown")
        let channel = self.channel
        channel.eventLoop.scheduleTask(in: deadline) { channel.close(promise: nil) }
    }

    /// The close waits a loop turn: a stream closes as its last frame is written,
    /// before the flush that sends it, and closing at once would discard that frame.
    func closeIfDrained() {
        guard draining, openStreams == 0 else { return }
        let channel = self.channel
        channel.eventLoop.execute { channel.close(promise: nil) }
    }

    func drop() {
        shared.recorder.count { $0.connectionsDropped += 1 }
        closer.closeAbruptly()
    }

    /// APNs allows one stream until it has seen a valid provider token; then it raises the limit.
    func providerTokenAccepted() {
        guard shared.limitStreamsUntilAuthenticated, !streamLimitRaised else { return }
        streamLimitRaised = true
        let settings = HTTP2Frame(
            streamID: .rootStream,
            payload: .settings(
                .settings([
                    HTTP2Setting(parameter: .maxConcurrentStreams, value: shared.maxConcurrentStreams)
                ])))
        channel.writeAndFlush(settings, promise: nil)
    }
}

/// Sits nearest the socket so a drop can close beneath TLS and HTTP/2: no
/// close_notify, no GOAWAY, and an RST (SO_LINGER 0), like a peer that vanished.
final class MockAPNsAbruptCloser: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func closeAbruptly() {
        guard let context else { return }
        guard let provider = context.channel as? SocketOptionProvider else {
            context.close(mode: .all, promise: nil)
            return
        }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
            bound.value.context?.close(mode: .all, promise: nil)
        }
    }
}

/// One HTTP/2 stream: collects the request, asks the validator and the fault
/// plan for the answer, records it, and writes it (after the configured delay).
final class MockAPNsStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let connection: MockAPNsConnection
    private var method: String?
    private var path: String?
    private var headers: [(name: String, value: String)] = []
    private var body: [UInt8] = []
    private var sawHeaders = false
    private var complete = false
    private var streamID = 0

    init(connection: MockAPNsConnection) { self.connection = connection }

    func handlerAdded(context: ChannelHandlerContext) {
        connection.openStreams += 1
        if connection.openStreams > connection.peakOpenStreams {
            connection.peakOpenStreams = connection.openStreams
            let peak = connection.peakOpenStreams
            connection.shared.recorder.count { $0.peakConcurrentStreams = max($0.peakConcurrentStreams, peak) }
        }
        streamID = (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)).map { Int($0) } ?? 0
        connection.highestStreamID = max(connection.highestStreamID, streamID)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.openStreams -= 1
        connection.closeIfDrained()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if !sawHeaders {
                sawHeaders = true
                for field in frame.headers {
                    switch field.name {
                    case ":method": method = field.value
                    case ":path": path = field.value
                    case _ where field.name.hasPrefix(":"): break
                    default: headers.append((field.name, field.value))
                    }
                }
                if !streamOpened(context: context) { return }
            }
            if frame.endStream { requestComplete(context: context) }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data {
                let room = MockAPNsRecorder.maxRecordedBodyBytes - body.count
                if room > 0 { body.append(contentsOf: buffer.readableBytesView.prefix(room)) }
            }
            if frame.endStream { requestComplete(context: context) }
        default:
            break
        }
    }

    /// Applies the connection policy to a new stream; false when the connection was dropped.
    private func streamOpened(context: ChannelHandlerContext) -> Bool {
        connection.streamsSeen += 1
        switch connection.shared.policy.action(forStreamNumber: connection.streamsSeen, onConnection: connection.number) {
        case .serve:
            return true
        case .serveThenGoAway:
            connection.goAway(lastStreamID: streamID, reason: "Shutdown")
            return true
        case .drop:
            complete = true
            record(status: 0, reason: nil, apnsID: nil)
            connection.drop()
            return false
        }
    }

    private func requestComplete(context: ChannelHandlerContext) {
        guard !complete else { return }
        complete = true
        let shared = connection.shared
        // A body past the recording cap is still over 4096 bytes, so 413 stays exact without holding all of it.
        let request = MockAPNsRequest(method: method, path: path, headers: headers, body: body)
        let now = shared.clock.nowMilliseconds()
        var verdict = shared.validator.validate(
            request, connection: &connection.auth, nowMilliseconds: now, newAPNsID: MockAPNsStreamHandler.randomUUID())
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
            } else if let subscription = verdict.subscription, let path,
                shared.subscribe(deviceToken: String(path.dropFirst(MockAPNsValidator.devicePathPrefix.count)), subscription)
            {
                subscribedTo = subscription.channelID
            }
        }
        record(
            status: verdict.status, reason: verdict.reason, apnsID: verdict.apnsID,
            channelID: verdict.usesRequestID ? (verdict.response.channelID ?? request.header("apns-channel-id")) : nil,
            fannedOut: fannedOut, subscribedTo: subscribedTo)

        if delay > .zero {
            let (seconds, attoseconds) = delay.components
            let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) {
                self.respond(context: context, verdict: verdict)
            }
        } else {
            respond(context: context, verdict: verdict)
        }
    }

    private func record(
        status: Int, reason: String?, apnsID: String?, channelID: String? = nil, fannedOut: [String] = [],
        subscribedTo: String? = nil
    ) {
        connection.shared.recorder.record(
            MockAPNsRecord(
                path: path ?? "", method: method ?? "", headers: headers, body: body, status: status, reason: reason,
                apnsID: apnsID, connection: connection.number, streamID: streamID,
                receivedAtMilliseconds: connection.shared.clock.nowMilliseconds(), channelID: channelID,
                fannedOutTo: fannedOut, subscribedTo: subscribedTo))
    }

    private func respond(context: ChannelHandlerContext, verdict: MockAPNsVerdict) {
        guard context.channel.isActive else { return }
        var fields: [(String, String)] = [
            (":status", String(verdict.status)), (verdict.usesRequestID ? "apns-request-id" : "apns-id", verdict.apnsID),
        ]
        switch verdict.channelOperation {
        case .create?, .read?:
            if let channelID = verdict.response.channelID { fields.append(("apns-channel-id", channelID)) }
        default: break
        }
        if let retryAfter = verdict.response.retryAfterSeconds { fields.append(("retry-after", String(retryAfter))) }
        let body = verdict.responseBody
        if body != nil { fields.append(("content-type", "application/json; charset=utf-8")) }
        context.write(wrapOutboundOut(.headers(.init(headers: HPACKHeaders(fields), endStream: body == nil))), promise: nil)
        if let body {
            let buffer = context.channel.allocator.buffer(bytes: body)
            context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
        }
        context.flush()
    }

    /// A version 4 UUID in lowercase, as APNs generates when a request has no `apns-id`.
    static func randomUUID() -> String {
        // Two 64-bit draws rather than sixteen byte draws: each draw may be a getrandom(2) call.
        var generator = SystemRandomNumberGenerator()
        let (high, low) = (generator.next(), generator.next())
        var bytes = (0..<16).map { i in UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> UInt64(8 * (i % 8))) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
