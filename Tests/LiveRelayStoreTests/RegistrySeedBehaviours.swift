import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

/// The seed from the config file: declarative for what the file says, and
/// never undoing what was done through the admin API.
extension RegistryBehaviourSuite {
    static let seedBehaviours: [RegistryBehaviour] = [
        RegistryBehaviour(description: "a seed twice: the second writes nothing and adds no audit row", run: seedIsIdempotent),
        RegistryBehaviour(description: "a seed never un-revokes a key nor re-enables an app", run: seedKeepsRevocations),
        RegistryBehaviour(description: "a seed leaves admin apps and keys alone", run: seedLeavesAdminEntries),
        RegistryBehaviour(description: "a seed brings seeded entries back to the file and never revokes", run: seedIsDeclarative),
        RegistryBehaviour(
            description: "an admin change to a seeded app makes it the admin's: no later seed undoes it",
            run: anAdminChangeEndsTheSeedsOwnership),
    ]

    static func configApps() -> [RegisteredApp] {
        var orders = registeredApp("orders")
        orders.queueCapacity = 200_000
        orders.credentials = RegisteredCredentials(teamID: "TEAM123456", keyID: "KEY1234567", keySource: .file(path: "/keys/orders.p8"))
        return [orders, registeredApp("rides")]
    }

    static func configKeys() -> [RegisteredAPIKey] { [tenantKey(1), tenantKey(2, apps: .all), adminKey(3)] }

    static func seedIsIdempotent(_ make: RegistryFactory) async throws {
        let registry = try await make()
        let first = try await apply(registry, .seed(apps: configApps(), keys: configKeys()))
        #expect(first.version == 1)
        #expect(first.entry?.action == .seed)
        let seeded = try await registry.snapshot()
        #expect(Set(seeded.apps.keys) == ["orders", "rides"])
        #expect(seeded.apps.values.allSatisfy { $0.source == .seed && $0.createdAt == t0 })
        #expect(seeded.apps["orders"]?.credentials?.updatedAt == t0)
        #expect(seeded.keys.count == 3)
        #expect(seeded.keys.values.allSatisfy { $0.source == .seed && $0.revokedAt == nil })

        let second = try await apply(registry, .seed(apps: configApps(), keys: configKeys()), at: t0 + .seconds(60))
        #expect(second == RegistryApplied(version: 1, entry: nil))
        #expect(try await registry.snapshot() == seeded)
        #expect(try await registry.audit(after: 0, limit: 10).count == 1)
        try await registry.close()
    }

    static func seedKeepsRevocations(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .seed(apps: configApps(), keys: configKeys()))
        try await apply(registry, .revokeKey(keyID: registryKeyID(1)), at: t0 + .seconds(5))
        try await apply(registry, .disableApp(id: "orders"), at: t0 + .seconds(5))
        let before = try await registry.snapshot()

        // The file still lists the key and the app (enabled): neither comes back.
        var changedKey = tenantKey(1)
        changedKey.label = "renamed in the file"
        let again = try await apply(
            registry, .seed(apps: configApps(), keys: [changedKey] + configKeys().dropFirst()), at: t0 + .seconds(60))
        #expect(again.entry == nil)
        let after = try await registry.snapshot()
        #expect(after == before)
        #expect(after.keys[registryKeyID(1)]?.revokedAt == t0 + .seconds(5))
        #expect(after.keys[registryKeyID(1)]?.label == "worker", "a revoked key is final")
        #expect(after.apps["orders"]?.enabled == false)
        try await registry.close()
    }

    static func seedLeavesAdminEntries(_ make: RegistryFactory) async throws {
        let registry = try await make()
        var adminOrders = registeredApp("orders", bundle: "com.example.admin-orders")
        adminOrders.weight = 9
        try await apply(registry, .createApp(adminOrders))
        try await apply(registry, .createKey(tenantKey(1, label: "made by an admin")))
        try await apply(registry, .createKey(tenantKey(7, label: "admin only")))
        let before = try await registry.snapshot()

        let seeded = try await apply(registry, .seed(apps: configApps(), keys: configKeys()), at: t0 + .seconds(60))
        let after = try await registry.snapshot()
        #expect(after.apps["orders"] == before.apps["orders"])
        #expect(after.keys[registryKeyID(1)] == before.keys[registryKeyID(1)])
        // An admin key the file does not list is not the file's to revoke.
        #expect(after.keys[registryKeyID(7)] == before.keys[registryKeyID(7)])
        #expect(after.apps["rides"]?.source == .seed)
        #expect(after.keys[registryKeyID(2)]?.source == .seed)
        #expect(
            seeded.entry?.details == #"{"apps_created":["rides"],"keys_created":["\#(registryKeyID(2))","\#(registryKeyID(3))"]}"#)
        try await registry.close()
    }

    static func seedIsDeclarative(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .seed(apps: configApps(), keys: configKeys()))
        // A seeded key in use.
        try await registry.touch([registryKeyID(2): t0 + .seconds(30)])

        // The file changes: orders' bundle, capacity and key source; key 1's hash;
        // key 2 is gone; key 4 is new; rides gets a weight.
        var apps = configApps()
        apps[0].bundleID = "com.example.orders2"
        apps[0].queueCapacity = nil
        apps[0].credentials = RegisteredCredentials(teamID: "TEAM123456", keyID: "KEY1234567", keySource: .environment(name: "ORDERS_KEY"))
        apps[1].weight = 4
        var key1 = tenantKey(1)
        key1.secretSHA256 = registryHash(101)
        let applied = try await apply(registry, .seed(apps: apps, keys: [key1, adminKey(3), tenantKey(4)]), at: t0 + .seconds(60))
        #expect(
            applied.entry?.details
                == #"{"apps_updated":["orders","rides"],"keys_created":["\#(registryKeyID(4))"],"keys_updated":["\#(registryKeyID(1))"]}"#)
        let after = try await registry.snapshot()
        let orders = try #require(after.apps["orders"])
        #expect(orders.bundleID == "com.example.orders2")
        #expect(orders.queueCapacity == nil)
        #expect(orders.credentials?.keySource == .environment(name: "ORDERS_KEY"))
        #expect(orders.credentials?.updatedAt == t0 + .seconds(60))
        #expect(orders.createdAt == t0)
        #expect(orders.updatedAt == t0 + .seconds(60))
        #expect(after.apps["rides"]?.weight == 4)
        #expect(after.apps["rides"]?.source == .seed)
        #expect(after.keys[registryKeyID(1)]?.secretSHA256 == registryHash(101))
        #expect(after.keys[registryKeyID(1)]?.revokedAt == nil)
        #expect(
            after.keys[registryKeyID(2)]?.revokedAt == nil,
            "a seed never revokes: another node may seed from another file, and a revocation is final")
        #expect(after.keys[registryKeyID(2)]?.lastUsedAt == t0 + .seconds(30))
        #expect(after.keys[registryKeyID(4)]?.source == .seed)

        // The file may disable an app; it never enables one again.
        apps[1].enabled = false
        try await apply(registry, .seed(apps: apps, keys: [key1, adminKey(3), tenantKey(4)]), at: t0 + .seconds(70))
        #expect(try await registry.snapshot().apps["rides"]?.enabled == false)
        apps[1].enabled = true
        let noop = try await apply(registry, .seed(apps: apps, keys: [key1, adminKey(3), tenantKey(4)]), at: t0 + .seconds(80))
        #expect(noop.entry == nil)
        #expect(try await registry.snapshot().apps["rides"]?.enabled == false)
        try await registry.close()
    }

    static func anAdminChangeEndsTheSeedsOwnership(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .seed(apps: configApps(), keys: configKeys()))
        // An admin lowers rides' quota, rotates orders' key and disables nothing else.
        let quotas = RegisteredQuotas(callsPerSecond: 1)
        try await apply(registry, .updateApp(id: "rides", RegisteredAppPatch(quotas: quotas)), at: t0 + .seconds(1))
        let rotated = RegisteredCredentials(teamID: "TEAM123456", keyID: "KEY7654321", keySource: .stored(pem: "rotated"))
        try await apply(registry, .putCredentials(appID: "orders", rotated), at: t0 + .seconds(2))
        let changed = try await registry.snapshot()
        #expect(changed.apps["rides"]?.source == .admin)
        #expect(changed.apps["orders"]?.source == .admin)

        // The next start seeds the same file again, and a rolling update seeds a changed one: neither undoes the admin.
        let again = try await apply(registry, .seed(apps: configApps(), keys: configKeys()), at: t0 + .seconds(60))
        #expect(again.entry == nil)
        var edited = configApps()
        edited[0].queueCapacity = 5
        edited[1].quotas = RegisteredQuotas(callsPerSecond: 500)
        let rolled = try await apply(registry, .seed(apps: edited, keys: configKeys()), at: t0 + .seconds(120))
        #expect(rolled.entry == nil)
        let after = try await registry.snapshot()
        #expect(after.apps["rides"]?.quotas == quotas)
        #expect(after.apps["orders"]?.credentials?.keyID == "KEY7654321")
        #expect(after.apps["orders"]?.queueCapacity == 200_000)
        #expect(after == changed)
        try await registry.close()
    }
}
