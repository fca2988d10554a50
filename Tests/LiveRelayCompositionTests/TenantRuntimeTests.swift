import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayServer
import LiveRelayStore
import Logging
import NIOCore
import Testing

@testable import LiveRelayComposition

/// The tenant runtime turns registry snapshots into the node's keys and quotas; no sockets, no dispatcher.
struct TenantRuntimeTests {
    let keyA = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping], label: "a")
    let keyB = APIKeyAuthenticator.generateKey(apps: .only(["orders"]), allowedMethods: [.ping], label: "b")
    let authenticator = ReloadableAuthenticator(try! APIKeyAuthenticator(keys: []))
    let quotas = QuotaGate(settings: QuotaSettings())
    let priorityBudget = PriorityBudgetGate()
    let defaults = AppQuota(callsPerSecond: 100, pushesPerHour: 1_000, priorityBudgetPerHour: 60)

    func runtime() -> TenantRuntime {
        TenantRuntime(
            registry: InMemoryTenantRegistry(),
            parts: TenantRuntime.Parts(
                authenticator: authenticator, activities: nil, apns: nil, quotas: quotas, priorityBudget: priorityBudget,
                defaultQuota: defaults, nodes: 2),
            keyUsage: KeyUsage(), logger: Logger(label: "tenant-runtime-tests"))
    }

    func accepts(_ plaintext: String) -> Bool {
        if case .success = authenticator.authenticate(apiKey: ByteBuffer(string: plaintext)) { return true }
        return false
    }

    func snapshot(version: Int64, apps: [RegisteredApp], keys: [RegisteredAPIKey]) -> RegistrySnapshot {
        RegistrySnapshot(
            version: version, apps: Dictionary(uniqueKeysWithValues: apps.map { ($0.id, $0) }),
            keys: Dictionary(uniqueKeysWithValues: keys.map { ($0.keyID, $0) }))
    }

    @Test func anAppsQuotasAreItsOwnOverTheDefaultsAndZeroLiftsALimit() throws {
        let tenants = runtime()
        let orders = RegisteredApp(
            id: "orders", bundleID: "com.example.orders", quotas: RegisteredQuotas(callsPerSecond: 5, pushesPerHour: 0))
        let rides = RegisteredApp(id: "rides", bundleID: "com.example.rides")
        tenants.apply(snapshot(version: 1, apps: [orders, rides], keys: []))

        let settings = quotas.settings
        #expect(settings.nodes == 2)
        #expect(settings.quota(of: "orders").callsPerSecond == 5)
        #expect(settings.quota(of: "orders").pushesPerHour == nil, "0 lifts the default")
        #expect(settings.quota(of: "rides") == defaults)
    }

    @Test func anAppsPriorityBudgetIsItsOwnOverTheDefaultAndFollowsTheRegistry() throws {
        let tenants = runtime()
        let scores = RegisteredApp(
            id: "scores", bundleID: "com.example.scores", quotas: RegisteredQuotas(priorityBudgetPerHour: 2))
        let news = RegisteredApp(id: "news", bundleID: "com.example.news", quotas: RegisteredQuotas(priorityBudgetPerHour: 0))
        let rides = RegisteredApp(id: "rides", bundleID: "com.example.rides")
        tenants.apply(snapshot(version: 1, apps: [scores, news, rides], keys: []))
        #expect(priorityBudget.budgets.budget(of: "scores") == 2)
        #expect(priorityBudget.budgets.budget(of: "news") == nil, "0 lifts the default")
        #expect(priorityBudget.budgets.budget(of: "rides") == 60)
        #expect(quotas.settings.quota(of: "scores").priorityBudgetPerHour == 2, "GetAppStats reads it from the quota settings")

        // The third priority-10 send of one activity in the hour goes at priority 5.
        for _ in 0..<2 {
            let decision = priorityBudget.decide(appID: "scores", activityID: "game", channelID: nil, priority: 10, strict: false)
            #expect(decision == .send(priority: 10))
            priorityBudget.record(appID: "scores", activityID: "game", channelID: nil, priority: 10)
        }
        #expect(priorityBudget.decide(appID: "scores", activityID: "game", channelID: nil, priority: 10, strict: false) == .downgrade)

        // An admin lifts the budget: the next call goes at priority 10 again.
        var lifted = scores
        lifted.quotas.priorityBudgetPerHour = 0
        tenants.apply(snapshot(version: 2, apps: [lifted, news, rides], keys: []))
        #expect(
            priorityBudget.decide(appID: "scores", activityID: "game", channelID: nil, priority: 10, strict: false) == .send(priority: 10))
    }

    @Test func keysFollowTheSnapshotAndARevokedKeyStopsAuthenticating() throws {
        let tenants = runtime()
        let a = try RegisteredAPIKey(seed: keyA.record)
        let b = try RegisteredAPIKey(seed: keyB.record)
        tenants.apply(snapshot(version: 1, apps: [], keys: [a, b]))
        #expect(accepts(keyA.plaintext))
        #expect(accepts(keyB.plaintext))

        var revoked = b
        revoked.revokedAt = UnixTime(milliseconds: 1_000)
        tenants.apply(snapshot(version: 2, apps: [], keys: [a, revoked]))
        #expect(accepts(keyA.plaintext))
        #expect(!accepts(keyB.plaintext))
    }

    @Test func anOlderSnapshotThanTheOneAppliedIsIgnored() throws {
        let tenants = runtime()
        let a = try RegisteredAPIKey(seed: keyA.record)
        let newer = RegisteredApp(id: "orders", bundleID: "com.example.orders", quotas: RegisteredQuotas(callsPerSecond: 7))
        tenants.apply(snapshot(version: 5, apps: [newer], keys: [a]))
        let older = RegisteredApp(id: "orders", bundleID: "com.example.orders", quotas: RegisteredQuotas(callsPerSecond: 1))
        tenants.apply(snapshot(version: 4, apps: [older], keys: []))
        #expect(quotas.settings.quota(of: "orders").callsPerSecond == 7)
        #expect(accepts(keyA.plaintext))
    }

    @Test func aSeedKeyKeepsItsScopeAndMethods() throws {
        let b = try RegisteredAPIKey(seed: keyB.record)
        #expect(b.source == .seed)
        let principal = TenantRuntime.principal(b)
        #expect(principal.keyID == keyB.record.keyID)
        #expect(principal.allowedMethods == [.ping])
        #expect(!principal.isAdmin)
    }
}
