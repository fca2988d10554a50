/// Where a TLS connection is in its life.
public enum TLSConnectionState: Sendable, Hashable {
    /// Handler added, TCP not yet active.
    case idle
    /// TCP up, TLS handshake in progress; application writes are held.
    case handshaking
    /// Handshake done; application data flows both ways.
    case active
    /// We sent close_notify and wait for the peer's (bounded by the shutdown timeout).
    case closing
    /// Nothing more will be read or written.
    case closed
}

/// The connection's states and transitions, with no I/O: `OpenSSLHandler` reports
/// each event here and performs the action returned. Keeping the decisions in a
/// value type lets every transition be tested without OpenSSL or a channel.
struct TLSConnectionStateMachine {
    private(set) var state: TLSConnectionState = .idle

    enum ActivateAction: Equatable {
        case startHandshake
        case none
    }

    /// TCP became active (or the handler was added to an active channel).
    mutating func channelActive() -> ActivateAction {
        guard case .idle = state else { return .none }
        state = .handshaking
        return .startHandshake
    }

    enum InboundAction: Equatable {
        /// Feed the bytes to the handshake (a server starts its handshake on first bytes).
        case handshake
        /// Decrypt application data (also while closing: the peer's close_notify is still to come).
        case read
        /// The connection is finished: drop the bytes.
        case discard
    }

    mutating func bytesReceived() -> InboundAction {
        switch state {
        case .idle:
            state = .handshaking
            return .handshake
        case .handshaking: return .handshake
        case .active, .closing: return .read
        case .closed: return .discard
        }
    }

    /// Returns whether the handshake result should be acted on (not if a close or failure won the race).
    mutating func handshakeCompleted() -> Bool {
        guard case .handshaking = state else { return false }
        state = .active
        return true
    }

    enum WriteAction: Equatable {
        /// Queue it: before the handshake completes there are no keys to encrypt with.
        case buffer
        case fail
    }

    func writeRequested() -> WriteAction {
        switch state {
        case .idle, .handshaking, .active: return .buffer
        case .closing, .closed: return .fail
        }
    }

    /// Whether flushed writes can be encrypted and sent now.
    var canEncrypt: Bool { state == .active }

    enum CloseAction: Equatable {
        /// No TLS session to shut down: close the socket.
        case closeNow
        /// Send close_notify and wait for the peer's.
        case sendCloseNotify
        /// A close is already under way: complete this request with it.
        case joinPendingClose
        /// Already closed: let the channel answer.
        case alreadyClosed
    }

    mutating func closeRequested() -> CloseAction {
        switch state {
        case .idle, .handshaking:
            state = .closed
            return .closeNow
        case .active:
            state = .closing
            return .sendCloseNotify
        case .closing: return .joinPendingClose
        case .closed: return .alreadyClosed
        }
    }

    enum CloseNotifyAction: Equatable {
        /// The peer started the shutdown: answer with our close_notify, then close.
        case replyAndClose
        /// The peer answered our close_notify: close now.
        case completeClose
        case ignore
    }

    mutating func closeNotifyReceived() -> CloseNotifyAction {
        switch state {
        case .active:
            state = .closed
            return .replyAndClose
        case .closing:
            state = .closed
            return .completeClose
        case .idle, .handshaking, .closed:
            return .ignore
        }
    }

    enum InactiveAction: Equatable {
        /// The TCP connection ended mid-handshake.
        case reportHandshakeAborted
        /// The TCP connection ended without close_notify: possible truncation.
        case reportUncleanShutdown
        /// We were closing and the peer closed TCP without answering: accepted as a clean close.
        case completeClose
        case none
    }

    mutating func channelInactive() -> InactiveAction {
        defer { state = .closed }
        switch state {
        case .handshaking: return .reportHandshakeAborted
        case .active: return .reportUncleanShutdown
        case .closing: return .completeClose
        case .idle, .closed: return .none
        }
    }

    /// A fatal error (handshake or protocol failure, unclean EOF). Returns whether it
    /// should be reported: only the first failure of a connection is.
    mutating func failed() -> Bool {
        guard state != .closed else { return false }
        state = .closed
        return true
    }

    /// Returns whether the timeout applies (the handshake may have finished just before it fired).
    mutating func handshakeTimedOut() -> Bool {
        switch state {
        case .idle, .handshaking:
            state = .closed
            return true
        case .active, .closing, .closed:
            return false
        }
    }

    /// Returns whether the close still waits for the peer and must now be forced.
    mutating func shutdownTimedOut() -> Bool {
        guard case .closing = state else { return false }
        state = .closed
        return true
    }
}
