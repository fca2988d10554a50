import LiveRelayTLS
import LiveRelayWire
import Logging
import NIOCore

/// The client's end of one connection: carries out what
/// `ClientConnectionStateMachine` decides, and nothing else.
///
/// It sits above `OpenSSLHandler` (or directly on the socket without TLS).
/// Rules (ids, limits, deadlines, GOAWAY, keepalive) live in the state machine;
/// this class turns its actions into bytes, timers and completed futures. Three
/// choices keep it cheap per call: frames from many calls are encoded into one
/// buffer and written with one flush (after a read batch, or once per turn of
/// the event loop); one timer is kept at the state machine's `nextTimeout`
/// instead of one per call; and calls complete on this loop without a hop.
///
/// Calls the server has no room for (MAX_REQUESTS_IN_FLIGHT) are parked here
/// in order and started when the state machine reports free slots.
///
/// Time is the event loop's `now`, so that on an `EmbeddedEventLoop` a test
/// steps deadlines and keepalives with the loop's virtual clock.
final class ClientConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var stateMachine: ClientConnectionStateMachine
    private var decoder: FrameDecoder
    private let encoder = FrameEncoder()
    private var outbound = ByteBuffer()
    private var context: ChannelHandlerContext?

    private let pool: any ClientConnectionDelegate
    private let connection: PooledConnection
    private let usesTLS: Bool
    private let logger: Logger

    /// Sent calls by id. Calls failed locally (deadline, cancel) leave at once;
    /// the state machine keeps their ids until the server's reply.
    private var calls: [RequestID: ClientCall] = [:]
    /// Waiting for a slot under the server's MAX_REQUESTS_IN_FLIGHT, in arrival order.
    private var parked = CircularBuffer<ClientCall>()
    /// No parked call has a deadline before this (it may be stale: an early wake-up at worst).
    private var parkedDeadline: NIODeadline?

    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private var isReading = false
    private var flushScheduled = false
    /// Calls that left this connection since the pool last heard, and how many of them succeeded.
    private var released = 0
    private var succeeded = 0

    private var isUsable = false
    private var firstError: (any Error)?
    /// The reason of a GOAWAY UNAUTHENTICATED, which fails every call with a message about the key, not about going away.
    private var refusedKeyReason: String?

    init(
        configuration: ClientConnectionStateMachine.Configuration,
        pool: any ClientConnectionDelegate,
        connection: PooledConnection,
        usesTLS: Bool,
        logger: Logger
    ) {
        self.stateMachine = ClientConnectionStateMachine(configuration: configuration)
        self.decoder = configuration.makeFrameDecoder()
        self.pool = pool
        self.connection = connection
        self.usesTLS = usesTLS
        self.logger = logger
    }

    /// The loop's clock: the wall clock on a real loop, virtual time on an embedded one.
    private var now: NIODeadline { self.context?.eventLoop.now ?? .now() }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.outbound = context.channel.allocator.buffer(capacity: 4096)
        if !self.usesTLS, context.channel.isActive {
            self.begin()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        if !self.usesTLS {
            self.begin()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSEvent {
            self.begin()
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// The transport is up: preface and HELLO go out, and the pool may send
    /// calls at once (0-RTT); the server holds them until it has checked the key.
    private func begin() {
        guard !self.isUsable, let context else { return }
        self.isUsable = true
        self.perform(self.stateMachine.connect(now: self.now))
        self.afterEvent()
        self.logger.debug("connected", metadata: ["remote": "\(context.channel.remoteAddress.map { "\($0)" } ?? "?")"])
        self.pool.connectionUsable(self.connection)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.isReading = true
        self.decoder.append(self.unwrapInboundIn(data))
        let now = self.now
        while !self.stateMachine.isClosed {
            let frame: Frame?
            do {
                frame = try self.decoder.nextFrame()
            } catch {
                self.logger.warning("the server's bytes do not parse: \(error)")
                self.perform(self.stateMachine.receiveDecodingError(error, now: now))
                break
            }
            guard let frame else { break }
            if case .goAway(let goAway) = frame {
                // The pool first, so that calls failed below as "not processed" are
                // resent on another connection, never on this one.
                self.logger.debug(
                    "GOAWAY from the server",
                    metadata: ["code": "\(goAway.code)", "last_request_id": "\(goAway.lastRequestID)", "reason": "\(goAway.reason)"]
                )
                self.pool.connectionGoingAway(self.connection, code: goAway.code)
                if goAway.code == .unauthenticated { self.refusedKeyReason = goAway.reason }
            }
            self.perform(self.stateMachine.receive(frame, now: now))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.isReading = false
        self.afterEvent()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.firstError == nil { self.firstError = error }
        self.logger.debug("connection error: \(error)")
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.timerDeadline = nil
        let wasUsable = self.isUsable
        self.isUsable = false
        // The pool first, so that the calls failed below are not handed back here.
        self.pool.connectionClosed(self.connection, error: self.firstError, wasUsable: wasUsable)
        self.failParked(
            LiveRelayClientError(status: .unavailable, message: "connection closed before the call was sent", processing: .notProcessed)
        )
        self.perform(self.stateMachine.peerClosed())
        self.publish()
        context.fireChannelInactive()
    }

    // MARK: Commands from the pool (on this loop)

    func start(_ call: ClientCall) {
        self.startOne(call)
        self.afterEvent()
    }

    func start(_ batch: [ClientCall]) {
        for call in batch { self.startOne(call) }
        self.afterEvent()
    }

    private func startOne(_ call: ClientCall) {
        if call.isCancelled {
            self.release(call, LiveRelayClientError(status: .cancelled, message: "cancelled by the client", processing: .notProcessed))
        } else if !self.isUsable {
            self.release(call, LiveRelayClientError(status: .unavailable, message: "connection is not open", processing: .notProcessed))
        } else if !self.parked.isEmpty {
            self.park(call)
        } else {
            _ = self.send(call, now: self.now)
        }
    }

    /// Starts `call` on the state machine; false when it had to wait for a slot (and was not parked).
    private func send(_ call: ClientCall, now: NIODeadline) -> Bool {
        var timeout: TimeAmount? = nil
        if let deadline = call.deadline {
            timeout = deadline - now
        }
        switch self.stateMachine.startRequest(method: call.method, payload: call.payload, timeout: timeout, now: now) {
        case .send(let id, let frame):
            call.requestID = id
            self.calls[id] = call
            self.encoder.encode(frame, into: &self.outbound)
            return true
        case .wait:
            if self.parked.isEmpty || self.parked.first !== call {
                self.park(call)
            }
            return false
        case .fail(let failure):
            self.release(call, LiveRelayClientError(failure))
            return true
        }
    }

    private func park(_ call: ClientCall) {
        self.parked.append(call)
        if let deadline = call.deadline, self.parkedDeadline.map({ deadline < $0 }) ?? true {
            self.parkedDeadline = deadline
        }
    }

    /// The caller gave up: a parked call just leaves; a sent one is CANCELled through the state machine.
    func cancel(_ call: ClientCall) {
        if let index = self.parked.firstIndex(where: { $0 === call }) {
            self.parked.remove(at: index)
            self.release(call, LiveRelayClientError(status: .cancelled, message: "cancelled by the client", processing: .notProcessed))
        } else if let id = call.requestID, self.calls[id] === call {
            self.perform(self.stateMachine.cancel(id, now: self.now))
        }
        self.afterEvent()
    }

    /// GOAWAY NO_ERROR, then close once every outstanding reply is in.
    func gracefulShutdown() {
        self.failParked(LiveRelayClientError(status: .unavailable, message: "client is shutting down", processing: .notProcessed))
        self.perform(self.stateMachine.beginGracefulShutdown(now: self.now))
        if !self.isUsable || self.stateMachine.isClosed {
            self.flushNow()
            self.context?.close(promise: nil)
        }
        self.afterEvent()
    }

    /// The grace period of a shutdown is over: close with whatever is still outstanding.
    func forceClose() {
        self.context?.close(promise: nil)
    }

    // MARK: Actions

    private func perform(_ actions: [ClientConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .writePreface:
                self.encoder.writePreface(into: &self.outbound)
            case .write(let frame):
                self.encoder.encode(frame, into: &self.outbound)
            case .connected(_, let settings):
                self.logger.debug("WELCOME", metadata: ["max_requests_in_flight": "\(settings.maxRequestsInFlight)"])
                self.pool.connectionEstablished(self.connection, maxRequestsInFlight: Int(settings.maxRequestsInFlight))
            case .succeed(let id, let bytes):
                if let call = self.calls.removeValue(forKey: id) {
                    self.released += 1
                    if call.succeed(bytes) { self.succeeded += 1 }
                }
            case .fail(let id, let failure):
                if let call = self.calls.removeValue(forKey: id) {
                    var error = LiveRelayClientError(failure)
                    if let reason = self.refusedKeyReason, failure.status == .unauthenticated {
                        error.message = "the server refused the API key: \(reason.isEmpty ? "no reason given" : reason)"
                    }
                    self.release(call, error)
                }
            case .requestSlotsAvailable:
                self.startParked()
            case .close:
                self.flushNow()
                self.context?.close(promise: nil)
            }
        }
    }

    private func startParked() {
        let now = self.now
        while let call = self.parked.first {
            if let deadline = call.deadline, deadline <= now {
                self.parked.removeFirst()
                self.release(call, Self.expiredBeforeSending)
                continue
            }
            guard self.send(call, now: now) else { break }
            self.parked.removeFirst()
        }
        if self.parked.isEmpty { self.parkedDeadline = nil }
    }

    private static let expiredBeforeSending = LiveRelayClientError(
        status: .deadlineExceeded,
        message: "deadline exceeded while waiting for a free request slot",
        processing: .notProcessed
    )

    private func failParked(_ error: LiveRelayClientError) {
        while let call = self.parked.popFirst() {
            self.release(call, error)
        }
        self.parkedDeadline = nil
    }

    /// The call leaves this connection with a failure; the pool decides whether it is resent.
    private func release(_ call: ClientCall, _ error: LiveRelayClientError) {
        self.released += 1
        self.pool.callFailed(call, error)
    }

    // MARK: After every event: flush, timer, load

    private func afterEvent() {
        guard !self.isReading else { return }
        if self.outbound.readableBytes > 0, !self.flushScheduled, let context {
            // Once per turn of the loop: calls started by other threads arrive as
            // separate tasks, and this one runs after those already queued.
            self.flushScheduled = true
            context.eventLoop.assumeIsolated().execute {
                self.flushScheduled = false
                self.flushNow()
            }
        }
        self.rearmTimer()
        self.publish()
    }

    private func flushNow() {
        guard self.outbound.readableBytes > 0, let context else { return }
        let capacity = max(4096, min(self.outbound.readableBytes, 1 << 20))
        context.writeAndFlush(self.wrapOutboundOut(self.outbound), promise: nil)
        self.outbound = context.channel.allocator.buffer(capacity: capacity)
    }

    /// Counters reset before the pool hears of them: the pool may hand this
    /// connection waiting calls at once, re-entering here on the same loop.
    private func publish() {
        guard self.released > 0 else { return }
        let released = self.released
        let succeeded = self.succeeded
        self.released = 0
        self.succeeded = 0
        self.pool.connectionReleased(self.connection, calls: released, succeeded: succeeded)
    }

    private func rearmTimer() {
        guard let context else { return }
        let next: NIODeadline?
        switch (self.stateMachine.nextTimeout, self.parked.isEmpty ? nil : self.parkedDeadline) {
        case (let a?, let b?): next = min(a, b)
        case (let a?, nil): next = a
        case (nil, let b?): next = b
        case (nil, nil): next = nil
        }
        guard next != self.timerDeadline else { return }
        self.timer?.cancel()
        self.timerDeadline = next
        self.timer = next.map { deadline in
            context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { self.timerFired() }
        }
    }

    private func timerFired() {
        self.timer = nil
        self.timerDeadline = nil
        let now = self.now
        self.perform(self.stateMachine.timerFired(now: now))
        if let deadline = self.parkedDeadline, deadline <= now {
            var kept = CircularBuffer<ClientCall>(initialCapacity: self.parked.count)
            var earliest: NIODeadline? = nil
            while let call = self.parked.popFirst() {
                if let deadline = call.deadline, deadline <= now {
                    self.release(call, Self.expiredBeforeSending)
                } else {
                    kept.append(call)
                    if let deadline = call.deadline { earliest = min(earliest ?? deadline, deadline) }
                }
            }
            self.parked = kept
            self.parkedDeadline = earliest
        }
        self.afterEvent()
    }
}

@available(*, unavailable)
extension ClientConnectionHandler: Sendable {}

/// What a connection's handler reports, and to whom: the pool, which decides
/// where calls go next. Calls come back through `callFailed` (to be resent or
/// failed to the caller) or complete in the handler on success.
protocol ClientConnectionDelegate: AnyObject, Sendable {
    /// TCP (and TLS) are up and HELLO is written: calls may go out.
    func connectionUsable(_ connection: PooledConnection)
    /// WELCOME: the server accepted the key, and said how many calls it takes at once.
    func connectionEstablished(_ connection: PooledConnection, maxRequestsInFlight: Int)
    /// GOAWAY: no new calls go there.
    func connectionGoingAway(_ connection: PooledConnection, code: GoAwayCode)
    func connectionClosed(_ connection: PooledConnection, error: (any Error)?, wasUsable: Bool)
    /// Calls left the connection (`succeeded` of them answered): waiting calls may take their slots.
    func connectionReleased(_ connection: PooledConnection, calls: Int, succeeded: Int)
    /// A call left the connection with a failure.
    func callFailed(_ call: ClientCall, _ error: LiveRelayClientError)
}
