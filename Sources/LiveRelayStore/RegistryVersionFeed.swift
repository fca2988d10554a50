import NIOConcurrencyHelpers

/// The change streams of one registry: every subscriber's
/// `AsyncStream<Int64>`, fed by ``publish(_:)`` (the registry's own applies,
/// PostgreSQL notifications) and by a poll per subscriber.
///
/// Each subscriber gets a version only if it is above the last one it got, so
/// its stream increases strictly whatever order publishers race in, and its
/// buffer keeps only the newest: a slow consumer skips to the latest
/// version instead of replaying history it does not need.
package final class RegistryVersionFeed: Sendable {
    private struct Subscriber {
        var continuation: AsyncStream<Int64>.Continuation
        var last: Int64?
        var poll: Task<Void, Never>?
    }

    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var nextID = 0
        var finished = false
    }

    private let state = NIOLockedValueBox(State())

    package init() {}

    /// Subscribers currently attached (tests: a consumer that went away is removed).
    package var subscriberCount: Int { state.withLockedValue { $0.subscribers.count } }

    /// Offers `version` to every subscriber that has not had it or a later one.
    package func publish(_ version: Int64) {
        // Yielding under the lock keeps each stream in order; `yield` never
        // calls back into this feed (onTermination runs on finish or cancel only).
        state.withLockedValue { state in
            for id in state.subscribers.keys {
                guard state.subscribers[id]!.last.map({ version > $0 }) ?? true else { continue }
                state.subscribers[id]!.last = version
                state.subscribers[id]!.continuation.yield(version)
            }
        }
    }

    /// A new stream: `poll` runs at once (the first element is the current
    /// version) and then every `pollEvery` until the stream ends; a failed
    /// poll is skipped (the next one, or a notification, catches up).
    package func subscribe(pollEvery: Duration, poll: @escaping @Sendable () async throws -> Int64) -> AsyncStream<Int64> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int64.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLockedValue { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        // Set before the stream is registered or returned, so no termination goes unseen.
        continuation.onTermination = { [weak self] _ in
            let poll: Task<Void, Never>?? = self?.state.withLockedValue { $0.subscribers.removeValue(forKey: id)?.poll }
            poll??.cancel()
        }
        let registered = state.withLockedValue { state in
            guard !state.finished else { return false }
            state.subscribers[id] = Subscriber(continuation: continuation)
            return true
        }
        guard registered else {
            continuation.finish()
            return stream
        }
        let task = Task { [weak self] in
            while !Task.isCancelled {
                if let version = try? await poll() { self?.publish(version) }
                try? await Task.sleep(for: pollEvery)
            }
        }
        let attached = state.withLockedValue { state in
            guard state.subscribers[id] != nil else { return false }
            state.subscribers[id]!.poll = task
            return true
        }
        // Finished meanwhile (the registry closed): nobody else will cancel the poll.
        if !attached { task.cancel() }
        return stream
    }

    /// Ends every stream (the registry closed); later subscriptions end at once.
    package func finish() {
        let subscribers = state.withLockedValue { state in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers {
            subscriber.poll?.cancel()
            subscriber.continuation.finish()
        }
    }
}
