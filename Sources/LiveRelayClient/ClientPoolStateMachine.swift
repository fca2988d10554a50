import LiveRelayBackoff
import LiveRelayWire
import NIOCore

/// The client pool's decisions as a value, so they can be tested without
/// sockets and read without following locks and timers: which connection
/// gets a call, when a call waits, when a slot reconnects and after how long.
///
/// `ConnectionPool` holds it under its lock, feeds it what the connections
/// report, and carries out the actions it returns after releasing the lock
/// (opening channels, arming timers, completing futures), because carrying one
/// out can re-enter the pool: a connect can fail at once, and a completed call
/// can run caller code that starts another call.
///
/// A pool has a fixed number of slots; each holds at most one connection at
/// a time. A connection leaves its slot when it gets GOAWAY (it finishes its
/// calls but takes no new ones) and the slot gets a new connection.
///
/// Calls go to the least-loaded ready connection that is below the server's
/// MAX_REQUESTS_IN_FLIGHT (unknown until WELCOME: then the connection takes
/// what it is given and its handler holds back what the server has no room
/// for). With no such connection they wait in one queue, in arrival order,
/// until a connection is ready or one frees a request slot, or until a connect
/// attempt fails and no other is under way: then they fail with UNAVAILABLE
/// and the connect error, so a caller sees "certificate verify failed" rather
/// than a timeout.
///
/// `Call` is whatever the pool tracks per call; the machine only compares identities.
struct ClientPoolStateMachine<Call: AnyObject> {
    typealias ConnectionID = Int

    struct Configuration {
        var connections: Int
        /// Admitted calls held at once (sent or waiting); beyond it calls are rejected.
        var maxPendingCalls: Int
        var backoff: Backoff
        /// "host:port", for the messages of connect failures.
        var serverName: String
    }

    enum Action {
        /// Open connection `connection` for `slot`; report back with the connection… methods.
        case connect(slot: Int, connection: ConnectionID)
        /// Call ``reconnectDue(slot:)`` after `delay`.
        case scheduleReconnect(slot: Int, after: TimeAmount)
        /// Hand the call to the connection; it is counted in its load until released.
        case dispatch(Call, to: ConnectionID)
        /// The call waits in the queue: arm its deadline timer, which calls ``expire(_:)``.
        case queued(Call)
        /// Complete an admitted call with a failure; report it with ``callsFinished(_:)``.
        case fail(Call, LiveRelayClientError)
        /// Complete a call that was never admitted (not counted as pending).
        case reject(Call, LiveRelayClientError)
        /// Close the connection gracefully: GOAWAY, outstanding replies, close.
        case shutDown(ConnectionID)
    }

    enum SlotState: Equatable {
        case idle
        case connecting(ConnectionID)
        case ready(ConnectionID)
        case backingOff
    }

    private struct Slot {
        var state: SlotState = .idle
        /// Consecutive attempts that ended before WELCOME; drives the back-off.
        var failures = 0
    }

    private struct Connection {
        /// nil once the connection left its slot (GOAWAY): it takes no new calls.
        var slot: Int?
        /// Calls handed to it and not yet released by it.
        var load = 0
        /// The server's MAX_REQUESTS_IN_FLIGHT, from WELCOME.
        var limit: Int?
        /// WELCOME arrived: the server accepted the key, so the back-off starts over.
        var established = false
    }

    private struct Waiting {
        var call: Call
        /// The last connect attempt started before the call was queued: a
        /// failure of that one (or an older one) does not fail the call, because
        /// it may have begun before the server came back.
        var afterAttempt: ConnectionID
    }

    let configuration: Configuration
    private var slots: [Slot]
    private var connections: [ConnectionID: Connection] = [:]
    private var queue = CircularBuffer<Waiting>()
    private var nextConnectionID = 1
    /// Admitted calls not yet finished.
    private(set) var activeCalls = 0
    private(set) var isShutDown = false

    init(configuration: Configuration) {
        self.configuration = configuration
        self.slots = Array(repeating: Slot(), count: max(1, configuration.connections))
    }

    /// Connection attempts so far.
    var connectionsCreated: Int { self.nextConnectionID - 1 }
    var queuedCount: Int { self.queue.count }
    func slotState(_ slot: Int) -> SlotState { self.slots[slot].state }
    func load(of id: ConnectionID) -> Int? { self.connections[id]?.load }

    /// The connection a new call would go to now, so the pool can create the
    /// call's promise on that connection's event loop and complete it without a hop.
    var preferredConnection: ConnectionID? {
        self.isShutDown ? nil : self.leastLoaded()
    }

    // MARK: Calls

    /// A new call: admitted (dispatched or queued) or rejected.
    mutating func submit(_ call: Call) -> [Action] {
        if self.isShutDown { return [.reject(call, Self.shutDownError)] }
        guard self.activeCalls < self.configuration.maxPendingCalls else {
            let message = "\(self.activeCalls) calls already pending in the client (maxPendingCalls)"
            return [.reject(call, LiveRelayClientError(status: .resourceExhausted, message: message, processing: .notProcessed))]
        }
        self.activeCalls += 1
        return self.place(call)
    }

    /// An admitted call that failed in a way the retry policy allows to resend.
    mutating func resubmit(_ call: Call) -> [Action] {
        if self.isShutDown { return [.fail(call, Self.shutDownError)] }
        return self.place(call)
    }

    /// A queued call's deadline passed.
    mutating func expire(_ call: Call) -> [Action] {
        guard self.removeQueued(call) else { return [] }
        let waitingFor =
            self.slots.contains { if case .ready = $0.state { true } else { false } }
            ? "a free request slot" : "a connection"
        return [
            .fail(
                call,
                LiveRelayClientError(
                    status: .deadlineExceeded, message: "deadline exceeded while waiting for \(waitingFor)", processing: .notProcessed
                ))
        ]
    }

    /// The caller cancelled a call the pool had queued.
    mutating func cancelQueued(_ call: Call) -> [Action] {
        guard self.removeQueued(call) else { return [] }
        return [.fail(call, LiveRelayClientError(status: .cancelled, message: "cancelled by the client", processing: .notProcessed))]
    }

    /// Admitted calls completed (replies, or failures the pool carried out).
    mutating func callsFinished(_ count: Int) {
        self.activeCalls -= count
    }

    // MARK: Reports from connections

    /// Calls left the connection (answered, failed or never started): its
    /// load drops, and waiting calls may take the freed request slots.
    mutating func released(_ id: ConnectionID, calls: Int) -> [Action] {
        guard calls > 0, self.connections[id] != nil else { return [] }
        self.connections[id]!.load -= calls
        return self.drain()
    }

    /// TCP (and TLS) are up and HELLO is written: calls may go out (the server
    /// holds them until it has checked the key).
    mutating func connectionUsable(_ id: ConnectionID) -> [Action] {
        guard !self.isShutDown, let slot = self.slot(of: id) else { return [.shutDown(id)] }
        self.slots[slot].state = .ready(id)
        return self.drain()
    }

    /// WELCOME: the key is accepted, so the slot's back-off starts over, and
    /// the server's limit tells how many calls this connection can carry.
    ///
    /// Nothing to dispatch: until now the connection had no limit, so nothing
    /// could wait while it was ready, and a limit only takes room away.
    mutating func connectionEstablished(_ id: ConnectionID, maxRequestsInFlight: Int) {
        guard self.connections[id] != nil else { return }
        self.connections[id]!.established = true
        self.connections[id]!.limit = max(1, maxRequestsInFlight)
        if let slot = self.slot(of: id) { self.slots[slot].failures = 0 }
    }

    /// GOAWAY: no new calls go there; its slot gets a new connection, except
    /// after an idle timeout with nothing waiting (it comes back when a call needs it).
    /// A GOAWAY before WELCOME (TOO_MANY_CONNECTIONS: the key is at the
    /// server's limit) counts as a failure, so the new connection waits out a
    /// growing back-off instead of hammering a server that refuses it.
    mutating func connectionGoingAway(_ id: ConnectionID, code: GoAwayCode, random: Double) -> [Action] {
        guard let slot = self.slot(of: id) else { return [] }
        self.connections[id]!.slot = nil
        if !self.connections[id]!.established { self.slots[slot].failures += 1 }
        if self.isShutDown || (code == .idleTimeout && self.queue.isEmpty) {
            self.slots[slot].state = .idle
            return []
        }
        return self.reconnect(slot: slot, random: random)
    }

    /// The connection is closed. One that never became usable failed to
    /// connect: when no other connection is ready or connecting, the calls
    /// that waited for it fail with `reason` rather than waiting for a deadline.
    mutating func connectionClosed(_ id: ConnectionID, wasUsable: Bool, reason: String, random: Double) -> [Action] {
        guard let closed = self.connections.removeValue(forKey: id), let slot = closed.slot,
            self.slots[slot].state == .connecting(id) || self.slots[slot].state == .ready(id)
        else { return [] }
        if !closed.established { self.slots[slot].failures += 1 }
        if self.isShutDown {
            self.slots[slot].state = .idle
            return []
        }
        var actions = self.reconnect(slot: slot, random: random)
        guard !wasUsable, !self.anySlotReadyOrConnecting else { return actions }
        let failure = LiveRelayClientError(
            status: .unavailable, message: "cannot connect to \(self.configuration.serverName): \(reason)", processing: .notProcessed
        )
        var waiting = CircularBuffer<Waiting>()
        while let entry = self.queue.popFirst() {
            if entry.afterAttempt < id {
                actions.append(.fail(entry.call, failure))
            } else {
                waiting.append(entry)
            }
        }
        self.queue = waiting
        return actions
    }

    /// The back-off of `slot` is over.
    mutating func reconnectDue(slot: Int) -> [Action] {
        guard !self.isShutDown, self.slots[slot].state == .backingOff else { return [] }
        return [self.connect(slot: slot)]
    }

    /// Fails what waits and closes every connection; later calls are rejected.
    /// Scheduled reconnects find the machine shut down and do nothing.
    mutating func shutdown() -> [Action] {
        self.isShutDown = true
        var actions: [Action] = []
        for slot in self.slots.indices where self.slots[slot].state == .backingOff {
            self.slots[slot].state = .idle
        }
        while let entry = self.queue.popFirst() {
            actions.append(.fail(entry.call, Self.shutDownError))
        }
        for id in self.connections.keys.sorted() {
            actions.append(.shutDown(id))
        }
        return actions
    }

    static var shutDownError: LiveRelayClientError {
        LiveRelayClientError(status: .unavailable, message: "the client is shut down", processing: .notProcessed)
    }

    // MARK: Internals

    private mutating func place(_ call: Call) -> [Action] {
        if let id = self.leastLoaded() {
            self.connections[id]!.load += 1
            return [.dispatch(call, to: id)]
        }
        self.queue.append(Waiting(call: call, afterAttempt: self.nextConnectionID - 1))
        var actions: [Action] = [.queued(call)]
        for slot in self.slots.indices where self.slots[slot].state == .idle {
            actions.append(self.connect(slot: slot))
        }
        return actions
    }

    /// Waiting calls to connections with room, in arrival order.
    private mutating func drain() -> [Action] {
        var actions: [Action] = []
        while !self.queue.isEmpty, let id = self.leastLoaded() {
            self.connections[id]!.load += 1
            actions.append(.dispatch(self.queue.removeFirst().call, to: id))
        }
        return actions
    }

    /// The ready connection with the fewest calls among those below the
    /// server's limit; the first slot wins a tie.
    private func leastLoaded() -> ConnectionID? {
        var best: (id: ConnectionID, load: Int)?
        for slot in self.slots {
            guard case .ready(let id) = slot.state, let connection = self.connections[id] else { continue }
            if let limit = connection.limit, connection.load >= limit { continue }
            if best.map({ connection.load < $0.load }) ?? true { best = (id, connection.load) }
        }
        return best?.id
    }

    /// A new connection in `slot` now, or after the back-off for its failures so far.
    private mutating func reconnect(slot: Int, random: Double) -> [Action] {
        let delay = self.configuration.backoff.delay(after: self.slots[slot].failures, random: random)
        guard delay > .zero else { return [self.connect(slot: slot)] }
        self.slots[slot].state = .backingOff
        return [.scheduleReconnect(slot: slot, after: delay)]
    }

    private mutating func connect(slot: Int) -> Action {
        let id = self.nextConnectionID
        self.nextConnectionID += 1
        self.connections[id] = Connection(slot: slot)
        self.slots[slot].state = .connecting(id)
        return .connect(slot: slot, connection: id)
    }

    /// The slot `id` occupies, while it is the slot's connection.
    private func slot(of id: ConnectionID) -> Int? {
        guard let slot = self.connections[id]?.slot else { return nil }
        switch self.slots[slot].state {
        case .connecting(id), .ready(id): return slot
        default: return nil
        }
    }

    private var anySlotReadyOrConnecting: Bool {
        self.slots.contains {
            switch $0.state {
            case .connecting, .ready: true
            case .idle, .backingOff: false
            }
        }
    }

    private mutating func removeQueued(_ call: Call) -> Bool {
        guard let index = self.queue.firstIndex(where: { $0.call === call }) else { return false }
        self.queue.remove(at: index)
        return true
    }
}
