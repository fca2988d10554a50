import Dispatch
import Testing

@testable import LiveRelayStore

@Suite struct AdaptiveLockTests {
    /// Four threads add to one counter under the lock, 100,000 times each, with
    /// a read-modify-write that a lost exclusion would tear.
    @Test func everyIncrementUnderContentionIsKept() {
        final class Counter: @unchecked Sendable {
            let lock = AdaptiveLock()
            var value = 0
        }
        let counter = Counter()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<100_000 {
                counter.lock.withLock {
                    let seen = counter.value
                    counter.value = seen + 1
                }
            }
        }
        #expect(counter.lock.withLock { counter.value } == 400_000)
    }

    @Test func aThrowingBodyReleasesTheLock() {
        struct Failure: Error {}
        let lock = AdaptiveLock()
        #expect(throws: Failure.self) { try lock.withLock { throw Failure() } }
        #expect(lock.withLock { 1 } == 1, "taken again after the throw")
    }
}
