import Dispatch
import LiveRelayAPNs
import LiveRelayDomain
import NIOCore
import Testing

@testable import LiveRelayStore

/// A rule about one app that holds its app's lock until it is let go: a
/// 100,000-token fan-out, as long as a test wants.
struct HoldsItsApp: StoreMutation {
    let appID: String
    let entered: DispatchSemaphore
    let release: DispatchSemaphore
    /// The tokens it says it reads (``StoreMutation/tokensRead(in:upTo:)``).
    var tokens = 0

    var scope: MutationScope { .app(appID) }

    func tokensRead(in state: some TokenCounts, upTo limit: Int) -> Int { min(tokens, limit) }

    func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Void> {
        entered.signal()
        release.wait()
        return MutationPlan(outcome: ())
    }
}

/// `appID`'s lock held by a ``HoldsItsApp`` call on a thread of its own until ``letGo()``.
struct HeldApp {
    let release = DispatchSemaphore(value: 0)
    let answered = DispatchSemaphore(value: 0)

    /// nil when the call did not take the lock within a minute.
    init?(_ store: any ActivityStore) {
        let entered = DispatchSemaphore(value: 0)
        store.apply(HoldsItsApp(appID: appID, entered: entered, release: release), now: t0, on: AppShardsTests.loop, after: answered)
        guard entered.wait(timeout: .now() + 60) == .success else { return nil }
    }

    /// Lets the call go; true once it is answered.
    func letGo() -> Bool {
        release.signal()
        return answered.wait(timeout: .now() + 60) == .success
    }
}

extension ActivityStore {
    /// Applies `mutation` on a thread of its own; `done` is signalled when it succeeds.
    func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on loop: any EventLoop, after done: DispatchSemaphore) {
        DispatchQueue.global().async {
            self.apply(mutation, now: now, on: loop) { result in
                if case .success = result { done.signal() }
            }
        }
    }
}

@Suite struct AppShardsTests {
    /// While a call of one app holds its app's lock, another app's
    /// registration is applied and answered; the held app's own waits for it.
    @Test func anotherAppsCallIsNotHeldUp() async throws {
        let store = InMemoryActivityStore()
        let outcome = Self.callWhileAnAppIsHeld(store)
        #expect(outcome.otherAnswered, "the other app's call was answered while the first app's lock was held")
        #expect(outcome.heldAppsCallAnswered, "the held app's call was answered once the lock was let go")
        let loop = StoreBehaviourSuite.group.any()
        #expect(try await store.token(TokenKey(appID: "app.other", hex: hex(1)), on: loop).get() != nil)
        #expect(try await store.token(TokenKey(appID: appID, hex: hex(2)), on: loop).get() != nil)
        try await store.close()
    }

    /// Blocking waits, kept out of the async test. Each wait has a minute's
    /// margin: a store that makes the other app wait fails instead of hanging.
    static func callWhileAnAppIsHeld(_ store: any ActivityStore) -> (otherAnswered: Bool, heldAppsCallAnswered: Bool) {
        guard let held = HeldApp(store) else { return (false, false) }
        let other = StoreBehaviourSuite.inApp(pushToStart(hex(1)), App(id: "app.other", bundleID: "app.other"))
        let otherAnswered = answered(store, [RegisterToken(other)]) == 1
        let sameApp = DispatchSemaphore(value: 0)
        store.apply(RegisterToken(pushToStart(hex(2))), now: t0, on: loop, after: sameApp)
        return (otherAnswered, held.letGo() && sameApp.wait(timeout: .now() + 60) == .success)
    }

    /// While one app's lock is held, an intent claim and a sweep (polls across
    /// apps, ``PollsAcrossApps``) and a renewal of every app's intents (``SplitsByApp``) wait for
    /// it without holding any other app's:
    /// five other apps' registrations are answered meanwhile. Holding every
    /// lock it reached before the held one, a poll would stop most of them.
    @Test func aPollWaitsForAHeldAppAlone() async throws {
        let store = InMemoryActivityStore()
        for app in StoreBehaviourSuite.apps {
            try await StoreBehaviourSuite.apply(store, RegisterToken(StoreBehaviourSuite.inApp(pushToStart(hex(1)), app)))
        }
        let outcome = Self.pollWhileAnAppIsHeld(store)
        #expect(outcome.othersAnswered == StoreBehaviourSuite.apps.count)
        #expect(outcome.pollsAnswered, "the polls and the renewal were answered once the lock was let go")
        try await store.close()
    }

    static func pollWhileAnAppIsHeld(_ store: any ActivityStore) -> (othersAnswered: Int, pollsAnswered: Bool) {
        guard let held = HeldApp(store) else { return (0, false) }
        let polls = DispatchSemaphore(value: 0)
        store.apply(ClaimIntents(lease: StoreBehaviourSuite.nodeB), now: t0, on: loop, after: polls)
        store.apply(Sweep(), now: t0, on: loop, after: polls)
        let renewed = ([app] + StoreBehaviourSuite.apps).map { IntentKey(appID: $0.id, activityID: "x", timestamp: 1) }
        store.apply(RenewIntents(lease: StoreBehaviourSuite.nodeA, keys: renewed), now: t0, on: loop, after: polls)
        let others = StoreBehaviourSuite.apps.map { RegisterToken(StoreBehaviourSuite.inApp(pushToStart(hex(2)), $0)) }
        let othersAnswered = answered(store, others)
        let pollsAnswered = held.letGo() && (0..<3).allSatisfy { _ in polls.wait(timeout: .now() + 60) == .success }
        return (othersAnswered, pollsAnswered)
    }

    /// A sweep and an intent claim that find work in every app, the held one
    /// included, do it one app at a time: five other apps' registrations are
    /// answered while the held app's lock is held, and once it is let go both
    /// are answered with every app's part done (activities expired, intents
    /// taken). Holding every lock it reached before the held one, a poll
    /// that found work would stop most of the registrations.
    @Test func aPollThatFindsWorkTakesOneAppAtATime() async throws {
        let store = InMemoryActivityStore()
        let every = StoreBehaviourSuite.apps + [app]
        for (i, app) in every.enumerated() {
            try await StoreBehaviourSuite.apply(store, RegisterToken(StoreBehaviourSuite.inApp(pushToStart(hex(1)), app)))
            let started = try await StoreBehaviourSuite.apply(
                store, StartActivity(StoreBehaviourSuite.startIn(app), app: app, intents: StoreBehaviourSuite.nodeA),
                now: t0 + .seconds(Int64(i)))
            #expect(started.accepted?.batch.durable == true)
        }
        let outcome = Self.pollsWithWorkWhileAnAppIsHeld(store)
        #expect(outcome.othersAnswered == StoreBehaviourSuite.apps.count)
        #expect(Set(outcome.claimed ?? []) == Set(every.map(\.id)), "every app's intent taken once the lock was let go")
        #expect(Set(outcome.expired ?? []) == Set(every.map(\.id)), "every app's activity expired once the lock was let go")
        try await store.close()
    }

    static func pollsWithWorkWhileAnAppIsHeld(_ store: any ActivityStore) -> (othersAnswered: Int, claimed: [String]?, expired: [String]?) {
        guard let held = HeldApp(store) else { return (0, nil, nil) }
        let claimed = Answer<ClaimedIntents>()
        let swept = Answer<SweepReport>()
        // Node A's leases (30 s) ran out long ago; every activity is past its 8 hours.
        let later = t0 + .seconds(9 * 3600)
        claimed.await(store, ClaimIntents(lease: StoreBehaviourSuite.nodeB), now: later)
        swept.await(store, Sweep(), now: later)
        let others = StoreBehaviourSuite.apps.map { RegisterToken(StoreBehaviourSuite.inApp(pushToStart(hex(2)), $0)) }
        let othersAnswered = answered(store, others)
        guard held.letGo() else { return (othersAnswered, nil, nil) }
        // At nine hours the intents are past their expiry too: claimed, they are settled unsent.
        let claims = claimed.wait().map { $0.batches.map(\.appID) + $0.expired.map(\.appID) }
        return (othersAnswered, claims, swept.wait()?.expired.map(\.appID))
    }

    /// The outcome of a call applied on a thread of its own, waited for with a minute's margin.
    final class Answer<Outcome: Sendable>: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var outcome: Outcome?

        func await<M: StoreMutation>(_ store: any ActivityStore, _ mutation: M, now: UnixTime) where M.Outcome == Outcome {
            DispatchQueue.global().async {
                store.apply(mutation, now: now, on: AppShardsTests.loop) { result in
                    self.outcome = try? result.get()
                    self.done.signal()
                }
            }
        }

        func wait() -> Outcome? { done.wait(timeout: .now() + 60) == .success ? outcome : nil }
    }

    static let loop = StoreBehaviourSuite.group.any()

    /// How many of `calls`, each applied on a thread of its own, succeed within a minute.
    static func answered<M: StoreMutation>(_ store: any ActivityStore, _ calls: [M]) -> Int {
        let done = DispatchSemaphore(value: 0)
        for call in calls { store.apply(call, now: t0, on: loop, after: done) }
        return calls.filter { _ in done.wait(timeout: .now() + 60) == .success }.count
    }

    /// A closed store refuses every app's calls, an app it never saw included.
    @Test func aClosedStoreRefusesEveryApp() async throws {
        let store = InMemoryActivityStore()
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1))))
        try await store.close()
        var request = pushToStart(hex(1))
        request.appID = "app.new"
        for request in [pushToStart(hex(2)), request] {
            await #expect(throws: ActivityStoreError.self) { try await StoreBehaviourSuite.apply(store, RegisterToken(request)) }
        }
        await #expect(throws: ActivityStoreError.self) { try await StoreBehaviourSuite.apply(store, Sweep()) }
        await #expect(throws: ActivityStoreError.self) {
            try await store.token(TokenKey(appID: appID, hex: hex(1)), on: StoreBehaviourSuite.group.any()).get()
        }
    }
}
