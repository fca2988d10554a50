import NIOConcurrencyHelpers
import NIOCore

/// What ``withDeadline(_:_:_:)`` throws when the limit passes first.
struct DeadlineExceeded: Error, Hashable, CustomStringConvertible {
    var limit: Duration
    var what: String

    var description: String { "timed out after \(limit) \(what)" }
}

/// Runs `body`, throwing ``DeadlineExceeded`` if it has not finished within
/// `limit`, even when `body` is stuck in a wait that ignores cancellation.
///
/// A task group cannot do this: it returns only once every child has, so a
/// child blocked on a promise nobody fulfils (a postgres-nio query whose
/// backend died under it) holds the group, and with it the caller, forever.
/// Here `body` runs in an unstructured task and a timer in another; whichever
/// finishes first resumes the caller, exactly once, and the other is
/// cancelled. A `body` that ignores the cancellation is left to finish on its
/// own, and its result is dropped: callers must undo what it holds (close the
/// connection it waits on) rather than wait for it.
///
/// Cancelling the caller cancels `body`; the deadline still bounds the wait.
///
/// With `timerLoop`, the timer is a task scheduled on that event loop (the
/// connection's, for a statement) instead of a sleeping Swift task: a statement
/// costs one task less, and its timer one cancellation on the loop it runs on.
func withDeadline<T: Sendable>(
    _ limit: Duration, _ what: @autoclosure () -> String, timerLoop: (any EventLoop)? = nil,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = DeadlineRace<T>(DeadlineExceeded(limit: limit, what: what()))
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.start(continuation, limit: limit, timerLoop: timerLoop, body: body)
        }
    } onCancel: {
        race.cancelBody()
    }
}

/// The shared state of one ``withDeadline(_:_:_:)``: the caller's
/// continuation, resumed by the first of the body and the timer to finish.
private final class DeadlineRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var body: Task<Void, Never>?
        var cancelTimer: (@Sendable () -> Void)?
        var finished = false
        var cancelled = false
    }

    private let state = NIOLockedValueBox(State())
    private let timeout: DeadlineExceeded

    init(_ timeout: DeadlineExceeded) {
        self.timeout = timeout
    }

    func start(
        _ continuation: CheckedContinuation<T, any Error>, limit: Duration, timerLoop: (any EventLoop)?,
        body: @escaping @Sendable () async throws -> T
    ) {
        state.withLockedValue { $0.continuation = continuation }
        let bodyTask = Task {
            let result: Result<T, any Error>
            do {
                result = .success(try await body())
            } catch {
                result = .failure(error)
            }
            self.finish(result)
        }
        let cancelTimer: @Sendable () -> Void
        if let timerLoop {
            let (seconds, attoseconds) = limit.components
            let scheduled = timerLoop.scheduleTask(in: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)) {
                self.finish(.failure(self.timeout))
            }
            cancelTimer = { scheduled.cancel() }
        } else {
            let timerTask = Task {
                // Cancelled: the body finished first.
                guard (try? await Task.sleep(for: limit)) != nil else { return }
                self.finish(.failure(self.timeout))
            }
            cancelTimer = { timerTask.cancel() }
        }
        // Either may have finished before the other existed: the loser is cancelled here then.
        let (cancelBody, stopTimer) = state.withLockedValue { state in
            state.body = bodyTask
            state.cancelTimer = cancelTimer
            return (state.finished || state.cancelled, state.finished)
        }
        if cancelBody { bodyTask.cancel() }
        if stopTimer { cancelTimer() }
    }

    /// Resumes the caller if nobody has yet; cancels whichever task is still running.
    private func finish(_ result: Result<T, any Error>) {
        let (continuation, body, cancelTimer) = state.withLockedValue { state in
            defer {
                state.continuation = nil
                state.finished = true
            }
            return (state.continuation, state.body, state.cancelTimer)
        }
        guard let continuation else { return }
        continuation.resume(with: result)
        body?.cancel()
        cancelTimer?()
    }

    func cancelBody() {
        let body = state.withLockedValue { state in
            state.cancelled = true
            return state.body
        }
        body?.cancel()
    }
}
