import NIOCore

/// The server's side of one connection, as a value with no I/O.
///
/// The channel handler feeds it events (decoded frames, decoding errors,
/// results of the work it dispatched, timer ticks, shutdown) with the current
/// time, and carries out the returned actions in order: write frames, start
/// or stop work, pause or resume reading, close. Every protocol rule lives
/// here, so it is tested without sockets and the handler only moves bytes.
///
/// Timers: after every event the handler (re)arms one timer at
/// `nextTimeout` and calls `timerFired(now:)` when it fires. That one timer
/// covers the HELLO timeout, request deadlines and the idle timeout.
///
/// Backpressure: `.pauseReading` means "stop reading from the socket and stop
/// taking frames out of the decoder" until `.resumeReading`. It is emitted
/// when MAX_REQUESTS_IN_FLIGHT requests are in flight, so a well-behaved
/// client never gets RESOURCE_EXHAUSTED and nothing is buffered without bound.
public struct ServerConnectionStateMachine: Sendable {
    public struct Configuration: Hashable, Sendable {
        /// Advertised in WELCOME; `maxFrameSize` is also what the decoder enforces.
        public var settings: ServerSettings
        public var supportedVersions: ClosedRange<UInt16>
        /// Time from accept to HELLO before GOAWAY HELLO_TIMEOUT: a peer that
        /// never speaks must not hold a connection.
        public var helloTimeout: TimeAmount
        /// More than this many PINGs within `pingWindow` with no REQUEST among
        /// them is a flood: GOAWAY ENHANCE_YOUR_CALM.
        public var maxPingsPerWindow: Int
        public var pingWindow: TimeAmount

        public init(
            settings: ServerSettings = ServerSettings(idleTimeoutMilliseconds: 300_000),
            supportedVersions: ClosedRange<UInt16> = ProtocolVersion.supported,
            helloTimeout: TimeAmount = .seconds(10),
            maxPingsPerWindow: Int = 10,
            pingWindow: TimeAmount = .seconds(60)
        ) {
            self.settings = settings
            self.supportedVersions = supportedVersions
            self.helloTimeout = helloTimeout
            self.maxPingsPerWindow = maxPingsPerWindow
            self.pingWindow = pingWindow
        }

        /// A decoder that expects the preface and enforces this server's MAX_FRAME_SIZE.
        public func makeFrameDecoder() -> FrameDecoder {
            FrameDecoder(expectPreface: true, maxFrameSize: self.settings.maxFrameSize)
        }
    }

    /// A request to hand to the service.
    public struct Dispatch: Hashable, Sendable {
        public var id: RequestID
        public var method: String
        public var payload: ByteBuffer
        /// Receipt time plus timeout: work not started by then should not be
        /// started, and the state machine answers DEADLINE_EXCEEDED at this time.
        public var deadline: NIODeadline?

        public init(id: RequestID, method: String, payload: ByteBuffer, deadline: NIODeadline?) {
            self.id = id
            self.method = method
            self.payload = payload
            self.deadline = deadline
        }
    }

    public enum Action: Hashable, Sendable {
        /// Encode and write this frame (flush at the end of the action list).
        case write(Frame)
        /// Check the API key, then call `authenticationSucceeded` or `authenticationFailed`.
        case authenticate(apiKey: ByteBuffer, clientName: String, version: UInt16)
        /// Start this request's work; report its result with `respond` or `fail`.
        case dispatch(Dispatch)
        /// Stop this request's work: its reply (CANCELLED or DEADLINE_EXCEEDED)
        /// has been written, or the peer is gone. A later result for it is dropped.
        case cancelWork(RequestID)
        case pauseReading
        case resumeReading
        /// Close the connection once the writes above are flushed.
        case close
    }

    enum State: Sendable {
        case awaitingHello(connectedAt: NIODeadline)
        case authenticating(Authenticating)
        case open(Open)
        case closed
        /// A placeholder while the open state is mutated in place, so that its
        /// dictionaries are uniquely referenced and never copied.
        /// Only while a mutating method holds the connection out of `state`:
        /// seeing it anywhere else means the machine was re-entered, a bug.
        case modifying
    }

    let configuration: Configuration
    var state: State
    var readingPaused = false

    public init(configuration: Configuration = Configuration(), now: NIODeadline) {
        self.configuration = configuration
        self.state = .awaitingHello(connectedAt: now)
    }

    /// Whether the connection is finished (after `.close`, or the peer closed).
    public var isClosed: Bool {
        if case .closed = self.state { return true }
        return false
    }

    /// When the handler must call `timerFired(now:)` next, or nil for no timer.
    public var nextTimeout: NIODeadline? {
        switch self.state {
        case .awaitingHello(let connectedAt):
            return connectedAt + self.configuration.helloTimeout
        case .open(let open):
            return open.nextTimeout(configuration: self.configuration)
        case .modifying: preconditionFailure(Self.reentered)
        case .authenticating, .closed:
            return nil
        }
    }

    // MARK: Events

    /// A frame from the decoder.
    public mutating func receive(_ frame: Frame, now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingHello:
            return self.receiveInAwaitingHello(frame, now: now)
        case .authenticating(var auth):
            self.state = .modifying
            let (actions, outcome) = auth.receive(frame, now: now, configuration: self.configuration)
            return self.finish(authenticating: auth, outcome: outcome, actions: actions)
        case .open(var open):
            self.state = .modifying
            let actions = open.receive(frame, now: now, configuration: self.configuration)
            return self.finish(open: open, actions: actions)
        case .modifying: preconditionFailure(Self.reentered)
        case .closed:
            return []
        }
    }

    /// The decoder failed: GOAWAY with the error's code and description. The
    /// decoder reads nothing more, but accepted requests are still answered.
    public mutating func receiveDecodingError(_ error: FrameDecodingError, now: NIODeadline) -> [Action] {
        self.connectionError(error.goAwayCode, error.description, now: now)
    }

    /// The handler accepted the API key. Writes WELCOME, then starts (or
    /// answers) the requests the client pipelined behind its HELLO.
    public mutating func authenticationSucceeded(now: NIODeadline) -> [Action] {
        guard case .authenticating(let auth) = self.state else { return [] }
        self.state = .modifying
        var actions: [Action] = [
            .write(.welcome(Frame.Welcome(version: auth.version, settings: self.configuration.settings.settings)))
        ]
        var open = Open(authenticated: auth, now: now)
        for item in auth.buffered {
            open.startBuffered(item, now: now, configuration: self.configuration, into: &actions)
        }
        if auth.peerGoAway {
            open.peerGoAway = true
        }
        return self.finish(open: open, actions: actions)
    }

    /// The handler refused the API key: GOAWAY UNAUTHENTICATED and close. No
    /// pipelined request was accepted (last_request_id 0), so none is answered.
    public mutating func authenticationFailed(message: String, now: NIODeadline) -> [Action] {
        guard case .authenticating = self.state else { return [] }
        self.state = .closed
        return [.write(.goAway(Frame.GoAway(lastRequestID: 0, code: .unauthenticated, reason: message))), .close]
    }

    /// The handler accepted the API key but will not open another connection
    /// for it: the key is at its connection limit. GOAWAY TOO_MANY_CONNECTIONS
    /// and close, as for a refused key: nothing pipelined ran (last_request_id
    /// 0), so the client may send it again on another connection later.
    ///
    /// The machine only answers: counting connections spans every connection,
    /// which is the handler's business, not one connection's state.
    public mutating func connectionLimitReached(reason: String, now: NIODeadline) -> [Action] {
        guard case .authenticating = self.state else { return [] }
        return self.closeBeforeOpen(.tooManyConnections, reason)
    }

    /// The result of a dispatched request. Returns the RESPONSE to write, or
    /// nothing if the request was already answered (cancelled, expired) or is unknown.
    public mutating func respond(_ id: RequestID, payload: ByteBuffer, now: NIODeadline) -> [Action] {
        guard case .open(var open) = self.state else { return [] }
        self.state = .modifying
        let actions = open.complete(id, with: .success(payload), now: now)
        return self.finish(open: open, actions: actions)
    }

    /// A dispatched request failed. `status` must not be `.ok`. `details` are
    /// the bytes of a `liverelay.v1.ErrorDetails` (may be empty).
    public mutating func fail(
        _ id: RequestID,
        status: StatusCode,
        message: String,
        details: ByteBuffer = ByteBuffer(),
        now: NIODeadline
    ) -> [Action] {
        precondition(status != .ok, "an ERROR frame cannot carry OK")
        guard case .open(var open) = self.state else { return [] }
        self.state = .modifying
        let error = Frame.RequestError(status: status, message: message, details: details)
        let actions = open.complete(id, with: .failure(error), now: now)
        return self.finish(open: open, actions: actions)
    }

    /// The timer armed at `nextTimeout` fired.
    public mutating func timerFired(now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingHello(let connectedAt):
            guard now >= connectedAt + self.configuration.helloTimeout else { return [] }
            let seconds = Double(self.configuration.helloTimeout.nanoseconds) / 1e9
            return self.closeBeforeOpen(.helloTimeout, "no HELLO within \(formatSeconds(seconds)) s")
        case .open(var open):
            self.state = .modifying
            let actions = open.timerFired(now: now, configuration: self.configuration)
            return self.finish(open: open, actions: actions)
        case .modifying: preconditionFailure(Self.reentered)
        case .authenticating, .closed:
            return []
        }
    }

    /// Graceful shutdown: GOAWAY NO_ERROR with the highest id seen; requests up
    /// to it are finished and answered, later ones get UNAVAILABLE; close when
    /// nothing is in flight.
    public mutating func beginGracefulShutdown(now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingHello, .authenticating:
            return self.closeBeforeOpen(.noError, "server is shutting down")
        case .open(var open):
            self.state = .modifying
            let actions = open.beginGracefulShutdown()
            return self.finish(open: open, actions: actions)
        case .modifying: preconditionFailure(Self.reentered)
        case .closed:
            return []
        }
    }

    /// The connection's API key was revoked while it was open: GOAWAY
    /// UNAUTHENTICATED with the highest id seen. Requests accepted before it
    /// were authorized and are answered; later ones are refused; the connection
    /// closes once nothing is in flight. Before WELCOME (no key yet) it closes at once.
    public mutating func credentialsRevoked(reason: String, now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingHello, .authenticating:
            return self.closeBeforeOpen(.unauthenticated, reason)
        case .open(var open):
            self.state = .modifying
            let actions = open.connectionError(.unauthenticated, reason)
            return self.finish(open: open, actions: actions)
        case .modifying: preconditionFailure(Self.reentered)
        case .closed:
            return []
        }
    }

    /// The peer closed the connection (EOF or reset): nothing can be answered any
    /// more, so all work in flight is stopped.
    public mutating func peerClosed() -> [Action] {
        let actions: [Action]
        if case .open(let open) = self.state {
            actions = open.inFlight.keys.sorted().map { .cancelWork($0) }
        } else {
            actions = []
        }
        self.state = .closed
        return actions
    }

    // MARK: Internals

    private mutating func receiveInAwaitingHello(_ frame: Frame, now: NIODeadline) -> [Action] {
        guard case .hello(let hello) = frame else {
            return self.closeBeforeOpen(.protocolError, "expected HELLO as the first frame, got \(frame.type)")
        }
        guard
            let version = ProtocolVersion.negotiate(
                local: self.configuration.supportedVersions,
                peerMin: hello.minVersion,
                peerMax: hello.maxVersion
            )
        else {
            let local = self.configuration.supportedVersions
            return self.closeBeforeOpen(
                .unsupportedVersion,
                "client speaks versions \(hello.minVersion)...\(hello.maxVersion), "
                    + "server speaks \(local.lowerBound)...\(local.upperBound)"
            )
        }
        let clientSettings: ClientSettings
        do {
            clientSettings = try ClientSettings(validating: hello.settings)
        } catch {
            return self.closeBeforeOpen(.protocolError, "malformed HELLO frame: \(error.reason)")
        }
        self.state = .authenticating(
            Authenticating(version: version, clientSettings: clientSettings, receivedAt: now)
        )
        return [.authenticate(apiKey: hello.apiKey, clientName: hello.clientName, version: version)]
    }

    private mutating func connectionError(_ code: GoAwayCode, _ reason: String, now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingHello, .authenticating:
            return self.closeBeforeOpen(code, reason)
        case .open(var open):
            self.state = .modifying
            let actions = open.connectionError(code, reason)
            return self.finish(open: open, actions: actions)
        case .modifying: preconditionFailure(Self.reentered)
        case .closed:
            return []
        }
    }

    /// Before WELCOME no request has been accepted: GOAWAY with last id 0 and close.
    private mutating func closeBeforeOpen(_ code: GoAwayCode, _ reason: String) -> [Action] {
        self.state = .closed
        return [.write(.goAway(Frame.GoAway(lastRequestID: 0, code: code, reason: reason))), .close]
    }

    private mutating func finish(
        authenticating auth: Authenticating,
        outcome: Authenticating.Outcome,
        actions: [Action]
    ) -> [Action] {
        switch outcome {
        case .stay:
            self.state = .authenticating(auth)
            var actions = actions
            self.updateReading(pause: auth.bufferedRequestCount >= Int(self.configuration.settings.maxRequestsInFlight), into: &actions)
            return actions
        case .connectionError(let code, let reason):
            return self.closeBeforeOpen(code, reason)
        case .close:
            self.state = .closed
            return actions + [.close]
        }
    }

    private mutating func finish(open: Open, actions: [Action]) -> [Action] {
        var actions = actions
        if open.shouldClose {
            self.state = .closed
            actions.append(.close)
            return actions
        }
        let atLimit = open.inFlight.count >= Int(self.configuration.settings.maxRequestsInFlight)
        self.updateReading(pause: atLimit && !open.ignoresFrames, into: &actions)
        self.state = .open(open)
        return actions
    }

    private mutating func updateReading(pause: Bool, into actions: inout [Action]) {
        guard pause != self.readingPaused else { return }
        self.readingPaused = pause
        actions.append(pause ? .pauseReading : .resumeReading)
    }
}

func formatSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
}

extension ServerConnectionStateMachine {
    /// The trap for a machine re-entered while one of its methods was running.
    static var reentered: String { "ServerConnectionStateMachine re-entered while it was being modified" }
}
