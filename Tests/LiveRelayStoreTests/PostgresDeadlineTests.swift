import LiveRelayTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import LiveRelayStorePostgres

/// ``withDeadline(_:_:_:)`` without a database: the store relies on it to
/// never wait on a postgres-nio query that never completes, so it must return
/// at its deadline even when the body neither finishes nor honours cancellation.
@Suite(.timeLimit(.minutes(1)))
struct PostgresDeadlineTests {
    /// A wait that nothing but ``open()`` ends: cancellation does not, like a
    /// postgres-nio query whose promise is never completed.
    actor Gate {
        private var isOpen = false
        private var waiters: [CheckedContinuation<Void, Never>] = []
        private(set) var waiting = 0

        func wait() async {
            if isOpen { return }
            waiting += 1
            await withCheckedContinuation { waiters.append($0) }
        }

        func open() {
            isOpen = true
            for waiter in waiters { waiter.resume() }
            waiters = []
        }
    }

    actor Box<T: Sendable> {
        var value: T?
        func set(_ value: T) { self.value = value }
    }

    struct Refused: Error, Equatable {}

    /// The timer as a sleeping task (nil) or as a task scheduled on an event loop, as statements use it.
    static let timerLoops: [(any EventLoop)?] = [nil, MultiThreadedEventLoopGroup.singleton.next()]

    @Test(arguments: timerLoops)
    func aBodyThatNeverReturnsAndIgnoresCancellationStillTimesOut(timerLoop: (any EventLoop)?) async throws {
        let gate = Gate()
        let sawCancellation = Box<Bool>()
        let start = ContinuousClock.now
        let outcome = try await withTimeout(.seconds(60)) { () async throws -> DeadlineExceeded? in
            do {
                _ = try await withDeadline(.milliseconds(100), "waiting at the gate", timerLoop: timerLoop) {
                    await gate.wait()
                    await sawCancellation.set(Task.isCancelled)
                }
                return nil
            } catch let error as DeadlineExceeded {
                return error
            }
        }
        #expect(outcome == DeadlineExceeded(limit: .milliseconds(100), what: "waiting at the gate"))
        #expect(ContinuousClock.now - start >= .milliseconds(100))
        #expect(await gate.waiting == 1, "the body was still waiting when the deadline returned")
        // The body was left running, cancelled: it finishes once its wait ends, and its result is dropped.
        await gate.open()
        try await eventually("the abandoned body finished") { await sawCancellation.value != nil }
        #expect(await sawCancellation.value == true)
    }

    @Test(arguments: timerLoops)
    func aBodyThatFinishesFirstReturnsItsValueWithoutWaitingForTheTimer(timerLoop: (any EventLoop)?) async throws {
        let start = ContinuousClock.now
        let value = try await withTimeout(.seconds(60)) {
            try await withDeadline(.seconds(3600), "answering", timerLoop: timerLoop) { 42 }
        }
        #expect(value == 42)
        #expect(ContinuousClock.now - start < .seconds(60))
    }

    @Test func theBodysErrorPropagates() async throws {
        await #expect(throws: Refused()) {
            try await withTimeout(.seconds(60)) {
                try await withDeadline(.seconds(3600), "refusing") { () async throws -> Int in throw Refused() }
            }
        }
    }

    @Test func cancellingTheCallerCancelsTheBody() async throws {
        let caller = Task {
            try await withDeadline(.seconds(3600), "sleeping") { try await Task.sleep(for: .seconds(3600)) }
        }
        caller.cancel()
        let result = try await withTimeout(.seconds(60)) { await caller.result }
        #expect(throws: CancellationError.self) { try result.get() }
    }

    /// Bodies and timers finishing at about the same moment: each caller is
    /// resumed exactly once (a second resume would trap), with one of the two outcomes.
    @Test func racesBetweenBodyAndTimerResumeOnce() async throws {
        let outcomes = try await withTimeout(.seconds(30)) {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<2_000 {
                    group.addTask {
                        do {
                            try await withDeadline(.microseconds(50), "racing") { try await Task.sleep(for: .microseconds(50)) }
                            return true
                        } catch is DeadlineExceeded {
                            return false
                        }
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
        }
        #expect(outcomes.count == 2_000)
    }
}
