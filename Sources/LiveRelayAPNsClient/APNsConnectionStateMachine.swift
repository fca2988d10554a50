import LiveRelayAPNs
import NIOCore

/// One HTTP/2 connection to APNs as a value: its lifecycle and its streams,
/// with no I/O. The channel handler feeds it events and carries out the
/// actions it returns; tests drive it with plain calls and a clock they own.
///
/// - The stream limit is the server's SETTINGS_MAX_CONCURRENT_STREAMS. Until the
///   first SETTINGS it is 1, like APNs before it has seen a valid token; later
///   SETTINGS may raise or lower it and the new value holds from then on
///   (streams already open above a lowered limit finish normally).
/// - GOAWAY: streams above its last-stream-id were not processed, they fail with
///   ``APNsTransportError/refusedByGoAway`` (retryable elsewhere); the others may
///   finish; no new stream opens. The connection closes once the last one ends.
/// - Connection loss fails what is in flight with ``APNsTransportError/connectionLost``,
///   except streams whose HEADERS never reached the socket: not sent, so
///   ``APNsTransportError/refusedByGoAway`` (retryable anywhere).
/// - Idle for ``Timeouts/idlePingInterval``: PING; no ACK (or any other frame)
///   within ``Timeouts/pingTimeout``: the connection is dead, close it.
/// - A stream without a complete answer after ``Timeouts/responseTimeout``
///   fails with ``APNsTransportError/timedOut`` and is reset.
public struct APNsConnectionStateMachine: Sendable {
    public struct Timeouts: Hashable, Sendable {
        public var idlePingInterval: TimeAmount
        public var pingTimeout: TimeAmount
        public var responseTimeout: TimeAmount

        public init(
            idlePingInterval: TimeAmount = .seconds(60), pingTimeout: TimeAmount = .seconds(10),
            responseTimeout: TimeAmount = .seconds(30)
        ) {
            self.idlePingInterval = idlePingInterval
            self.pingTimeout = pingTimeout
            self.responseTimeout = responseTimeout
        }
    }

    /// A stream as the connection knows it, before and after HTTP/2 gives it an id.
    public typealias StreamKey = Int

    public enum Phase: Hashable, Sendable {
        case connecting
        case ready
        /// After GOAWAY (received, or our own close): no new streams.
        case draining
        case closed
    }

    /// Why a connection ended, for logs and the pool's back-off.
    public enum CloseReason: Hashable, Sendable {
        case goAwayDrained
        case pingTimeout
        case connectionLost
        case closedByUser
    }

    public enum Action: Hashable, Sendable {
        /// Fail these streams' requests with this error (and reset them if still open).
        case failStreams([StreamKey], APNsTransportError)
        case sendPing(UInt64)
        case closeConnection(CloseReason)
        /// The stream limit or the number of free slots changed: tell the pool.
        case capacityChanged(available: Int)
    }

    struct OpenStream: Hashable, Sendable {
        var http2ID: Int?
        var deadline: NIODeadline
    }

    public private(set) var phase: Phase = .connecting
    /// SETTINGS_MAX_CONCURRENT_STREAMS as last announced (1 before the first SETTINGS).
    public private(set) var streamLimit: Int = 1
    private(set) var streams: [StreamKey: OpenStream] = [:]
    private var nextKey: StreamKey = 0
    private var lastActivity: NIODeadline
    private var outstandingPing: (data: UInt64, sentAt: NIODeadline)?
    private var pingCounter: UInt64 = 0
    public let timeouts: Timeouts

    public init(timeouts: Timeouts = .init(), now: NIODeadline) {
        self.timeouts = timeouts
        self.lastActivity = now
    }

    public var openStreams: Int { streams.count }

    /// Free stream slots now: zero unless ready.
    public var availableStreams: Int { phase == .ready ? max(0, streamLimit - streams.count) : 0 }

    // MARK: Lifecycle

    /// TLS and the HTTP/2 preface are done. Streams wait for the server's first SETTINGS
    /// only in the sense that the limit is 1 until then.
    public mutating func connected(now: NIODeadline) -> [Action] {
        guard phase == .connecting else { return [] }
        phase = .ready
        lastActivity = now
        return [.capacityChanged(available: availableStreams)]
    }

    /// A SETTINGS frame from the server; `maxConcurrentStreams` nil when it does not set it.
    public mutating func settingsReceived(maxConcurrentStreams: Int?, now: NIODeadline) -> [Action] {
        lastActivity = now
        guard let limit = maxConcurrentStreams, limit != streamLimit else { return [] }
        streamLimit = max(0, limit)
        return phase == .ready ? [.capacityChanged(available: availableStreams)] : []
    }

    /// Any frame from the server proves the connection alive.
    public mutating func frameReceived(now: NIODeadline) {
        lastActivity = now
        outstandingPing = nil
    }

    public mutating func pingAckReceived(data: UInt64, now: NIODeadline) {
        lastActivity = now
        if outstandingPing?.data == data { outstandingPing = nil }
    }

    /// GOAWAY from the server.
    public mutating func goAwayReceived(lastStreamID: Int, now: NIODeadline) -> [Action] {
        lastActivity = now
        guard phase == .ready || phase == .draining || phase == .connecting else { return [] }
        phase = .draining
        // Not yet given an id means not yet sent: as unprocessed as one above the last id.
        let refused = streams.filter { ($0.value.http2ID ?? Int.max) > lastStreamID }.keys.sorted()
        for key in refused { streams[key] = nil }
        var actions: [Action] = [.capacityChanged(available: 0)]
        if !refused.isEmpty { actions.append(.failStreams(refused, .refusedByGoAway)) }
        if streams.isEmpty { actions.append(.closeConnection(.goAwayDrained)) }
        return actions
    }

    /// We decided to stop using this connection (pool shutdown or trimming).
    public mutating func closeRequested() -> [Action] {
        switch phase {
        case .connecting:
            phase = .closed
            return [.closeConnection(.closedByUser)]
        case .ready:
            phase = .draining
            return streams.isEmpty
                ? [.capacityChanged(available: 0), .closeConnection(.closedByUser)]
                : [.capacityChanged(available: 0)]
        case .draining, .closed:
            return []
        }
    }

    /// The channel went inactive or errored.
    public mutating func connectionClosed() -> [Action] {
        guard phase != .closed else { return [] }
        phase = .closed
        let unsent = streams.filter { $0.value.http2ID == nil }.keys.sorted()
        let lost = streams.filter { $0.value.http2ID != nil }.keys.sorted()
        streams.removeAll()
        var actions: [Action] = []
        if !unsent.isEmpty { actions.append(.failStreams(unsent, .refusedByGoAway)) }
        if !lost.isEmpty { actions.append(.failStreams(lost, .connectionLost)) }
        return actions
    }

    // MARK: Streams

    public enum OpenResult: Hashable, Sendable {
        case opened(StreamKey)
        /// All slots taken: the pool should use another connection or queue.
        case noCapacity
        /// Connecting, draining or closed.
        case unavailable
    }

    /// Reserves a slot for a new request.
    public mutating func openStream(now: NIODeadline) -> OpenResult {
        guard phase == .ready else { return .unavailable }
        guard streams.count < streamLimit else { return .noCapacity }
        let key = nextKey
        nextKey += 1
        streams[key] = OpenStream(http2ID: nil, deadline: now + timeouts.responseTimeout)
        lastActivity = now
        return .opened(key)
    }

    /// The stream's HEADERS left for the server under this HTTP/2 id: from now on
    /// the server may have it.
    public mutating func streamIDAssigned(_ key: StreamKey, http2ID: Int) {
        streams[key]?.http2ID = http2ID
    }

    /// True once the stream's HEADERS have left (``streamIDAssigned(_:http2ID:)``):
    /// a stream that ends without an answer may then have been processed.
    public func isSent(_ key: StreamKey) -> Bool {
        streams[key]?.http2ID != nil
    }

    /// The stream ended, answered or not; what the request got is the caller's business.
    /// Returns the close when it was the last stream of a draining connection. A ready
    /// connection's freed slot is no action: the pool counts a stream's end from the
    /// requests it hears finished, and neither the phase nor the limit changed (an
    /// action here would be an allocation per push, for nothing).
    public mutating func streamClosed(_ key: StreamKey, now: NIODeadline) -> [Action] {
        guard streams.removeValue(forKey: key) != nil else { return [] }
        lastActivity = now
        switch phase {
        case .draining: return streams.isEmpty ? [.closeConnection(.goAwayDrained)] : []
        case .ready, .connecting, .closed: return []
        }
    }

    // MARK: Time

    /// Called periodically. Fails timed-out streams, sends the idle PING, declares a silent peer dead.
    public mutating func tick(now: NIODeadline) -> [Action] {
        guard phase == .ready || phase == .draining else { return [] }
        if let ping = outstandingPing, now - ping.sentAt >= timeouts.pingTimeout {
            return [.closeConnection(.pingTimeout)]
        }
        var actions: [Action] = []
        let expired = streams.filter { $0.value.deadline <= now }.keys.sorted()
        if !expired.isEmpty {
            for key in expired { streams[key] = nil }
            actions.append(.failStreams(expired, .timedOut))
            if phase == .ready { actions.append(.capacityChanged(available: availableStreams)) }
            if phase == .draining && streams.isEmpty { actions.append(.closeConnection(.goAwayDrained)) }
        }
        if outstandingPing == nil, now - lastActivity >= timeouts.idlePingInterval {
            pingCounter &+= 1
            outstandingPing = (pingCounter, now)
            actions.append(.sendPing(pingCounter))
        }
        return actions
    }
}
