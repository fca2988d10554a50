import LiveRelayAPNs
import LiveRelayBackoff
import NIOCore

/// Which connection of a pool gets which request, as a value: lazy connects
/// up to the maximum, least-loaded choice among ready connections, a bounded
/// queue of requests waiting for a slot, back-off after failed connects.
///
/// A connection is served by one event loop, and so is its TLS and HTTP/2 work
/// on both ends; once every connection carries ``Configuration/streamsPerConnection``
/// requests, another one opens (up to the maximum) even though the server would
/// allow more streams, so that a busy pool spreads over cores, as Apple
/// recommends several connections for high volumes.
/// The pool class holds it under a lock and carries out its actions.
///
/// `Waiter` is whatever the pool queues (a request and its promise); the
/// machine never looks inside.
public struct APNsPoolStateMachine<Waiter> {
    public typealias ConnectionID = Int

    public struct Configuration: Hashable, Sendable {
        public var maximumConnections: Int
        /// Requests that may wait for a free stream; beyond it they fail at once.
        public var maximumQueuedRequests: Int
        /// Between failed connects, so a fleet that lost APNs at the same moment does not reconnect in lockstep.
        public var backoff: Backoff
        /// Requests in flight on every connection before another opens.
        public var streamsPerConnection: Int

        public init(
            maximumConnections: Int = 4, maximumQueuedRequests: Int = 10_000,
            backoff: Backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(30)),
            streamsPerConnection: Int = 100
        ) {
            precondition(maximumConnections >= 1)
            self.maximumConnections = maximumConnections
            self.maximumQueuedRequests = maximumQueuedRequests
            self.backoff = backoff
            self.streamsPerConnection = max(1, streamsPerConnection)
        }
    }

    public enum ConnectionPhase: Hashable, Sendable {
        case connecting, ready, draining
    }

    struct Connection {
        var phase: ConnectionPhase
        var limit: Int
        var inFlight: Int
        var free: Int { phase == .ready ? max(0, limit - inFlight) : 0 }
    }

    public enum Action {
        case dispatch(Waiter, to: ConnectionID)
        case fail(Waiter, APNsTransportError)
        case connect(ConnectionID)
        /// Call ``backoffElapsed()`` after this delay.
        case scheduleBackoff(TimeAmount)
        case close(ConnectionID)
    }

    public let configuration: Configuration
    private(set) var connections: [ConnectionID: Connection] = [:]
    private var queue: [Waiter] = []
    private var queueHead = 0
    private var nextID: ConnectionID = 0
    private var consecutiveFailures = 0
    private var backingOff = false
    private var lastFailure: String?
    private var isShutDown = false

    public init(configuration: Configuration) { self.configuration = configuration }

    public var queuedCount: Int { queue.count - queueHead }
    public var connectionCount: Int { connections.count }
    public var inFlight: Int { connections.values.reduce(0) { $0 + $1.inFlight } }

    // MARK: Requests

    public mutating func submit(_ waiter: Waiter) -> [Action] {
        var actions: [Action] = []
        submit(waiter, into: &actions)
        return actions
    }

    /// ``submit(_:)`` for a batch: the actions go to the end of `actions`, so a
    /// fan-out's thousand requests make one array, not two per request.
    public mutating func submit(_ waiter: Waiter, into actions: inout [Action]) {
        if isShutDown {
            actions.append(.fail(waiter, .shutDown))
        } else if let id = leastLoaded() {
            connections[id]!.inFlight += 1
            actions.append(.dispatch(waiter, to: id))
            actions += connectIfBusy()
        } else if backingOff && !connections.values.contains(where: { $0.phase != .draining }) {
            actions.append(.fail(waiter, .connectFailed(lastFailure ?? "backing off after failed connects")))
        } else if queuedCount >= configuration.maximumQueuedRequests {
            actions.append(.fail(waiter, .connectFailed("APNs request queue full (\(configuration.maximumQueuedRequests))")))
        } else {
            queue.append(waiter)
            actions += connectIfNeeded()
        }
    }

    /// A connection could not take a request it was given (its limit dropped or it
    /// got GOAWAY before the stream opened): back to the front of the queue, not counted in flight.
    public mutating func bounced(_ waiter: Waiter, from id: ConnectionID) -> [Action] {
        if connections[id] != nil { connections[id]!.inFlight -= 1 }
        if isShutDown { return [.fail(waiter, .shutDown)] }
        if queueHead > 0 {
            queueHead -= 1
            queue[queueHead] = waiter
        } else {
            queue.insert(waiter, at: 0)
        }
        return drain() + connectIfNeeded()
    }

    /// A request dispatched to `id` has its answer (or its error).
    public mutating func requestFinished(on id: ConnectionID) -> [Action] {
        guard connections[id] != nil else { return [] }
        connections[id]!.inFlight -= 1
        return drain()
    }

    // MARK: Connections

    /// The connection's own state machine changed phase or limit.
    public mutating func connectionUpdated(_ id: ConnectionID, phase: ConnectionPhase, streamLimit: Int) -> [Action] {
        guard connections[id] != nil else { return [] }
        if phase == .ready, connections[id]!.phase == .connecting {
            consecutiveFailures = 0
            backingOff = false
            lastFailure = nil
        }
        connections[id]!.phase = phase
        connections[id]!.limit = streamLimit
        return drain() + connectIfNeeded()
    }

    /// The connection is gone. `neverReady` with an error means the connect failed: back off.
    public mutating func connectionClosed(_ id: ConnectionID, connectError: String?, random: Double) -> [Action] {
        guard let closed = connections.removeValue(forKey: id) else { return [] }
        var actions: [Action] = []
        if closed.phase == .connecting, let error = connectError {
            consecutiveFailures += 1
            lastFailure = error
            backingOff = true
            actions.append(.scheduleBackoff(configuration.backoff.delay(after: consecutiveFailures, random: random)))
            if !connections.values.contains(where: { $0.phase != .draining }) {
                // Nothing else could serve the queue soon: let the dispatcher's retry policy decide.
                while let waiter = popQueue() { actions.append(.fail(waiter, .connectFailed(error))) }
            }
            return actions
        }
        return drain() + connectIfNeeded()
    }

    public mutating func backoffElapsed() -> [Action] {
        backingOff = false
        return connectIfNeeded()
    }

    /// Fails the queue, closes every connection; later submits fail with `.shutDown`.
    public mutating func shutdown() -> [Action] {
        isShutDown = true
        var actions: [Action] = []
        while let waiter = popQueue() { actions.append(.fail(waiter, .shutDown)) }
        for id in connections.keys.sorted() { actions.append(.close(id)) }
        return actions
    }

    // MARK: Internals

    private func leastLoaded() -> ConnectionID? {
        var best: (id: ConnectionID, free: Int)?
        for (id, connection) in connections where connection.free > 0 {
            if best == nil || connection.free > best!.free || (connection.free == best!.free && id < best!.id) {
                best = (id, connection.free)
            }
        }
        return best?.id
    }

    private mutating func drain() -> [Action] {
        var actions: [Action] = []
        while queuedCount > 0, let id = leastLoaded() {
            connections[id]!.inFlight += 1
            actions.append(.dispatch(popQueue()!, to: id))
        }
        return actions
    }

    /// One new connection at a time, while requests wait and the maximum allows.
    private mutating func connectIfNeeded() -> [Action] {
        guard queuedCount > 0 else { return [] }
        return connect()
    }

    /// Another connection when every usable one carries `streamsPerConnection` requests.
    private mutating func connectIfBusy() -> [Action] {
        // Runs on every submit: a loop that stops at the first free one, no array built.
        for connection in connections.values where connection.phase != .draining {
            if connection.inFlight < configuration.streamsPerConnection { return [] }
        }
        return connect()
    }

    private mutating func connect() -> [Action] {
        guard !isShutDown, !backingOff else { return [] }
        // Runs on every submit that queues (all connections full): counted in place.
        var counted = 0
        for connection in connections.values where connection.phase != .draining {
            if connection.phase == .connecting { return [] }
            counted += 1
        }
        guard counted < configuration.maximumConnections else { return [] }
        let id = nextID
        nextID += 1
        connections[id] = Connection(phase: .connecting, limit: 0, inFlight: 0)
        return [.connect(id)]
    }

    private mutating func popQueue() -> Waiter? {
        guard queueHead < queue.count else { return nil }
        let waiter = queue[queueHead]
        queueHead += 1
        if queueHead > 1024, queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        return waiter
    }
}
