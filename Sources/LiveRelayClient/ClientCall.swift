import LiveRelayWire
import NIOConcurrencyHelpers
import NIOCore

/// One call as the client tracks it, across attempts and connections.
///
/// A class because a call outlives any one connection: the pool's queue, a
/// connection's handler and the caller's cancellation all hold it. What they
/// race on (where the call is, whether it was cancelled, whether it finished)
/// sits behind one lock, so a reply, a deadline and a cancel can arrive from
/// three threads and exactly one of them completes the promise.
final class ClientCall: @unchecked Sendable {
    enum Location {
        /// Created, not yet placed.
        case new
        /// In the pool's queue, waiting for a connection.
        case queued
        /// Handed to a connection (parked there or sent).
        case connection(PooledConnection)
        case finished
    }

    let method: String
    let payload: ByteBuffer
    /// Fixed when the call starts: retries keep the caller's original deadline.
    let deadline: NIODeadline?
    /// Whether resending after an unknown outcome is harmless (idempotency key, RegisterToken, Ping).
    let idempotent: Bool
    let promise: EventLoopPromise<ByteBuffer>

    private let lock = NIOLock()
    private var _location: Location = .new
    private var _cancelled = false
    private var _attempts = 1

    /// Only touched on the event loop of the connection that holds the call.
    var requestID: RequestID?
    /// Only touched under the pool's lock.
    var queueTimer: Scheduled<Void>?

    init(method: String, payload: ByteBuffer, deadline: NIODeadline?, idempotent: Bool, promise: EventLoopPromise<ByteBuffer>) {
        self.method = method
        self.payload = payload
        self.deadline = deadline
        self.idempotent = idempotent
        self.promise = promise
    }

    var isCancelled: Bool { self.lock.withLock { self._cancelled } }

    var attempts: Int { self.lock.withLock { self._attempts } }

    /// Counts one more attempt; false when the call is finished or cancelled, so it must not be resent.
    func beginRetry() -> Bool {
        self.lock.withLock {
            if self._cancelled { return false }
            if case .finished = self._location { return false }
            self._attempts += 1
            return true
        }
    }

    /// Records where the call now is; false if it already finished.
    @discardableResult
    func move(to location: Location) -> Bool {
        self.lock.withLock {
            if case .finished = self._location { return false }
            self._location = location
            return true
        }
    }

    /// Marks the call cancelled and says where it was, so the canceller can reach it.
    func markCancelled() -> Location {
        self.lock.withLock {
            if case .finished = self._location { return .finished }
            self._cancelled = true
            return self._location
        }
    }

    /// Completes the caller's future once; later results (a reply that crossed a cancel) are dropped.
    @discardableResult
    func succeed(_ bytes: ByteBuffer) -> Bool {
        guard self.finish() else { return false }
        self.promise.succeed(bytes)
        return true
    }

    @discardableResult
    func fail(_ error: LiveRelayClientError) -> Bool {
        guard self.finish() else { return false }
        self.promise.fail(error)
        return true
    }

    private func finish() -> Bool {
        self.lock.withLock {
            if case .finished = self._location { return false }
            self._location = .finished
            return true
        }
    }
}
