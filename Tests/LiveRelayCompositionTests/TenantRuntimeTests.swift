import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayBackoff
import LiveRelayDomain
import LiveRelayServer
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
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

    /// Any change to what a key may do ends its open connections, as a revocation does: a
    /// connection keeps the rights it authenticated with, and PINGs would keep it open for good.
    @Test func aKeyRevokedGoneOrChangedEndsItsConnectionsAndOnlyThose() throws {
        let a = try RegisteredAPIKey(seed: keyA.record)
        let b = try RegisteredAPIKey(seed: keyB.record)
        let c = try RegisteredAPIKey(seed: APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping], label: "c").record)
        let d = try RegisteredAPIKey(seed: APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping], label: "d").record)
        let before = snapshot(version: 1, apps: [], keys: [a, b, c, d])

        var narrowed = a
        narrowed.role = .tenant(apps: .only(["orders"]), methods: ["Ping"])
        var rotated = b
        rotated.secretSHA256 = String(repeating: "0", count: 64)
        var relabelled = c
        relabelled.label = "c, renamed"
        relabelled.lastUsedAt = UnixTime(milliseconds: 5_000)
        let after = snapshot(version: 2, apps: [], keys: [narrowed, rotated, relabelled])
        #expect(TenantRuntime.keysEnded(from: before, to: after) == [a.keyID, b.keyID, d.keyID])

        var revoked = c
        revoked.revokedAt = UnixTime(milliseconds: 1_000)
        #expect(TenantRuntime.keysEnded(from: before, to: snapshot(version: 3, apps: [], keys: [a, b, revoked, d])) == [c.keyID])
        #expect(TenantRuntime.keysEnded(from: before, to: before).isEmpty)
    }

    /// A reload that fails (a database blip) is retried until the change it was for is applied,
    /// not left until the next change comes: a revocation heard of is applied on this node.
    @Test func aFailedReloadIsRetriedUntilTheChangeIsApplied() async throws {
        let registry = FlakyRegistry()
        let tenants = TenantRuntime(
            registry: registry,
            parts: TenantRuntime.Parts(
                authenticator: authenticator, activities: nil, apns: nil, quotas: quotas, priorityBudget: priorityBudget,
                defaultQuota: defaults, nodes: 1),
            keyUsage: KeyUsage(), logger: Logger(label: "tenant-runtime-tests"), pollEvery: .milliseconds(20),
            reloadBackoff: Backoff(initial: .milliseconds(10), maximum: .milliseconds(50)))
        try await tenants.reload()
        let running = Task { try await tenants.run() }
        defer { running.cancel() }

        registry.failSnapshots(3)
        let applied = try await registry.apply(
            .createApp(RegisteredApp(id: "orders", bundleID: "com.example.orders")), actor: "admin", now: UnixTime(milliseconds: 1))
        let deadline = ContinuousClock.now + .seconds(30)
        while tenants.appliedVersion < applied.version, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(registry.failedSnapshots == 3, "the reloads failed as arranged")
        #expect(tenants.appliedVersion == applied.version, "the change was not applied after the failed reloads")
        #expect(quotas.settings.quota(of: "orders") == defaults)
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

/// The memory registry whose next snapshots fail, as a database blip makes them.
final class FlakyRegistry: TenantRegistry, @unchecked Sendable {
    private let inner = InMemoryTenantRegistry()
    private let state = NIOLockedValueBox((toFail: 0, failed: 0))

    struct Blip: Error {}

    func failSnapshots(_ count: Int) { state.withLockedValue { $0.toFail = count } }
    var failedSnapshots: Int { state.withLockedValue { $0.failed } }

    func snapshot() async throws -> RegistrySnapshot {
        let fail = state.withLockedValue { state in
            guard state.toFail > 0 else { return false }
            state.toFail -= 1
            state.failed += 1
            return true
        }
        if fail { throw Blip() }
        return try await inner.snapshot()
    }

    func version() async throws -> Int64 { try await inner.version() }
    func apply(_ change: RegistryChange, actor: String, now: UnixTime) async throws -> RegistryApplied {
        try await inner.apply(change, actor: actor, now: now)
    }
    func touch(_ lastUsed: [String: UnixTime]) async throws { try await inner.touch(lastUsed) }
    func audit(after sequence: Int64, limit: Int) async throws -> [AuditEntry] { try await inner.audit(after: sequence, limit: limit) }
    func changes(pollEvery: Duration) -> AsyncStream<Int64> { inner.changes(pollEvery: pollEvery) }
    func close() async throws { try await inner.close() }
    func claimWebhook(appID: String, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> WebhookProgress? {
        try await inner.claimWebhook(appID: appID, node: node, now: now, lease: lease)
    }
    func saveWebhook(_ progress: WebhookProgress, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> Bool {
        try await inner.saveWebhook(progress, node: node, now: now, lease: lease)
    }
    func resetWebhook(appID: String) async throws -> WebhookProgress? { try await inner.resetWebhook(appID: appID) }
    func webhookProgress(appID: String) async throws -> WebhookProgress? { try await inner.webhookProgress(appID: appID) }
    func releaseWebhook(appID: String, node: String) async throws { try await inner.releaseWebhook(appID: appID, node: node) }
}
