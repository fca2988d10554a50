import NIOCore

extension ClientConnectionStateMachine {
    /// What the client tracks while the connection is up (before and after WELCOME).
    struct Connection: Sendable {
        enum Pending: Sendable, Equatable {
            /// The caller waits for the reply.
            case live(timeoutMilliseconds: UInt32)
            /// Already failed locally (deadline, cancel); the server's reply frees
            /// the slot and is dropped. Ids are freed only when the reply arrives.
            case abandoned
        }

        var pending: [RequestID: Pending] = [:]
        var deadlines = DeadlineHeap()
        /// nil once UInt32.max has been used: the connection can carry no more calls.
        var nextID: RequestID?
        /// Defaults until WELCOME: a client that pipelines before WELCOME assumes them.
        var serverSettings = ServerSettings()
        let connectedAt: NIODeadline
        /// The last time something was received (or a call started after a quiet period).
        var keepaliveBase: NIODeadline
        var keepalivePingSentAt: NIODeadline?
        var keepalivePingData: UInt64 = 0
        var goAwayReceived: Frame.GoAway?
        var sentGoAway = false
        /// A caller was told to wait; tell it when a slot frees.
        var waiting = false

        init(configuration: Configuration, now: NIODeadline) {
            self.nextID = configuration.firstRequestID
            self.connectedAt = now
            self.keepaliveBase = now
        }

        var isGoingAway: Bool { self.goAwayReceived != nil || self.sentGoAway }

        var shouldClose: Bool { self.isGoingAway && self.pending.isEmpty }

        func nextTimeout(configuration: Configuration) -> NIODeadline? {
            var candidates: [NIODeadline] = []
            if let top = self.deadlines.top { candidates.append(top.deadline) }
            if let sentAt = self.keepalivePingSentAt {
                candidates.append(sentAt + configuration.keepaliveTimeout)
            } else if let interval = configuration.keepaliveInterval,
                !self.pending.isEmpty || configuration.keepaliveWithoutCalls
            {
                candidates.append(self.keepaliveBase + interval)
            }
            return candidates.min()
        }

        mutating func startRequest(
            method: String,
            payload: ByteBuffer,
            timeout: TimeAmount?,
            now: NIODeadline
        ) -> StartRequest {
            if self.isGoingAway {
                return .fail(CallFailure(status: .unavailable, message: "connection is going away", disposition: .notProcessed))
            }
            let methodBytes = method.utf8
            guard Wire.methodLengthRange.contains(methodBytes.count), methodBytes.allSatisfy({ (0x21...0x7E).contains($0) })
            else {
                return .fail(
                    CallFailure(
                        status: .internal,
                        message: "method must be 1 to 255 bytes of printable ASCII",
                        disposition: .notProcessed
                    )
                )
            }
            let size = 5 + methodBytes.count + payload.readableBytes
            guard size <= Int(self.serverSettings.maxFrameSize) else {
                let message = "request of \(size) bytes exceeds the server's MAX_FRAME_SIZE of \(self.serverSettings.maxFrameSize)"
                return .fail(CallFailure(status: .resourceExhausted, message: message, disposition: .notProcessed))
            }
            if let timeout, timeout <= .zero {
                return .fail(
                    CallFailure(status: .deadlineExceeded, message: "deadline passed before the call was sent", disposition: .notProcessed)
                )
            }
            guard self.pending.count < Int(self.serverSettings.maxRequestsInFlight) else {
                self.waiting = true
                return .wait
            }
            guard let id = self.nextID else {
                return .fail(
                    CallFailure(status: .unavailable, message: "request ids exhausted: open a new connection", disposition: .notProcessed)
                )
            }
            self.nextID = id == .max ? nil : RequestID(id.rawValue + 1)
            if self.pending.isEmpty {
                // Keepalive measures silence while calls wait, not the quiet time before this one.
                self.keepaliveBase = max(self.keepaliveBase, now)
            }
            let milliseconds = timeout?.wireMilliseconds ?? 0
            if milliseconds > 0, let timeout {
                self.deadlines.push(now + timeout, id)
            }
            self.pending[id] = .live(timeoutMilliseconds: milliseconds)
            let request = Frame.Request(timeoutMilliseconds: milliseconds, method: method, payload: payload)
            return .send(id, .request(id, request))
        }

        /// Fails a live call now and tells the server to stop it.
        mutating func abandon(_ id: RequestID, status: StatusCode, message: String) -> [Action] {
            guard case .live = self.pending[id] else { return [] }
            self.pending[id] = .abandoned
            return [
                .write(.cancel(id)),
                .fail(id, CallFailure(status: status, message: message, disposition: .mayHaveBeenProcessed)),
            ]
        }

        /// RESPONSE (for a known id), ERROR (for a known id), PING, PONG, GOAWAY.
        mutating func receive(_ frame: Frame, configuration: Configuration) -> [Action] {
            var actions: [Action] = []
            switch frame {
            case .response(let id, let payload):
                if self.pending.removeValue(forKey: id) != .abandoned {
                    actions.append(.succeed(id, payload))
                }
            case .error(let id, let error):
                if self.pending.removeValue(forKey: id) != .abandoned {
                    let disposition: RetryDisposition = error.status == .unavailable ? .notProcessed : .answered
                    actions.append(
                        .fail(
                            id,
                            CallFailure(status: error.status, message: error.message, details: error.details, disposition: disposition)
                        )
                    )
                }
            case .ping(let data):
                actions.append(.write(.pong(data)))
            case .pong(let data):
                if self.keepalivePingSentAt != nil, data == self.keepalivePingData {
                    self.keepalivePingSentAt = nil
                }
            case .goAway(let goAway):
                self.receiveGoAway(goAway, into: &actions)
            case .hello, .welcome, .request, .cancel:
                break
            }
            self.signalSlotsIfAvailable(into: &actions)
            return actions
        }

        /// Calls above `last_request_id` were not processed: fail them as safe to
        /// retry elsewhere. Calls at or below it will still be answered.
        ///
        /// Only UNAUTHENTICATED is final (the key would be refused again).
        /// Every other code, TOO_MANY_CONNECTIONS included, fails them
        /// UNAVAILABLE: another connection, opened later, may take them.
        mutating func receiveGoAway(_ goAway: Frame.GoAway, into actions: inout [Action]) {
            var goAway = goAway
            if let previous = self.goAwayReceived, previous.lastRequestID < goAway.lastRequestID {
                goAway.lastRequestID = previous.lastRequestID
            }
            self.goAwayReceived = goAway
            let status: StatusCode = goAway.code == .unauthenticated ? .unauthenticated : .unavailable
            let message =
                goAway.reason.isEmpty
                ? "server is going away (\(goAway.code))"
                : "server is going away (\(goAway.code)): \(goAway.reason)"
            for id in self.pending.keys.filter({ $0 > goAway.lastRequestID }).sorted() {
                if self.pending.removeValue(forKey: id) != .abandoned {
                    actions.append(.fail(id, CallFailure(status: status, message: message, disposition: .notProcessed)))
                }
            }
        }

        mutating func expireDeadlines(now: NIODeadline) -> [Action] {
            var actions: [Action] = []
            while let entry = self.deadlines.popExpired(now: now) {
                guard case .live(let milliseconds) = self.pending[entry.id] else { continue }
                actions += self.abandon(entry.id, status: .deadlineExceeded, message: "deadline of \(milliseconds) ms exceeded")
            }
            return actions
        }

        mutating func keepaliveIfDue(now: NIODeadline, configuration: Configuration, into actions: inout [Action]) {
            guard let interval = configuration.keepaliveInterval, self.keepalivePingSentAt == nil,
                !self.pending.isEmpty || configuration.keepaliveWithoutCalls,
                now >= self.keepaliveBase + interval
            else { return }
            self.keepalivePingData &+= 1
            self.keepalivePingSentAt = now
            actions.append(.write(.ping(self.keepalivePingData)))
        }

        mutating func signalSlotsIfAvailable(into actions: inout [Action]) {
            guard self.waiting,
                self.isGoingAway || self.pending.count < Int(self.serverSettings.maxRequestsInFlight)
            else { return }
            self.waiting = false
            actions.append(.requestSlotsAvailable)
        }

        /// Fails every live call (abandoned ones were already failed) and forgets them all.
        mutating func failAll(status: StatusCode, message: String, disposition: RetryDisposition) -> [Action] {
            var actions: [Action] = []
            for id in self.pending.keys.sorted() where self.pending[id] != .abandoned {
                actions.append(.fail(id, CallFailure(status: status, message: message, disposition: disposition)))
            }
            self.pending.removeAll()
            self.deadlines.removeAll()
            if self.waiting {
                self.waiting = false
                actions.append(.requestSlotsAvailable)
            }
            return actions
        }
    }
}
