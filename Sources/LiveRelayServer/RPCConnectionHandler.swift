import LiveRelayMessages
import LiveRelayService
import LiveRelayWire
import Logging
import NIOCore

/// One RPC connection: bytes in, the wire state machine's actions out.
///
/// Placed after `OpenSSLHandler` (or first, in plaintext). Every protocol rule
/// lives in `ServerConnectionStateMachine`; this handler only decodes frames,
/// feeds them in, and carries out the returned actions, as swift-nio-http2 and
/// grpc-swift's transport do, so the rules stay testable without sockets.
///
/// Everything happens on the channel's event loop with no hop into Swift
/// concurrency: service futures completed on this loop are answered in the
/// same turn, so a whole read batch of pipelined calls goes out in one flush.
///
/// Actions are applied through a queue: a service that completes at once
/// produces its reply's actions while the dispatching action list is still
/// being applied, and they must run after the rest of that list (a
/// `.pauseReading` still pending there must not override the reply's
/// `.resumeReading`).
public final class RPCConnectionHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer
    typealias Action = ServerConnectionStateMachine.Action

    /// Fire this user event into the pipeline to start a graceful drain:
    /// GOAWAY NO_ERROR, in-flight calls finish, later ones get UNAVAILABLE, then close.
    public struct GracefulShutdown: Sendable, Hashable {
        public init() {}
    }

    /// Fire this user event into every connection when API keys are revoked:
    /// a connection authenticated with one of them gets GOAWAY UNAUTHENTICATED,
    /// its calls in flight are answered, and it closes; the others ignore it.
    public struct KeysRevoked: Sendable, Hashable {
        public var keyIDs: Set<String>
        public init(keyIDs: Set<String>) { self.keyIDs = keyIDs }
    }

    struct Call {
        var cancellation: CancellationFlag
        var method: Int
        var start: NIODeadline
        /// The service has produced its result (the reply may still be queued).
        var workDone = false
    }

    let service: any LiveRelayService
    /// The admin API, for admin keys; nil: its methods are UNIMPLEMENTED here.
    let admin: (any AdminService)?
    let authenticator: any Authenticator
    let metrics: ServerMetrics
    private let shutdownFlag: ShutdownFlag?
    /// Counts this connection against its key's limit once authenticated; nil: no limit.
    private let limiter: ConnectionLimiter?
    /// The key whose slot this connection holds, until the connection closes and gives it back.
    private var countedKeyID: String?
    /// Bounds the partial frames buffered across connections; nil: no bound.
    private let requestMemory: RequestMemoryBudget?
    private let memoryHolder: RequestMemoryBudget.Holder?
    /// The payload of the frame the decoder is reading is reserved in `requestMemory`
    /// (given back once the decoder returns that frame).
    private var holdsReservation = false
    /// The pending frame's reservation waits: nothing more is read until it is granted.
    private var awaitingMemory = false
    /// Where every timestamp the state machine sees comes from. Injected so a
    /// test can run the handler on an `EmbeddedEventLoop` and move deadlines
    /// with the loop's virtual time; the server always reads the real clock.
    let clock: () -> NIODeadline
    var logger: Logger
    private let encoder = FrameEncoder()

    var stateMachine: ServerConnectionStateMachine
    private var decoder: FrameDecoder
    var context: ChannelHandlerContext?
    var principal: Principal?
    var calls: [RequestID: Call] = [:]

    private var queue = CircularBuffer<Action>(initialCapacity: 16)
    private var applying = false
    private var decoding = false
    private var decoderFailed = false
    /// The state machine's backpressure: MAX_REQUESTS_IN_FLIGHT calls are running.
    private var readingPaused = false
    /// Write-side backpressure: the channel is not writable (its unsent bytes
    /// passed the high water mark), so a peer that sends but does not read its
    /// replies gets no more requests decoded, and the server buffers no more for it.
    private var repliesBacklogged = false
    /// Reads and decoding wait while any holds.
    private var holdingRequests: Bool { readingPaused || repliesBacklogged || awaitingMemory || yieldedTurn }
    /// This connection decoded ``framesPerTurn`` frames in a row and let the event loop's
    /// other connections have their turn: the rest are decoded (and the socket read again)
    /// in a task queued behind them.
    private var yieldedTurn = false

    /// The most frames decoded in one go before the other connections of the event loop
    /// get theirs. One read can bring hundreds of pipelined calls; decoding all of them
    /// before the next connection is read would let a flooding caller add their whole cost
    /// to every other caller's latency.
    static let framesPerTurn = 64
    private var needsDecode = false
    private var readPending = false
    private var inReadBatch = false
    private var outbound: ByteBuffer?
    private var needsFlush = false
    private var flushScheduled = false
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private var closing = false
    private var active = false
    /// The HELLO's key was refused and that was logged: the GOAWAY that follows is
    /// the same event, and one refusal is one line.
    private var refusalLogged = false

    /// Writes are handed to the channel (still unflushed) once this many bytes
    /// are batched, so a huge burst of replies does not grow one buffer without bound.
    private static let maxBatchBytes = 256 * 1024

    public convenience init(
        configuration: ServerConnectionStateMachine.Configuration,
        service: any LiveRelayService,
        authenticator: any Authenticator,
        logger: Logger
    ) {
        self.init(
            configuration: configuration,
            service: service,
            authenticator: authenticator,
            logger: logger,
            metrics: .shared,
            shutdownFlag: nil
        )
    }

    init(
        configuration: ServerConnectionStateMachine.Configuration,
        service: any LiveRelayService,
        authenticator: any Authenticator,
        logger: Logger,
        metrics: ServerMetrics,
        shutdownFlag: ShutdownFlag? = nil,
        limiter: ConnectionLimiter? = nil,
        requestMemory: RequestMemoryBudget? = nil,
        admin: (any AdminService)? = nil,
        clock: @escaping () -> NIODeadline = { .now() }
    ) {
        self.service = service
        self.admin = admin
        self.authenticator = authenticator
        self.logger = logger
        self.metrics = metrics
        self.shutdownFlag = shutdownFlag
        self.limiter = limiter
        self.requestMemory = requestMemory
        self.memoryHolder = requestMemory?.makeHolder()
        self.clock = clock
        self.stateMachine = ServerConnectionStateMachine(configuration: configuration, now: clock())
        self.decoder = configuration.makeFrameDecoder()
    }

    // MARK: Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { becameActive(context: context) }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        releaseKeySlot()
        releaseRequestMemory()
        self.context = nil
    }

    public func channelActive(context: ChannelHandlerContext) {
        becameActive(context: context)
        context.fireChannelActive()
    }

    private func becameActive(context: ChannelHandlerContext) {
        guard !active else { return }
        active = true
        metrics.connectionsAccepted.increment()
        metrics.connectionsActive.increment()
        logger.debug("connection opened")
        if shutdownFlag?.isSet == true {
            apply(stateMachine.beginGracefulShutdown(now: clock()))
            flushSoon()
        } else {
            rearmTimer()
        }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        if active {
            metrics.connectionsActive.decrement()
        }
        closing = true
        cancelTimer()
        apply(stateMachine.peerClosed())
        releaseKeySlot()
        releaseRequestMemory()
        for call in calls.values { call.cancellation.cancel() }
        calls.removeAll()
        outbound = nil
        logger.debug("connection closed")
        context.fireChannelInactive()
    }

    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS failures and socket errors: the connection is unusable; the peer
        // is gone or misbehaving, which is not the server's problem to shout about.
        logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        let backlogged = !context.channel.isWritable
        let resumed = repliesBacklogged && !backlogged
        repliesBacklogged = backlogged
        if resumed {
            // The peer read its replies: decode what waits, and read again.
            needsDecode = true
            if !applying { resumeRequests() }
        }
        context.fireChannelWritabilityChanged()
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GracefulShutdown {
            apply(stateMachine.beginGracefulShutdown(now: clock()))
            flushSoon()
            return
        }
        if let revoked = event as? KeysRevoked {
            if let principal, revoked.keyIDs.contains(principal.keyID) {
                apply(stateMachine.credentialsRevoked(reason: "API key \(principal.keyID) was revoked", now: clock()))
                flushSoon()
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inReadBatch = true
        decoder.append(unwrapInboundIn(data))
        decodeFrames()
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        inReadBatch = false
        flushNow()
        context.fireChannelReadComplete()
    }

    /// Backpressure: while paused, the read the channel asks for is held back,
    /// so the socket is not read, the kernel buffer fills and TCP pushes back.
    public func read(context: ChannelHandlerContext) {
        if holdingRequests {
            readPending = true
        } else {
            context.read()
        }
    }

    /// Pulls frames out of the decoder while reading is not paused, then reserves
    /// the payload of the frame left half read.
    private func decodeFrames() {
        guard !decoding else { return }
        decoding = true
        defer {
            decoding = false
            reserveForPendingFrame()
        }
        var decodedThisTurn = 0
        while !holdingRequests, !decoderFailed, !closing {
            if decodedThisTurn == Self.framesPerTurn {
                yieldTurn()
                break
            }
            do {
                guard let frame = try decoder.nextFrame() else { break }
                if holdsReservation { releaseRequestMemory() }
                decodedThisTurn += 1
                apply(stateMachine.receive(frame, now: clock()))
            } catch {
                decoderFailed = true
                logger.debug("malformed input", metadata: ["error": "\(error)"])
                apply(stateMachine.receiveDecodingError(error, now: clock()))
            }
        }
    }

    /// Lets the event loop serve its other connections, then decodes on.
    private func yieldTurn() {
        guard let context else { return }
        yieldedTurn = true
        context.eventLoop.assumeIsolated().execute {
            self.yieldedTurn = false
            // Replies of the turn so far go out before the next turn's.
            self.flushNow()
            self.needsDecode = true
            if !self.applying { self.resumeRequests() }
        }
    }

    // MARK: Actions

    func apply(_ actions: [Action]) {
        guard !actions.isEmpty else { return }
        queue.append(contentsOf: actions)
        guard !applying else { return }
        applying = true
        while let action = queue.popFirst() {
            perform(action)
        }
        applying = false
        resumeRequests()
        rearmTimer()
    }

    /// Decodes the frames that waited and passes on the read the channel asked
    /// for, once neither kind of backpressure holds them.
    private func resumeRequests() {
        if needsDecode {
            needsDecode = false
            decodeFrames()
        }
        if readPending, !holdingRequests, let context {
            readPending = false
            context.read()
        }
    }

    private func perform(_ action: Action) {
        switch action {
        case .write(let frame):
            write(frame)
        case .authenticate(let apiKey, let clientName, let version):
            authenticate(apiKey: apiKey, clientName: clientName, version: version)
        case .dispatch(let dispatch):
            self.dispatch(dispatch)
        case .cancelWork(let id):
            calls.removeValue(forKey: id)?.cancellation.cancel()
        case .pauseReading:
            readingPaused = true
        case .resumeReading:
            readingPaused = false
            needsDecode = true
        case .close:
            flushNow()
            closing = true
            cancelTimer()
            context?.close(promise: nil)
        }
    }

    private func authenticate(apiKey: ByteBuffer, clientName: String, version: UInt16) {
        // Every later line of the connection says which client it is.
        logger[metadataKey: "client"] = "\(Self.loggable(clientName: clientName))"
        switch authenticator.authenticate(apiKey: apiKey) {
        case .success(let principal):
            self.principal = principal
            logger[metadataKey: "key_id"] = "\(principal.keyID)"
            if case .refused(let open, let limit) = limiter?.acquire(keyID: principal.keyID) {
                metrics.connectionsRefusedOverKeyLimit.increment()
                let reason = ConnectionLimiter.refusalReason(keyID: principal.keyID, open: open, limit: limit)
                apply(stateMachine.connectionLimitReached(reason: reason, now: clock()))
                return
            }
            countedKeyID = limiter == nil ? nil : principal.keyID
            logger.debug("authenticated", metadata: ["version": "\(version)"])
            apply(stateMachine.authenticationSucceeded(now: clock()))
        case .failure(let failure):
            metrics.authenticationFailures.increment()
            // The refusal's one line: the GOAWAY that answers it is not logged again.
            refusalLogged = true
            logger.notice("API key refused", metadata: ["version": "\(version)", "reason": "\(failure.message)"])
            apply(stateMachine.authenticationFailed(message: failure.message, now: clock()))
        }
    }

    /// The most of a client name a log line carries, in UTF-8 bytes.
    static let maxLoggedClientNameBytes = 64

    /// The HELLO's client name as a log field: the peer's own text, sent before
    /// its key is checked, so it must not be able to end the line and forge the
    /// next one (a newline), rewrite the terminal (an escape sequence), reorder
    /// what is shown (a bidirectional override) or fill the log. Control,
    /// format and line or paragraph separator characters are written as Swift
    /// escapes (`\n`, `\u{1B}`), and the result is cut to
    /// ``maxLoggedClientNameBytes``, never inside a UTF-8 sequence or an
    /// escape, ending in `...` when cut.
    static func loggable(clientName: String) -> String {
        var pieces: [String] = []
        var bytes = 0
        for scalar in clientName.unicodeScalars {
            let piece: String
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator:
                piece = scalar.escaped(asASCII: true)
            default:
                piece = String(scalar)
            }
            pieces.append(piece)
            bytes += piece.utf8.count
        }
        guard bytes > maxLoggedClientNameBytes else { return pieces.joined() }
        let marker = "..."
        var kept = ""
        var keptBytes = 0
        for piece in pieces {
            guard keptBytes + piece.utf8.count <= maxLoggedClientNameBytes - marker.utf8.count else { break }
            kept += piece
            keptBytes += piece.utf8.count
        }
        return kept + marker
    }

    // MARK: Request memory

    /// Reserves the payload of the frame whose header the decoder has read, or
    /// stops reading until that is granted.
    private func reserveForPendingFrame() {
        guard let requestMemory, let memoryHolder, !holdsReservation, !awaitingMemory, !closing, !decoderFailed,
            let pending = decoder.pendingPayloadLength, let context
        else { return }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        if requestMemory.reserve(
            pending, for: memoryHolder, keyID: principal?.keyID,
            granted: {
                loop.execute { handler.value.requestMemoryGranted() }
            })
        {
            holdsReservation = true
        } else {
            awaitingMemory = true
            metrics.readsHeldForMemory.increment()
        }
    }

    private func requestMemoryGranted() {
        guard awaitingMemory else { return }
        awaitingMemory = false
        holdsReservation = true
        needsDecode = true
        if !applying { resumeRequests() }
    }

    /// Gives back the reservation, or ends its wait: for a frame that is whole, and on close.
    private func releaseRequestMemory() {
        guard let requestMemory, let memoryHolder else { return }
        holdsReservation = false
        awaitingMemory = false
        requestMemory.release(memoryHolder)
    }

    /// Gives the key's slot back, once, whichever way the connection ends
    /// (`channelInactive` on a close, `handlerRemoved` if the handler goes first).
    private func releaseKeySlot() {
        guard let keyID = countedKeyID else { return }
        countedKeyID = nil
        limiter?.release(keyID: keyID)
    }

    private func write(_ frame: Frame) {
        guard let context, !closing else { return }
        switch frame {
        case .response(let id, _):
            recordReply(id, status: .ok)
        case .error(let id, let error):
            recordReply(id, status: error.status)
        case .goAway(let goAway):
            metrics.recordGoAway(goAway.code)
            let metadata: Logger.Metadata = [
                "code": "\(goAway.code)", "reason": "\(goAway.reason)", "last_request_id": "\(goAway.lastRequestID)",
            ]
            // After a refused HELLO, "API key refused" was the line.
            if !refusalLogged {
                let quiet = goAway.code == .noError || goAway.code == .idleTimeout
                logger.log(level: quiet ? .debug : .info, "GOAWAY", metadata: metadata)
            }
        default:
            break
        }
        if outbound == nil {
            outbound = context.channel.allocator.buffer(capacity: 4096)
        }
        encoder.encode(frame, into: &outbound!)
        if outbound!.readableBytes >= Self.maxBatchBytes {
            context.write(wrapOutboundOut(outbound.take()!), promise: nil)
            needsFlush = true
        }
    }

    private func recordReply(_ id: RequestID, status: StatusCode) {
        guard let call = calls[id] else {
            metrics.recordRequest(method: ServerMetrics.unknownMethod, status: status, latency: nil)
            return
        }
        metrics.recordRequest(method: call.method, status: status, latency: clock() - call.start)
        // A call answered before its work finished (deadline, cancel) stays
        // until the `.cancelWork` that follows, which sets its flag.
        if call.workDone {
            calls.removeValue(forKey: id)
        }
    }

    // MARK: Flushing and timers

    /// Writes the batch and flushes: once per read batch, once per close.
    func flushNow() {
        guard let context else { return }
        if let buffer = outbound.take(), buffer.readableBytes > 0 {
            context.write(wrapOutboundOut(buffer), promise: nil)
            needsFlush = true
        }
        if needsFlush {
            needsFlush = false
            context.flush()
        }
    }

    /// For writes made outside a read batch (service completions, timers,
    /// shutdown): one flush after every completion already queued on the loop
    /// has run, so replies finishing together share a flush.
    func flushSoon() {
        guard !inReadBatch, !flushScheduled, outbound != nil || needsFlush, let context else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            self.flushNow()
        }
    }

    /// One timer for the whole connection, re-armed only when the next timeout
    /// moves earlier: a timer that fires early just finds nothing due, which
    /// is cheaper than rescheduling on every frame.
    private func rearmTimer() {
        guard !closing, let context, let next = stateMachine.nextTimeout else { return }
        if let armed = timerDeadline, armed <= next { return }
        timer?.cancel()
        timerDeadline = next
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: next) {
            self.timer = nil
            self.timerDeadline = nil
            self.apply(self.stateMachine.timerFired(now: self.clock()))
            self.rearmTimer()
            self.flushSoon()
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }
}

@available(*, unavailable)
extension RPCConnectionHandler: Sendable {}
