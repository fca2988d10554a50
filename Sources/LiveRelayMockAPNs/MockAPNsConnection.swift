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
/// faults. Lives on the connection's event loop, owned by its ``MockAPNsConnectionHandler``.
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

    /// A client stream began (its first HEADERS): counts it toward the peak the
    /// counters report, which checks that SETTINGS_MAX_CONCURRENT_STREAMS was honoured.
    func streamBegan(_ streamID: Int) {
        openStreams += 1
        if openStreams > peakOpenStreams {
            peakOpenStreams = openStreams
            let peak = peakOpenStreams
            shared.recorder.count { $0.peakConcurrentStreams = max($0.peakConcurrentStreams, peak) }
        }
        highestStreamID = max(highestStreamID, streamID)
    }

    /// A stream that ``streamBegan(_:)`` closed (answered, reset, or cut off by a GOAWAY).
    func streamEnded() {
        openStreams -= 1
        closeIfDrained()
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
