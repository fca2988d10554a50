import Dispatch
import LiveRelayAPNs
import LiveRelayDomain
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import LiveRelayStore

/// The memory store plans a call that reads many tokens on its
/// app's queue, not on the caller's thread (``AppShards/applyOrQueue(_:scope:now:commit:)``).
@Suite struct AppQueueTests {
    /// `apply` returns while such a call's plan runs; a call of another app made
    /// from the same thread meanwhile is answered; a call of the same app waits
    /// its turn and is applied after it, in the order the two came.
    @Test func aCallThatReadsManyTokensIsPlannedOffTheCallersThread() async throws {
        let store = InMemoryActivityStore()
        let loop = AppShardsTests.loop
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let answers = DispatchSemaphore(value: 0)
        let order = NIOLockedValueBox<[String]>([])
        @Sendable func answered<T: Sendable>(_ name: String) -> @Sendable (Result<T, any Error>) -> Void {
            { result in
                if case .success = result { order.withLockedValue { $0.append(name) } }
                answers.signal()
            }
        }

        /// `call` made on a thread of its own; true when `apply` returned within 10 s, before `release`.
        func returnsAtOnce(_ call: @escaping @Sendable () -> Void) -> Bool {
            let returned = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                call()
                returned.signal()
            }
            return returned.wait(timeout: .now() + 10) == .success
        }

        let many = HoldsItsApp(appID: appID, entered: entered, release: release, tokens: .max)
        #expect(returnsAtOnce { store.apply(many, now: t0, on: loop, then: answered("many")) }, "planned off the caller's thread")
        #expect(entered.wait(timeout: .now() + 60) == .success, "the call's plan started")

        let other = StoreBehaviourSuite.inApp(pushToStart(hex(1)), App(id: "app.other", bundleID: "app.other"))
        store.apply(RegisterToken(other), now: t0, on: loop, then: answered("other"))
        #expect(answers.wait(timeout: .now() + 60) == .success, "another app's call was answered while the plan ran")
        let sameApp = RegisterToken(pushToStart(hex(2)))
        #expect(
            returnsAtOnce { store.apply(sameApp, now: t0, on: loop, then: answered("same app")) },
            "queued behind the call before it, without waiting for its lock on the caller's thread")
        #expect(order.withLockedValue { $0 } == ["other"], "the same app's call waits for the call before it")

        release.signal()
        #expect(answers.wait(timeout: .now() + 60) == .success && answers.wait(timeout: .now() + 60) == .success)
        #expect(order.withLockedValue { $0 } == ["other", "many", "same app"])
        #expect(try await store.token(TokenKey(appID: appID, hex: hex(2)), on: loop).get() != nil)

        // Once the queue is empty, the app's calls are applied on the caller's thread again:
        // answered before `apply` returns when made on the loop.
        let atOnce = try await loop.submit {
            let seen = NIOLockedValueBox(false)
            store.apply(RegisterToken(pushToStart(hex(3))), now: t0, on: loop) { _ in seen.withLockedValue { $0 = true } }
            return seen.withLockedValue { $0 }
        }.get()
        #expect(atOnce, "the memory store answers at once")
        try await store.close()
    }
}
