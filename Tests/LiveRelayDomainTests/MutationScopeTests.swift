import LiveRelayAPNs
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayStore
import Testing

@testable import LiveRelayDomain

/// What each rule tells a store kept per app: which apps it is about
/// (``MutationScope``), how a settle of several apps splits, and when a poll
/// across apps finds nothing.
@Suite struct MutationScopeTests {
    static let lease = IntentLease(owner: "node-a")

    @Test func callsAboutOneAppSayWhichAndTheRestSayEveryApp() {
        #expect(RegisterToken(pushToStart(hex(1))).scope == .app(app.id))
        #expect(StartActivity(start(), app: app).scope == .app(app.id))
        #expect(ChangeActivity(update(), app: app).scope == .app(app.id))
        #expect(ChangeActivity(endRequest(), app: app).scope == .app(app.id))
        #expect(PruneToken(TokenKey(appID: app.id, hex: hex(1)), reason: "Unregistered").scope == .app(app.id))
        #expect(Sweep().scope == .allApps)
        #expect(ClaimIntents(lease: Self.lease).scope == .allApps)
        #expect(RenewIntents(lease: Self.lease, keys: []).scope == .allApps)
        let key = { (appID: String) in IntentKey(appID: appID, activityID: "order-1", timestamp: 1) }
        #expect(RenewIntents(lease: Self.lease, keys: [key("a"), key("a")]).scope == .app("a"))
        let mixed = RenewIntents(lease: Self.lease, keys: [key("a"), key("b")])
        #expect(mixed.scope == .allApps)
        #expect(Set(mixed.partsByApp.map(\.scope)) == [.app("a"), .app("b")])
    }

    @Test func aSettleOfSeveralAppsSplitsIntoOnePerAppInOrder() {
        func settled(_ appID: String, _ timestamp: Int64) -> SettledIntent {
            SettledIntent(key: IntentKey(appID: appID, activityID: "order-1", timestamp: timestamp), account: EnqueueResult())
        }
        let one = SettleIntents([settled("a", 1), settled("a", 2)])
        #expect(one.scope == .app("a"))
        let mixed = SettleIntents([settled("a", 1), settled("b", 2), settled("a", 3)])
        #expect(mixed.scope == .allApps)
        let parts = mixed.partsByApp.sorted { $0.settled[0].key.appID < $1.settled[0].key.appID }
        #expect(parts.map(\.scope) == [.app("a"), .app("b")])
        #expect(parts.map { $0.settled.map(\.key.timestamp) } == [[1, 3], [2]])
        #expect(SettleIntents([]).scope == .allApps && SettleIntents([]).partsByApp.isEmpty)
    }

    /// Every write names its app, a renewal's included.
    @Test func writesNameTheirApp() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        let plan = try state.applyPlan(StartActivity(start(), app: app, intents: Self.lease), now: t0)
        #expect(plan.writes.count >= 2 && plan.writes.allSatisfy { $0.appID == app.id })
        let key = IntentKey(appID: "c", activityID: "x", timestamp: 1)
        #expect(StoreWrite.renewIntent(key, owner: "node-a", until: t0).appID == "c")
        #expect(StoreWrite.deleteUpdateTokens(of: ActivityKey(appID: "b", activityID: "x")).appID == "b")
    }

    /// How many tokens a rule reads, counted up to a limit: what the memory
    /// store decides by whether to plan it off the caller's loop.
    @Test func fanOutRulesCountTheTokensTheyRead() throws {
        var state = InMemoryState()
        for n in 1...5 {
            _ = try state.apply(RegisterToken(pushToStart(hex(n), device: "device-\(n)")), now: t0)
            _ = try state.apply(RegisterToken(updateToken(hex(100 + n), device: "device-\(n)")), now: t0)
        }
        _ = try state.apply(RegisterToken(updateToken(hex(200), activity: "order-2")), now: t0)
        #expect(ChangeActivity(update(), app: app).tokensRead(in: state, upTo: 100) == 5)
        #expect(ChangeActivity(update(), app: app).tokensRead(in: state, upTo: 3) == 3, "counted no further than asked")
        #expect(ChangeActivity(endRequest("order-2"), app: app).tokensRead(in: state, upTo: 100) == 1)
        #expect(ChangeActivity(update("no-such-order"), app: app).tokensRead(in: state, upTo: 100) == 0)
        #expect(StartActivity(start("order-9"), app: app).tokensRead(in: state, upTo: 100) == 5, "all_devices: the type's tokens")
        let named = start("order-9", targets: Targets(pushToStartTokens: [hex(1), hex(2)]))
        #expect(StartActivity(named, app: app).tokensRead(in: state, upTo: 100) == 2)
        #expect(RegisterToken(pushToStart(hex(6))).tokensRead(in: state, upTo: 100) == 0)
    }

    @Test func pollsFindWorkOnlyWhenThereIsSome() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        _ = try state.apply(StartActivity(start(), app: app, intents: Self.lease), now: t0)
        let claim = ClaimIntents(lease: IntentLease(owner: "node-b"))
        #expect(!claim.findsWork(in: state, now: t0), "node A's lease still holds")
        #expect(claim.findsWork(in: state, now: t0 + .seconds(31)))
        #expect(claim.idleOutcome.isEmpty)
        #expect(!Sweep().findsWork(in: state, now: t0 + .seconds(60)))
        #expect(Sweep().findsWork(in: state, now: t0 + .seconds(9 * 3600)), "the activity is past its 8 hours")
        #expect(Sweep().idleOutcome.isEmpty)
    }
}
