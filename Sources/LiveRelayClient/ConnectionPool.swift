import LiveRelayTLS
import LiveRelayWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// N connections to one server, the calls waiting for them, and reconnection.
///
/// The decisions (which connection gets a call, when a call waits, when a slot
/// reconnects) are ``ClientPoolStateMachine``'s; this class holds it under one
/// lock together with what it cannot hold as a value (the connections' channels,
/// the timers), and carries out its actions after the lock is released, because
/// carrying one out can re-enter the pool on the same thread: a connect can fail
/// at once, and a completed call can run caller code that starts another call.
final class ConnectionPool: ClientConnectionDelegate, @unchecked Sendable {
    private typealias Machine = ClientPoolStateMachine<ClientCall>

    /// An action of the machine with its connection looked up, ready to run outside the lock.
    private enum Effect {
        case connect(PooledConnection)
        case start(PooledConnection, [ClientCall])
        case fail(ClientCall, LiveRelayClientError)
        case reject(ClientCall, LiveRelayClientError)
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
    /// Under the lock.
    private var machine: Machine
    /// Under the lock: the connections the machine opened whose close is not yet reported.
    private var open: [Int: PooledConnection] = [:]
    /// Under the lock: back-off timers by slot, cancelled at shutdown.
    private var reconnectTimers: [Int: Scheduled<Void>] = [:]

    init(configuration: LiveRelayClient.Configuration, group: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.machine = Machine(
            configuration: .init(
                connections: max(1, configuration.connections),
                maxPendingCalls: configuration.maxPendingCalls,
                backoff: configuration.backoff.rule,
                serverName: "\(configuration.host):\(configuration.port)"
            ))
        var setupError: LiveRelayClientError? = nil
        var tlsContext: TLSContext? = nil
        if let tls = configuration.tls {
            do {
                tlsContext = try TLSContext(configuration: tls.configuration)
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
                keepaliveInterval: configuration.keepaliveInterval.map { TimeAmount($0) }
            )
        } else {
            self.machineConfiguration = nil
            setupError =
                setupError
                ?? LiveRelayClientError(
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
        if let setupError = self.setupError {
            let call = ClientCall(
                method: method, payload: payload, deadline: deadline, idempotent: idempotent, promise: self.group.any().makePromise()
            )
            call.fail(setupError)
            return call
        }
        var effects: [Effect] = []
        let call: ClientCall = self.lock.withLock {
            let loop = self.machine.preferredConnection.flatMap { self.open[$0]?.eventLoop } ?? self.group.any()
            let call = ClientCall(
                method: method, payload: payload, deadline: deadline, idempotent: idempotent, promise: loop.makePromise()
            )
            effects = self.settle(self.machine.submit(call))
            return call
        }
        self.run(effects)
        return call
    }

    /// Places a call again after a failure that allows it.
    private func resubmit(_ call: ClientCall) {
        self.run(self.lock.withLock { self.settle(self.machine.resubmit(call)) })
    }

    private func expireQueued(_ call: ClientCall) {
        self.run(self.lock.withLock { self.settle(self.machine.expire(call)) })
    }

    /// The caller's task was cancelled.
    func cancel(_ call: ClientCall) {
        switch call.markCancelled() {
        case .new, .finished:
            return
        case .queued:
            self.run(self.lock.withLock { self.settle(self.machine.cancelQueued(call)) })
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
        guard !self.lock.withLock({ self.machine.isShutDown }) else { return false }
        switch error.processing {
        case .notProcessed:
            return error.status == .unavailable
        case .mayHaveBeenProcessed:
            return policy.retryIdempotentCalls && call.idempotent && (error.status == .unavailable || error.status == .internal)
        case .answered:
            return false
        }
    }

    /// Fails an admitted call once; only the first completion counts it as no longer pending.
    private func finish(_ call: ClientCall, _ error: LiveRelayClientError) {
        if call.fail(error) {
            self.lock.withLock { self.machine.callsFinished(1) }
        }
    }

    // MARK: Reports from connections

    /// Calls left `connection` (`succeeded` of them answered): waiting calls may take their slots.
    func connectionReleased(_ connection: PooledConnection, calls: Int, succeeded: Int) {
        self.run(
            self.lock.withLock {
                self.machine.callsFinished(succeeded)
                return self.settle(self.machine.released(connection.id, calls: calls))
            })
    }

    /// TCP (and TLS) are up and HELLO is written: calls may go out.
    func connectionUsable(_ connection: PooledConnection) {
        self.run(self.lock.withLock { self.settle(self.machine.connectionUsable(connection.id)) })
    }

    /// WELCOME: the server accepted the key, and said how many calls it takes at once.
    func connectionEstablished(_ connection: PooledConnection, maxRequestsInFlight: Int) {
        self.lock.withLock {
            self.machine.connectionEstablished(connection.id, maxRequestsInFlight: maxRequestsInFlight)
        }
    }

    /// GOAWAY: no new calls go there; its slot gets a new connection.
    func connectionGoingAway(_ connection: PooledConnection, code: GoAwayCode) {
        self.run(
            self.lock.withLock {
                self.settle(self.machine.connectionGoingAway(connection.id, code: code, random: Double.random(in: 0..<1)))
            })
    }

    func connectionClosed(_ connection: PooledConnection, error: (any Error)?, wasUsable: Bool) {
        var effects: [Effect] = []
        let firstReport: Bool = self.lock.withLock {
            // Reports can come from the connect future and from the handler.
            guard !connection.closed else { return false }
            connection.closed = true
            self.open[connection.id] = nil
            let reason = error.map { Self.describe($0) } ?? "connection closed"
            effects = self.settle(
                self.machine.connectionClosed(
                    connection.id, wasUsable: wasUsable, reason: reason, random: Double.random(in: 0..<1)
                ))
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

    private func reconnectDue(slot: Int) {
        self.run(
            self.lock.withLock {
                self.reconnectTimers[slot] = nil
                return self.settle(self.machine.reconnectDue(slot: slot))
            })
    }

    // MARK: Carrying out decisions

    /// Under the lock: the bookkeeping part of the machine's actions (where each
    /// call is, the connections opened, the timers), so that a cancel or a
    /// deadline that takes the lock next finds the call where the machine put it.
    /// What remains is I/O and completing futures, for ``run(_:)``.
    private func settle(_ initial: [Machine.Action]) -> [Effect] {
        var actions = initial
        var effects: [Effect] = []
        var batches: [(PooledConnection, [ClientCall])] = []
        var batchIndex: [Int: Int] = [:]
        var next = 0
        while next < actions.count {
            let action = actions[next]
            next += 1
            switch action {
            case .connect(_, let id):
                let connection = PooledConnection(id: id, eventLoop: self.group.any())
                self.open[id] = connection
                effects.append(.connect(connection))
            case .scheduleReconnect(let slot, let delay):
                self.reconnectTimers[slot] = self.group.any().scheduleTask(in: delay) { [self] in
                    self.reconnectDue(slot: slot)
                }
            case .dispatch(let call, let id):
                call.queueTimer?.cancel()
                call.queueTimer = nil
                guard let connection = self.open[id], call.move(to: .connection(connection)) else {
                    // Finished meanwhile (its caller gave up): it never reaches the connection.
                    actions += self.machine.released(id, calls: 1)
                    continue
                }
                if let index = batchIndex[id] {
                    batches[index].1.append(call)
                } else {
                    batchIndex[id] = batches.count
                    batches.append((connection, [call]))
                }
            case .queued(let call):
                guard call.move(to: .queued) else {
                    _ = self.machine.cancelQueued(call)
                    continue
                }
                if let deadline = call.deadline {
                    call.queueTimer = call.promise.futureResult.eventLoop.scheduleTask(deadline: deadline) { [self] in
                        self.expireQueued(call)
                    }
                }
            case .fail(let call, let error):
                call.queueTimer?.cancel()
                call.queueTimer = nil
                effects.append(.fail(call, error))
            case .reject(let call, let error):
                effects.append(.reject(call, error))
            case .shutDown(let id):
                if let connection = self.open[id] { effects.append(.shutdown(connection)) }
            }
        }
        return effects + batches.map { .start($0.0, $0.1) }
    }

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
                            self.callFailed(
                                call,
                                LiveRelayClientError(status: .unavailable, message: "connection is not open", processing: .notProcessed))
                        }
                    }
                }
            case .fail(let call, let error):
                self.finish(call, error)
            case .reject(let call, let error):
                call.fail(error)
            case .shutdown(let connection):
                connection.withHandler { $0?.gracefulShutdown() }
            }
        }
    }

    // MARK: Shutdown

    /// Fails what waits, sends GOAWAY on every connection, and completes once
    /// all are closed (forcibly after the grace period).
    func shutdown() -> EventLoopFuture<Void> {
        var effects: [Effect] = []
        let connections: [PooledConnection] = self.lock.withLock {
            for timer in self.reconnectTimers.values { timer.cancel() }
            self.reconnectTimers = [:]
            effects = self.settle(self.machine.shutdown())
            return Array(self.open.values)
        }
        self.run(effects)
        let loop = self.group.any()
        guard !connections.isEmpty else { return loop.makeSucceededVoidFuture() }
        let grace = loop.scheduleTask(in: TimeAmount(self.configuration.shutdownGracePeriod)) {
            for connection in connections {
                connection.withHandler { $0?.forceClose() }
            }
        }
        return EventLoopFuture.andAllComplete(connections.map { $0.closePromise.futureResult }, on: loop).always { _ in
            grace.cancel()
        }
    }

    // MARK: For tests and diagnostics

    /// Connections created so far (every connect attempt counts).
    var connectionsCreated: Int { self.lock.withLock { self.machine.connectionsCreated } }

    /// Calls the client holds right now.
    var pendingCalls: Int { self.lock.withLock { self.machine.activeCalls } }
}
