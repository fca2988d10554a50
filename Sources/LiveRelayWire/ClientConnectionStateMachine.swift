import NIOCore

/// The client's side of one connection, as a value with no I/O.
///
/// The mirror of `ServerConnectionStateMachine`: the client library feeds it
/// calls, decoded frames, timer ticks and connection events with the current
/// time, and carries out the returned actions. It owns the rules a client
/// must keep so the server never has to punish it: increasing ids, at most
/// MAX_REQUESTS_IN_FLIGHT outstanding, no request larger than the server's
/// MAX_FRAME_SIZE, nothing new after a GOAWAY, and which failures are safe to retry.
///
/// One timer, like the server: arm it at `nextTimeout` after every event and
/// call `timerFired(now:)`; it covers the WELCOME timeout, call deadlines and keepalive.
public struct ClientConnectionStateMachine: Sendable {
    public struct Configuration: Hashable, Sendable {
        public var apiKey: ByteBuffer
        public var clientName: String
        public var settings: ClientSettings
        public var supportedVersions: ClosedRange<UInt16>
        /// From sending HELLO to receiving WELCOME.
        public var welcomeTimeout: TimeAmount
        /// A PING after this long with nothing received, to find dead
        /// connections (a peer that vanished without a FIN). nil disables it.
        /// Keep it at 10 s or more: servers treat more than 10 PINGs a minute
        /// without requests as a flood.
        public var keepaliveInterval: TimeAmount?
        /// No PONG within this → the connection is considered dead and closed.
        public var keepaliveTimeout: TimeAmount
        /// Ping even with no call outstanding. Off by default, so an idle
        /// connection can reach the server's IDLE_TIMEOUT and be closed.
        public var keepaliveWithoutCalls: Bool
        /// The first id used; ids then go up by one.
        public var firstRequestID: RequestID

        public init(
            apiKey: ByteBuffer,
            clientName: String,
            settings: ClientSettings = ClientSettings(),
            supportedVersions: ClosedRange<UInt16> = ProtocolVersion.supported,
            welcomeTimeout: TimeAmount = .seconds(10),
            keepaliveInterval: TimeAmount? = .seconds(30),
            keepaliveTimeout: TimeAmount = .seconds(10),
            keepaliveWithoutCalls: Bool = false,
            firstRequestID: RequestID = 1
        ) {
            precondition(Wire.apiKeyLengthRange.contains(apiKey.readableBytes), "API key must be 1...512 bytes")
            precondition(!firstRequestID.isConnectionLevel, "request ids start at 1")
            self.apiKey = apiKey
            self.clientName = clientName
            self.settings = settings
            self.supportedVersions = supportedVersions
            self.welcomeTimeout = welcomeTimeout
            self.keepaliveInterval = keepaliveInterval
            self.keepaliveTimeout = keepaliveTimeout
            self.keepaliveWithoutCalls = keepaliveWithoutCalls
            self.firstRequestID = firstRequestID
        }

        /// A decoder for server frames (no preface) enforcing this client's MAX_FRAME_SIZE.
        public func makeFrameDecoder() -> FrameDecoder {
            FrameDecoder(expectPreface: false, maxFrameSize: self.settings.maxFrameSize)
        }
    }

    /// Whether a failed call may be sent again, the question every retry policy starts from.
    public enum RetryDisposition: Hashable, Sendable {
        /// The server did not process the call: send it again, on another
        /// connection if this one is going away.
        case notProcessed
        /// The call may or may not have run: resend only if it is idempotent
        /// (LiveRelay's mutating calls carry idempotency keys for this).
        case mayHaveBeenProcessed
        /// The server answered with this status; whether to retry depends on the status.
        case answered
    }

    public struct CallFailure: Hashable, Sendable {
        public var status: StatusCode
        public var message: String
        /// The bytes of a `liverelay.v1.ErrorDetails` from the server; empty for local failures.
        public var details: ByteBuffer
        public var disposition: RetryDisposition

        public init(status: StatusCode, message: String, details: ByteBuffer = ByteBuffer(), disposition: RetryDisposition) {
            self.status = status
            self.message = message
            self.details = details
            self.disposition = disposition
        }
    }

    public enum Action: Hashable, Sendable {
        /// Write the 8-byte preface (`FrameEncoder.writePreface`).
        case writePreface
        case write(Frame)
        /// WELCOME arrived: the connection is authenticated, with these limits.
        case connected(version: UInt16, ServerSettings)
        /// The call's reply: protobuf bytes.
        case succeed(RequestID, ByteBuffer)
        case fail(RequestID, CallFailure)
        /// Calls told to `.wait` may call `startRequest` again.
        case requestSlotsAvailable
        /// Close the connection once the writes above are flushed.
        case close
    }

    /// What `startRequest` decided.
    public enum StartRequest: Hashable, Sendable {
        /// Write this REQUEST frame; the call's result comes as `.succeed` or `.fail` with this id.
        case send(RequestID, Frame)
        /// MAX_REQUESTS_IN_FLIGHT reached: try again after `.requestSlotsAvailable`.
        case wait
        /// Not sent, with the reason.
        case fail(CallFailure)
    }

    enum State: Sendable {
        case idle
        case awaitingWelcome(Connection)
        case ready(Connection)
        case closed
        /// Only while a mutating method holds the connection out of `state`:
        /// seeing it anywhere else means the machine was re-entered, a bug.
        case modifying
    }

    let configuration: Configuration
    var state: State = .idle

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    public var isClosed: Bool {
        if case .closed = self.state { return true }
        return false
    }

    /// The server's settings: the defaults until WELCOME arrives.
    public var serverSettings: ServerSettings {
        switch self.state {
        case .awaitingWelcome(let connection), .ready(let connection): return connection.serverSettings
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed: return ServerSettings()
        }
    }

    /// Calls sent and not yet answered by the server (including ones failed
    /// locally by deadline or cancel, which still hold a server slot).
    public var outstandingCount: Int {
        switch self.state {
        case .awaitingWelcome(let connection), .ready(let connection): return connection.pending.count
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed: return 0
        }
    }

    public var nextTimeout: NIODeadline? {
        switch self.state {
        case .awaitingWelcome(let connection):
            return [connection.connectedAt + self.configuration.welcomeTimeout, connection.deadlines.top?.deadline]
                .compactMap { $0 }.min()
        case .ready(let connection):
            return connection.nextTimeout(configuration: self.configuration)
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed:
            return nil
        }
    }

    // MARK: Events

    /// The transport is connected: write the preface and HELLO. Requests may
    /// be started right away (0-RTT); the server runs them once the key is accepted.
    public mutating func connect(now: NIODeadline) -> [Action] {
        guard case .idle = self.state else { return [] }
        self.state = .awaitingWelcome(Connection(configuration: self.configuration, now: now))
        let hello = Frame.Hello(
            minVersion: self.configuration.supportedVersions.lowerBound,
            maxVersion: self.configuration.supportedVersions.upperBound,
            apiKey: self.configuration.apiKey,
            clientName: self.configuration.clientName,
            settings: self.configuration.settings.settings
        )
        return [.writePreface, .write(.hello(hello))]
    }

    /// A new call. `timeout` nil means no deadline.
    public mutating func startRequest(
        method: String,
        payload: ByteBuffer,
        timeout: TimeAmount?,
        now: NIODeadline
    ) -> StartRequest {
        switch self.state {
        case .awaitingWelcome(var connection):
            self.state = .modifying
            let result = connection.startRequest(method: method, payload: payload, timeout: timeout, now: now)
            self.state = .awaitingWelcome(connection)
            return result
        case .ready(var connection):
            self.state = .modifying
            let result = connection.startRequest(method: method, payload: payload, timeout: timeout, now: now)
            self.state = .ready(connection)
            return result
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed:
            return .fail(CallFailure(status: .unavailable, message: "connection is not open", disposition: .notProcessed))
        }
    }

    /// The caller gave up on a call: it fails now with CANCELLED and a CANCEL
    /// tells the server to stop. A reply that crosses the CANCEL is dropped.
    public mutating func cancel(_ id: RequestID, now: NIODeadline) -> [Action] {
        self.withConnection { connection in
            connection.abandon(id, status: .cancelled, message: "cancelled by the client")
        }
    }

    public mutating func receive(_ frame: Frame, now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingWelcome(var connection):
            self.state = .modifying
            connection.keepaliveBase = now
            switch frame {
            case .welcome(let welcome):
                guard self.configuration.supportedVersions.contains(welcome.version) else {
                    return self.connectionError(
                        .unsupportedVersion,
                        "server chose version \(welcome.version), client speaks "
                            + "\(self.configuration.supportedVersions.lowerBound)...\(self.configuration.supportedVersions.upperBound)",
                        connection
                    )
                }
                do {
                    connection.serverSettings = try ServerSettings(validating: welcome.settings)
                } catch {
                    return self.connectionError(.protocolError, "malformed WELCOME frame: \(error.reason)", connection)
                }
                var actions: [Action] = [.connected(version: welcome.version, connection.serverSettings)]
                connection.signalSlotsIfAvailable(into: &actions)
                self.state = .ready(connection)
                return actions
            case .goAway, .ping:
                let actions = connection.receive(frame, configuration: self.configuration)
                return self.finish(connection, actions, ready: false)
            case .hello, .request, .response, .error, .cancel, .pong:
                return self.connectionError(.protocolError, "expected WELCOME, got \(frame.type)", connection)
            }
        case .ready(var connection):
            self.state = .modifying
            connection.keepaliveBase = now
            switch frame {
            case .welcome:
                return self.connectionError(.protocolError, "second WELCOME frame", connection)
            case .hello, .request, .cancel:
                return self.connectionError(.protocolError, "\(frame.type) frames are sent by clients only", connection)
            case .response(let id, _), .error(let id, _):
                guard connection.pending[id] != nil else {
                    return self.connectionError(.protocolError, "\(frame.type) for unknown request id \(id)", connection)
                }
                let actions = connection.receive(frame, configuration: self.configuration)
                return self.finish(connection, actions, ready: true)
            case .ping, .pong, .goAway:
                let actions = connection.receive(frame, configuration: self.configuration)
                return self.finish(connection, actions, ready: true)
            }
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed:
            return []
        }
    }

    /// The decoder failed on the server's bytes: GOAWAY, fail every call, close.
    public mutating func receiveDecodingError(_ error: FrameDecodingError, now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingWelcome(let connection), .ready(let connection):
            self.state = .modifying
            return self.connectionError(error.goAwayCode, error.description, connection)
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed:
            return []
        }
    }

    public mutating func timerFired(now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingWelcome(var connection):
            self.state = .modifying
            if now >= connection.connectedAt + self.configuration.welcomeTimeout {
                let seconds = formatSeconds(Double(self.configuration.welcomeTimeout.nanoseconds) / 1e9)
                return self.lost(connection, "no WELCOME within \(seconds) s")
            }
            let actions = connection.expireDeadlines(now: now)
            self.state = .awaitingWelcome(connection)
            return actions
        case .ready(var connection):
            self.state = .modifying
            if let sentAt = connection.keepalivePingSentAt, now >= sentAt + self.configuration.keepaliveTimeout {
                return self.lost(connection, "keepalive timeout: no PONG within the keepalive timeout")
            }
            var actions = connection.expireDeadlines(now: now)
            connection.keepaliveIfDue(now: now, configuration: self.configuration, into: &actions)
            return self.finish(connection, actions, ready: true)
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed:
            return []
        }
    }

    /// Graceful close from the client: GOAWAY NO_ERROR, no new calls, close
    /// when the outstanding ones are answered.
    public mutating func beginGracefulShutdown(now: NIODeadline) -> [Action] {
        switch self.state {
        case .awaitingWelcome(var connection), .ready(var connection):
            let ready: Bool
            if case .ready = self.state { ready = true } else { ready = false }
            self.state = .modifying
            guard !connection.sentGoAway else { return self.finish(connection, [], ready: ready) }
            connection.sentGoAway = true
            let goAway = Frame.GoAway(lastRequestID: 0, code: .noError, reason: "client closing")
            return self.finish(connection, [.write(.goAway(goAway))], ready: ready)
        case .idle:
            self.state = .closed
            return []
        case .modifying: preconditionFailure(Self.reentered)
        case .closed:
            return []
        }
    }

    /// The connection ended: every outstanding call fails; its fate is unknown.
    public mutating func peerClosed() -> [Action] {
        switch self.state {
        case .awaitingWelcome(let connection), .ready(let connection):
            var connection = connection
            self.state = .closed
            return connection.failAll(status: .unavailable, message: "connection closed", disposition: .mayHaveBeenProcessed)
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed:
            self.state = .closed
            return []
        }
    }

    // MARK: Internals

    private mutating func withConnection(_ body: (inout Connection) -> [Action]) -> [Action] {
        switch self.state {
        case .awaitingWelcome(var connection):
            self.state = .modifying
            let actions = body(&connection)
            return self.finish(connection, actions, ready: false)
        case .ready(var connection):
            self.state = .modifying
            let actions = body(&connection)
            return self.finish(connection, actions, ready: true)
        case .modifying: preconditionFailure(Self.reentered)
        case .idle, .closed:
            return []
        }
    }

    private mutating func finish(_ connection: Connection, _ actions: [Action], ready: Bool) -> [Action] {
        if connection.shouldClose {
            self.state = .closed
            return actions + [.close]
        }
        self.state = ready ? .ready(connection) : .awaitingWelcome(connection)
        return actions
    }

    /// The server broke the protocol: GOAWAY to say why, fail every call (the
    /// server's state is unknown, so INTERNAL, may have been processed), close.
    private mutating func connectionError(_ code: GoAwayCode, _ reason: String, _ connection: Connection) -> [Action] {
        var connection = connection
        self.state = .closed
        var actions: [Action] = [.write(.goAway(Frame.GoAway(lastRequestID: 0, code: code, reason: reason)))]
        actions += connection.failAll(
            status: .internal,
            message: "connection failed: \(reason)",
            disposition: .mayHaveBeenProcessed
        )
        actions.append(.close)
        return actions
    }

    /// The connection is unusable without a protocol error (timeouts): fail every call and close.
    private mutating func lost(_ connection: Connection, _ reason: String) -> [Action] {
        var connection = connection
        self.state = .closed
        var actions = connection.failAll(status: .unavailable, message: reason, disposition: .mayHaveBeenProcessed)
        actions.append(.close)
        return actions
    }
}

extension ClientConnectionStateMachine {
    /// The trap for a machine re-entered while one of its methods was running.
    static var reentered: String { "ClientConnectionStateMachine re-entered while it was being modified" }
}
