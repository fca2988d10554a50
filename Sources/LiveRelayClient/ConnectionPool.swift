import LiveRelayTLS
import LiveRelayWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// N connections to one server, the calls waiting for them, and reconnection.
///
/// Every decision is made under one lock and carried out after it is released
/// (as `Effect`s), because carrying one out can re-enter the pool on the same
/// thread: a connect can fail at once, and a completed call can run caller
/// code that starts another call.
///
/// Calls go to the least-loaded usable connection. With none usable (all
/// connecting or backing off) they wait in a queue until one is, or until
/// a connect attempt fails and no other is under way: then they fail with
/// UNAVAILABLE and the connect error, so a caller sees "certificate verify
/// failed" rather than a timeout.
final class ConnectionPool: @unchecked Sendable {
    private enum SlotState {
        case idle
        case connecting(PooledConnection)
        case ready(PooledConnection)
        case backingOff(Scheduled<Void>, token: Int)
    }

    private struct Slot {
        var state: SlotState = .idle
        /// Consecutive attempts that ended before WELCOME; drives the back-off.
        var failures = 0
    }

    private enum Effect {
        case connect(PooledConnection)
        case start(PooledConnection, [ClientCall])
        case fail(ClientCall, LiveRelayClientError)
        case shutdown(PooledConnection)
    }

    let configuration: LiveRelayClient.Configuration
    private let group: any EventLoopGroup
    let logger: Logger
    let tlsContext: TLSContext?
    /// nil when the configuration cannot work (bad API key length, TLS files):
    /// every call then fails with `setupError`, instead of the initializer trapping.
    let machineConfiguration: ClientConnectionStateMachine.Configuration?
    private let setupError: LiveRelayClientError?

    private let lock = NIOLock()
    private var slots: [Slot]
    private var queue = CircularBuffer<ClientCall>()
    private var open: [Int: PooledConnection] = [:]
    private var activeCalls = 0
    private var shuttingDown = false
    private var nextConnectionID = 1
    private var nextToken = 1

    init(configuration: LiveRelayClient.Configuration, group: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.slots = Array(repeating: Slot(), count: max(1, configuration.connections))
        var setupError: LiveRelayClientError? = nil
        var tlsContext: TLSContext? = nil
        if let tls = configuration.tls {
            do {
                tlsContext = try TLSContext(configuration: tls)
            } catch {
                setupError = LiveRelayClientError(status: .unavailable, message: error.description, processing: .notProcessed)
            }
        }
        self.tlsContext = tlsContext
        let key = ByteBuffer(string: configuration.apiKey)
        if Wire.apiKeyLengthRange.contains(key.readableBytes) {
            self.machineConfiguration = ClientConnectionStateMachine.Configuration(
                apiKey: key,
                clientName: configuration.clientName,
                keepaliveInterval: configuration.keepaliveInterval
            )
        } else {
            self.machineConfiguration = nil
            setupError = setupError ?? LiveRelayClientError(
                status: .unauthenticated,
                message: key.readableBytes == 0 ? "no API key given" : "the API key must be 1 to 512 bytes",
                processing: .notProcessed
            )
        }
        self.setupError = setupError
    }

    // MARK: Calls

    /// Places a new call; its future completes on the loop of the connection it went to when one was usable.
    func startCall(method: String, payload: ByteBuffer, timeout: TimeAmount?, idempotent: Bool) -> ClientCall {
        let deadline = timeout.map { NIODeadline.now() + $0 }
        var effects: [Effect] = []
        let call: ClientCall = self.lock.withLock {
            let target = self.shuttingDown || self.setupError != nil ? nil : self.leastLoaded()
            let loop = target?.eventLoop ?? self.group.any()
            let call = ClientCall(
                method: method, payload: payload, deadline: deadline, idempotent: idempotent, promise: loop.makePromise()
            )
            if let error = self.setupError {
                effects.append(.fail(call, error))
            } else if self.shuttingDown {
                effects.append(.fail(call, Self.shutDownError))
            } else if self.activeCalls >= self.configuration.maxPendingCalls {
                let message = "\(self.activeCalls) calls already pending in the client (maxPendingCalls)"
                effects.append(.fail(call, LiveRelayClientError(status: .resourceExhausted, message: message, processing: .notProcessed)))
            } else {
                self.activeCalls += 1
                if let target {
                    target.load += 1
                    call.move(to: .connection(target))
                    effects.append(.start(target, [call]))
                } else {
                    self.enqueue(call, effects: &effects)
                }
            }
            return call
        }
        self.run(effects)
        return call
    }

    /// Places a call again after a failure that allows it.
    private func resubmit(_ call: ClientCall) {
        var effects: [Effect] = []
        self.lock.withLock {
            if self.shuttingDown {
                effects.append(.fail(call, Self.shutDownError))
            } else if let target = self.leastLoaded() {
                target.load += 1
                if call.move(to: .connection(target)) {
                    effects.append(.start(target, [call]))
                } else {
                    target.load -= 1
                }
            } else {
                self.enqueue(call, effects: &effects)
            }
        }
        self.run(effects)
    }

    private func enqueue(_ call: ClientCall, effects: inout [Effect]) {
        guard call.move(to: .queued) else { return }
        // A call waits for at least one connect attempt that starts after it
        // arrived: one already under way may have begun before the server came back.
        call.queuedAfterAttempt = self.nextConnectionID - 1
        self.queue.append(call)
        if let deadline = call.deadline {
            call.queueTimer = call.promise.futureResult.eventLoop.scheduleTask(deadline: deadline) { [self] in
                self.expireQueued(call)
            }
        }
        for index in self.slots.indices {
            if case .idle = self.slots[index].state {
                effects.append(.connect(self.newConnection(slot: index)))
            }
        }
    }

    private func leastLoaded() -> PooledConnection? {
        var best: PooledConnection? = nil
        for slot in self.slots {
            if case .ready(let connection) = slot.state, best.map({ connection.load < $0.load }) ?? true {
                best = connection
            }
        }
        return best
    }

    private func expireQueued(_ call: ClientCall) {
        let removed: Bool = self.lock.withLock {
            guard let index = self.queue.firstIndex(where: { $0 === call }) else { return false }
            self.queue.remove(at: index)
            return true
        }
        if removed {
            self.finish(call, LiveRelayClientError(
                status: .deadlineExceeded, message: "deadline exceeded while waiting for a connection", processing: .notProcessed
            ))
        }
    }

    /// The caller's task was cancelled.
    func cancel(_ call: ClientCall) {
        switch call.markCancelled() {
        case .new, .finished:
            return
        case .queued:
            let removed: Bool = self.lock.withLock {
                guard let index = self.queue.firstIndex(where: { $0 === call }) else { return false }
                self.queue.remove(at: index)
                call.queueTimer?.cancel()
                return true
            }
            if removed {
                self.finish(call, LiveRelayClientError(status: .cancelled, message: "cancelled by the client", processing: .notProcessed))
            }
        case .connection(let connection):
            // If the handler has not seen the call yet, it finds it cancelled when it does.
            connection.withHandler { $0?.cancel(call) }
        }
    }

    /// A connection gave a call back with a failure: resend it where the
    /// retry policy allows, else fail it to the caller.
    func callFailed(_ call: ClientCall, _ error: LiveRelayClientError) {
        var error = error
        if call.isCancelled, error.status != .cancelled {
            error = LiveRelayClientError(
                status: .cancelled, message: "cancelled by the client",
                processing: error.processing == .notProcessed ? .notProcessed : .mayHaveBeenProcessed
            )
        }
        if self.shouldRetry(call, error), call.beginRetry() {
            self.logger.debug("resending call", metadata: ["method": "\(call.method)", "after": "\(error)"])
            self.resubmit(call)
        } else {
            self.finish(call, error)
        }
    }

    private func shouldRetry(_ call: ClientCall, _ error: LiveRelayClientError) -> Bool {
        let policy = self.configuration.retryPolicy
        guard call.attempts < policy.maxAttempts else { return false }
        if let deadline = call.deadline, deadline <= .now() { return false }
        guard !self.lock.withLock({ self.shuttingDown }) else { return false }
        switch error.processing {
        case .notProcessed:
            return error.status == .unavailable
        case .mayHaveBeenProcessed:
            return policy.retryIdempotentCalls && call.idempotent && (error.status == .unavailable || error.status == .internal)
        case .answered:
            return false
        }
    }

    private func finish(_ call: ClientCall, _ error: LiveRelayClientError) {
        if call.fail(error) {
            self.lock.withLock { self.activeCalls -= 1 }
        }
    }

    // MARK: Reports from connections

    func connectionReleased(_ connection: PooledConnection, calls: Int, succeeded: Int) {
        self.lock.withLock {
            connection.load -= calls
            self.activeCalls -= succeeded
        }
    }

    /// TCP (and TLS) are up and HELLO is written: calls may go out.
    func connectionUsable(_ connection: PooledConnection) {
        var effects: [Effect] = []
        self.lock.withLock {
            guard !self.shuttingDown, let index = self.slotIndex(of: connection) else {
                effects.append(.shutdown(connection))
                return
            }
            self.slots[index].state = .ready(connection)
            var batches: [Int: (PooledConnection, [ClientCall])] = [:]
            while let call = self.queue.popFirst() {
                call.queueTimer?.cancel()
                call.queueTimer = nil
                guard let target = self.leastLoaded(), call.move(to: .connection(target)) else { continue }
                target.load += 1
                batches[target.id, default: (target, [])].1.append(call)
            }
            effects += batches.values.map { .start($0.0, $0.1) }
        }
        self.run(effects)
    }

    /// WELCOME: the server accepted the key; the back-off starts over.
    func connectionEstablished(_ connection: PooledConnection) {
        self.lock.withLock {
            connection.established = true
            if let index = self.slotIndex(of: connection) {
                self.slots[index].failures = 0
            }
        }
    }

    /// GOAWAY: no new calls go there; its slot gets a new connection.
    func connectionGoingAway(_ connection: PooledConnection, code: GoAwayCode) {
        var effects: [Effect] = []
        self.lock.withLock {
            guard let index = self.slotIndex(of: connection) else { return }
            if !connection.established { self.slots[index].failures += 1 }
            if self.shuttingDown || (code == .idleTimeout && self.queue.isEmpty) {
                // An idle connection closed by the server comes back when a call needs it.
                self.slots[index].state = .idle
            } else {
                self.reconnect(slot: index, effects: &effects)
            }
        }
        self.run(effects)
    }

    func connectionClosed(_ connection: PooledConnection, error: (any Error)?, wasUsable: Bool) {
        var effects: [Effect] = []
        let firstReport: Bool = self.lock.withLock {
            guard !connection.closed else { return false }
            connection.closed = true
            self.open[connection.id] = nil
            guard let index = self.slotIndex(of: connection) else { return true }
            if !connection.established { self.slots[index].failures += 1 }
            if self.shuttingDown {
                self.slots[index].state = .idle
                return true
            }
            self.reconnect(slot: index, effects: &effects)
            if !wasUsable {
                let reason = error.map { Self.describe($0) } ?? "connection closed"
                if !self.anySlotUsableOrConnecting() {
                    let failure = LiveRelayClientError(
                        status: .unavailable,
                        message: "cannot connect to \(self.configuration.host):\(self.configuration.port): \(reason)",
                        processing: .notProcessed
                    )
                    var waiting = CircularBuffer<ClientCall>()
                    while let call = self.queue.popFirst() {
                        if call.queuedAfterAttempt < connection.id {
                            call.queueTimer?.cancel()
                            effects.append(.fail(call, failure))
                        } else {
                            waiting.append(call)
                        }
                    }
                    self.queue = waiting
                }
            }
            return true
        }
        guard firstReport else { return }
        if let error, !wasUsable {
            self.logger.debug("connect failed", metadata: ["connection": "\(connection.id)", "error": "\(Self.describe(error))"])
        } else {
            self.logger.debug("connection closed", metadata: ["connection": "\(connection.id)"])
        }
        connection.closePromise.succeed(())
        self.run(effects)
    }

    private func slotIndex(of connection: PooledConnection) -> Int? {
        self.slots.firstIndex { slot in
            switch slot.state {
            case .connecting(let c), .ready(let c): return c === connection
            case .idle, .backingOff: return false
            }
        }
    }

    private func anySlotUsableOrConnecting() -> Bool {
        self.slots.contains { slot in
            switch slot.state {
            case .connecting, .ready: return true
            case .idle, .backingOff: return false
            }
        }
    }

    /// A new connection in `slot` now, or after the back-off for its failures so far.
    private func reconnect(slot index: Int, effects: inout [Effect]) {
        let delay = self.configuration.backoff.delay(after: self.slots[index].failures, random: Double.random(in: 0..<1))
        if delay <= .zero {
            effects.append(.connect(self.newConnection(slot: index)))
            return
        }
        let token = self.nextToken
        self.nextToken += 1
        let scheduled = self.group.any().scheduleTask(in: delay) { [self] in
            self.backoffEnded(slot: index, token: token)
        }
        self.slots[index].state = .backingOff(scheduled, token: token)
    }

    private func backoffEnded(slot index: Int, token: Int) {
        var effects: [Effect] = []
        self.lock.withLock {
            guard !self.shuttingDown, case .backingOff(_, let current) = self.slots[index].state, current == token else { return }
            effects.append(.connect(self.newConnection(slot: index)))
        }
        self.run(effects)
    }

    private func newConnection(slot index: Int) -> PooledConnection {
        let connection = PooledConnection(id: self.nextConnectionID, eventLoop: self.group.any())
        self.nextConnectionID += 1
        self.open[connection.id] = connection
        self.slots[index].state = .connecting(connection)
        return connection
    }

    // MARK: Carrying out decisions

    private func run(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .connect(let connection):
                self.connect(connection)
            case .start(let connection, let calls):
                connection.withHandler { [self] handler in
                    if let handler {
                        handler.start(calls)
                    } else {
                        self.connectionReleased(connection, calls: calls.count, succeeded: 0)
                        for call in calls {
                            self.callFailed(call, LiveRelayClientError(status: .unavailable, message: "connection is not open", processing: .notProcessed))
                        }
                    }
                }
            case .fail(let call, let error):
                self.finish(call, error)
            case .shutdown(let connection):
                connection.withHandler { $0?.gracefulShutdown() }
            }
        }
    }

    // MARK: Shutdown

    /// Fails what waits, sends GOAWAY on every connection, and completes once
    /// all are closed (forcibly after the grace period).
    func shutdown() -> EventLoopFuture<Void> {
        var queued: [ClientCall] = []
        let connections: [PooledConnection] = self.lock.withLock {
            self.shuttingDown = true
            for index in self.slots.indices {
                if case .backingOff(let scheduled, _) = self.slots[index].state {
                    scheduled.cancel()
                    self.slots[index].state = .idle
                }
            }
            while let call = self.queue.popFirst() {
                call.queueTimer?.cancel()
                queued.append(call)
            }
            return Array(self.open.values)
        }
        for call in queued {
            self.finish(call, Self.shutDownError)
        }
        let loop = self.group.any()
        guard !connections.isEmpty else { return loop.makeSucceededVoidFuture() }
        for connection in connections {
            connection.withHandler { $0?.gracefulShutdown() }
        }
        let grace = loop.scheduleTask(in: self.configuration.shutdownGracePeriod) {
            for connection in connections {
                connection.withHandler { $0?.forceClose() }
            }
        }
        return EventLoopFuture.andAllComplete(connections.map { $0.closePromise.futureResult }, on: loop).always { _ in
            grace.cancel()
        }
    }

    private static let shutDownError = LiveRelayClientError(
        status: .unavailable, message: "the client is shut down", processing: .notProcessed
    )

    // MARK: For tests and diagnostics

    /// Connections created so far (every connect attempt counts).
    var connectionsCreated: Int { self.lock.withLock { self.nextConnectionID - 1 } }

    /// Calls the client holds right now.
    var pendingCalls: Int { self.lock.withLock { self.activeCalls } }
}
