import NIOCore

/// Counts PINGs between REQUESTs, to tell keepalive from a flood.
struct PingTracker: Sendable {
    private var windowStart: NIODeadline
    private var count = 0

    init(now: NIODeadline) {
        self.windowStart = now
    }

    /// Records a PING; returns false if it exceeds the allowance.
    mutating func allowPing(now: NIODeadline, configuration: ServerConnectionStateMachine.Configuration) -> Bool {
        if now - self.windowStart >= configuration.pingWindow {
            self.windowStart = now
            self.count = 0
        }
        self.count += 1
        return self.count <= configuration.maxPingsPerWindow
    }

    mutating func receivedRequest(now: NIODeadline) {
        self.windowStart = now
        self.count = 0
    }

    static func floodReason(_ configuration: ServerConnectionStateMachine.Configuration) -> String {
        let seconds = formatSeconds(Double(configuration.pingWindow.nanoseconds) / 1e9)
        return "too many pings: more than \(configuration.maxPingsPerWindow) PING frames in \(seconds) s without a request"
    }
}

extension ServerConnectionStateMachine {

    /// HELLO accepted, API key being checked. Requests pipelined behind the
    /// HELLO wait here (bounded by MAX_REQUESTS_IN_FLIGHT) and are started
    /// only once the key is accepted: an unauthenticated peer can make the
    /// server do no work.
    struct Authenticating: Sendable {
        enum Buffered: Sendable {
            case request(RequestID, Frame.Request, receivedAt: NIODeadline, cancelled: Bool)
            /// Over the limit: answered RESOURCE_EXHAUSTED after WELCOME.
            case refused(RequestID)
            /// PONGs wait until after WELCOME, which must be the server's first frame.
            case pong(UInt64)
        }

        enum Outcome {
            case stay
            case connectionError(GoAwayCode, String)
            case close
        }

        let version: UInt16
        let clientSettings: ClientSettings
        var buffered: [Buffered] = []
        var bufferedRequestCount = 0
        var highestSeen: RequestID = .connection
        var peerGoAway = false
        var pings: PingTracker
        var lastReceived: NIODeadline

        init(version: UInt16, clientSettings: ClientSettings, receivedAt: NIODeadline) {
            self.version = version
            self.clientSettings = clientSettings
            self.pings = PingTracker(now: receivedAt)
            self.lastReceived = receivedAt
        }

        mutating func receive(
            _ frame: Frame,
            now: NIODeadline,
            configuration: Configuration
        ) -> ([Action], Outcome) {
            self.lastReceived = now
            switch frame {
            case .request(let id, let request):
                if self.peerGoAway {
                    return ([], .connectionError(.protocolError, "REQUEST \(id) after the client's GOAWAY"))
                }
                guard id > self.highestSeen else {
                    return ([], .connectionError(.protocolError, nonIncreasingReason(id, self.highestSeen)))
                }
                self.highestSeen = id
                self.pings.receivedRequest(now: now)
                if self.bufferedRequestCount >= Int(configuration.settings.maxRequestsInFlight) {
                    self.buffered.append(.refused(id))
                } else {
                    self.buffered.append(.request(id, request, receivedAt: now, cancelled: false))
                    self.bufferedRequestCount += 1
                }
                return ([], .stay)

            case .cancel(let id):
                guard id <= self.highestSeen else {
                    return ([], .connectionError(.protocolError, cancelUnknownReason(id, self.highestSeen)))
                }
                for index in self.buffered.indices {
                    if case .request(id, let request, let receivedAt, false) = self.buffered[index] {
                        self.buffered[index] = .request(id, request, receivedAt: receivedAt, cancelled: true)
                        break
                    }
                }
                return ([], .stay)

            case .ping(let data):
                guard self.pings.allowPing(now: now, configuration: configuration) else {
                    return ([], .connectionError(.enhanceYourCalm, PingTracker.floodReason(configuration)))
                }
                self.buffered.append(.pong(data))
                return ([], .stay)

            case .pong:
                return ([], .stay)

            case .goAway(let goAway):
                if goAway.code == .noError {
                    self.peerGoAway = true
                    return ([], .stay)
                }
                // The client failed the connection: nothing was accepted yet, nothing to answer.
                return ([], .close)

            case .hello:
                return ([], .connectionError(.protocolError, "second HELLO frame"))

            case .welcome, .response, .error:
                return ([], .connectionError(.protocolError, "\(frame.type) frames are sent by servers only"))
            }
        }
    }

    /// Authenticated: requests flow. Also covers draining after a GOAWAY in
    /// either direction, which differs only in which frames are still taken.
    struct Open: Sendable {
        enum GoAwaySent: Sendable, Equatable {
            case none
            /// Graceful: requests up to `last` are answered; later ones get UNAVAILABLE.
            case graceful(last: RequestID)
            /// Connection error: no further frame is read; accepted requests are still answered.
            case error(last: RequestID)
        }

        enum Completion {
            case success(ByteBuffer)
            case failure(Frame.RequestError)
        }

        struct InFlight: Sendable {
            var timeoutMilliseconds: UInt32
            var deadline: NIODeadline?
        }

        let clientSettings: ClientSettings
        var inFlight: [RequestID: InFlight] = [:]
        var deadlines = DeadlineHeap()
        var highestSeen: RequestID
        /// Idle since: the later of the last frame received and the moment nothing was left in flight.
        var idleSince: NIODeadline
        var pings: PingTracker
        var goAwaySent: GoAwaySent = .none
        var peerGoAway = false
        /// Close now, whatever is in flight (idle timeout, the client failed the connection).
        var forceClose = false

        init(authenticated auth: Authenticating, now: NIODeadline) {
            self.clientSettings = auth.clientSettings
            self.highestSeen = auth.highestSeen
            self.idleSince = now
            self.pings = auth.pings
            self.inFlight.reserveCapacity(auth.bufferedRequestCount)
        }

        var shouldClose: Bool {
            self.forceClose || ((self.goAwaySent != .none || self.peerGoAway) && self.inFlight.isEmpty)
        }

        var ignoresFrames: Bool {
            if case .error = self.goAwaySent { return true }
            return false
        }

        func nextTimeout(configuration: Configuration) -> NIODeadline? {
            var next = self.deadlines.top?.deadline
            let idle = configuration.settings.idleTimeoutMilliseconds
            if idle > 0, self.inFlight.isEmpty, self.goAwaySent == .none {
                let idleDeadline = self.idleSince + .milliseconds(Int64(idle))
                next = next.map { min($0, idleDeadline) } ?? idleDeadline
            }
            return next
        }

        // MARK: Receiving

        mutating func receive(_ frame: Frame, now: NIODeadline, configuration: Configuration) -> [Action] {
            if self.ignoresFrames { return [] }
            self.idleSince = now
            switch frame {
            case .request(let id, let request):
                if self.peerGoAway {
                    return self.connectionError(.protocolError, "REQUEST \(id) after the client's GOAWAY")
                }
                guard id > self.highestSeen else {
                    return self.connectionError(.protocolError, nonIncreasingReason(id, self.highestSeen))
                }
                self.highestSeen = id
                self.pings.receivedRequest(now: now)
                var actions: [Action] = []
                self.start(id, request, receivedAt: now, now: now, configuration: configuration, into: &actions)
                return actions

            case .cancel(let id):
                guard id <= self.highestSeen else {
                    return self.connectionError(.protocolError, cancelUnknownReason(id, self.highestSeen))
                }
                guard self.inFlight.removeValue(forKey: id) != nil else { return [] }
                self.noteCompletion(now: now)
                return [
                    .write(.error(id, Frame.RequestError(status: .cancelled, message: "cancelled by the client"))),
                    .cancelWork(id),
                ]

            case .ping(let data):
                guard self.pings.allowPing(now: now, configuration: configuration) else {
                    return self.connectionError(.enhanceYourCalm, PingTracker.floodReason(configuration))
                }
                return [.write(.pong(data))]

            case .pong:
                return []

            case .goAway(let goAway):
                if goAway.code == .noError {
                    // The client sends no more requests; finish what is in flight, then close.
                    self.peerGoAway = true
                    return []
                }
                // The client failed the connection and will not read replies: stop everything.
                self.forceClose = true
                let ids = self.inFlight.keys.sorted()
                self.inFlight.removeAll()
                self.deadlines.removeAll()
                return ids.map { .cancelWork($0) }

            case .hello:
                return self.connectionError(.protocolError, "second HELLO frame")

            case .welcome, .response, .error:
                return self.connectionError(.protocolError, "\(frame.type) frames are sent by servers only")
            }
        }

        /// Accepts, refuses or answers one request.
        mutating func start(
            _ id: RequestID,
            _ request: Frame.Request,
            receivedAt: NIODeadline,
            now: NIODeadline,
            configuration: Configuration,
            into actions: inout [Action]
        ) {
            if case .graceful(let last) = self.goAwaySent, id > last {
                actions.append(.write(.error(id, Frame.RequestError(status: .unavailable, message: "server is going away"))))
                return
            }
            let limit = configuration.settings.maxRequestsInFlight
            guard self.inFlight.count < Int(limit) else {
                let message = "too many requests in flight (limit \(limit))"
                actions.append(.write(.error(id, Frame.RequestError(status: .resourceExhausted, message: message))))
                return
            }
            let timeoutMs = request.timeoutMilliseconds
            var deadline: NIODeadline? = nil
            if timeoutMs > 0 {
                deadline = receivedAt + .milliseconds(Int64(timeoutMs))
                if deadline! <= now {
                    // Expired while waiting for authentication: not started, not done.
                    let message = "deadline of \(timeoutMs) ms exceeded before the request started"
                    actions.append(.write(.error(id, Frame.RequestError(status: .deadlineExceeded, message: message))))
                    return
                }
                self.deadlines.push(deadline!, id)
            }
            self.inFlight[id] = InFlight(timeoutMilliseconds: timeoutMs, deadline: deadline)
            actions.append(
                .dispatch(
                    Dispatch(id: id, method: request.method, payload: request.payload, deadline: deadline)
                )
            )
        }

        mutating func startBuffered(
            _ item: Authenticating.Buffered,
            now: NIODeadline,
            configuration: Configuration,
            into actions: inout [Action]
        ) {
            switch item {
            case .request(let id, _, _, true):
                actions.append(.write(.error(id, Frame.RequestError(status: .cancelled, message: "cancelled by the client"))))
            case .request(let id, let request, let receivedAt, false):
                self.start(id, request, receivedAt: receivedAt, now: now, configuration: configuration, into: &actions)
            case .refused(let id):
                let limit = configuration.settings.maxRequestsInFlight
                let message = "too many requests in flight (limit \(limit))"
                actions.append(.write(.error(id, Frame.RequestError(status: .resourceExhausted, message: message))))
            case .pong(let data):
                actions.append(.write(.pong(data)))
            }
        }

        // MARK: Completing

        mutating func complete(_ id: RequestID, with completion: Completion, now: NIODeadline) -> [Action] {
            guard self.inFlight.removeValue(forKey: id) != nil else { return [] }
            self.noteCompletion(now: now)
            let limit = Int(self.clientSettings.maxFrameSize)
            switch completion {
            case .success(let payload):
                if payload.readableBytes > limit {
                    let message = "response of \(payload.readableBytes) bytes exceeds the client's MAX_FRAME_SIZE of \(limit)"
                    return [.write(.error(id, Frame.RequestError(status: .resourceExhausted, message: message)))]
                }
                return [.write(.response(id, payload))]
            case .failure(var error):
                if 3 + error.message.utf8.count + error.details.readableBytes > limit {
                    // Details are optional; the status must get through.
                    error.details = ByteBuffer()
                    let cut = error.message.utf8PrefixLength(maxBytes: limit - 3)
                    if cut < error.message.utf8.count {
                        error.message = String(decoding: error.message.utf8.prefix(cut), as: UTF8.self)
                    }
                }
                return [.write(.error(id, error))]
            }
        }

        mutating func noteCompletion(now: NIODeadline) {
            if self.inFlight.isEmpty {
                self.idleSince = max(self.idleSince, now)
            }
        }

        // MARK: Timers and shutdown

        mutating func timerFired(now: NIODeadline, configuration: Configuration) -> [Action] {
            var actions: [Action] = []
            while let entry = self.deadlines.popExpired(now: now) {
                guard let request = self.inFlight[entry.id], request.deadline == entry.deadline else { continue }
                self.inFlight.removeValue(forKey: entry.id)
                let message = "deadline of \(request.timeoutMilliseconds) ms exceeded"
                actions.append(.write(.error(entry.id, Frame.RequestError(status: .deadlineExceeded, message: message))))
                actions.append(.cancelWork(entry.id))
            }
            if !actions.isEmpty { self.noteCompletion(now: now) }
            let idle = configuration.settings.idleTimeoutMilliseconds
            if idle > 0, self.inFlight.isEmpty, self.goAwaySent == .none,
                now >= self.idleSince + .milliseconds(Int64(idle))
            {
                let goAway = Frame.GoAway(
                    lastRequestID: self.highestSeen,
                    code: .idleTimeout,
                    reason: "idle for \(idle) ms"
                )
                self.goAwaySent = .graceful(last: self.highestSeen)
                self.forceClose = true
                actions.append(.write(.goAway(goAway)))
            }
            return actions
        }

        mutating func beginGracefulShutdown() -> [Action] {
            guard self.goAwaySent == .none else { return [] }
            self.goAwaySent = .graceful(last: self.highestSeen)
            let goAway = Frame.GoAway(lastRequestID: self.highestSeen, code: .noError, reason: "server is shutting down")
            return [.write(.goAway(goAway))]
        }

        /// GOAWAY with `code`; stop taking frames; answer what was accepted, then close.
        mutating func connectionError(_ code: GoAwayCode, _ reason: String) -> [Action] {
            let last: RequestID
            switch self.goAwaySent {
            case .none: last = self.highestSeen
            case .graceful(let previous): last = previous
            case .error: return []
            }
            self.goAwaySent = .error(last: last)
            return [.write(.goAway(Frame.GoAway(lastRequestID: last, code: code, reason: reason)))]
        }
    }
}

func nonIncreasingReason(_ id: RequestID, _ highest: RequestID) -> String {
    "request id \(id) is not above the highest id so far (\(highest))"
}

func cancelUnknownReason(_ id: RequestID, _ highest: RequestID) -> String {
    "CANCEL for request id \(id), above the highest id so far (\(highest))"
}
