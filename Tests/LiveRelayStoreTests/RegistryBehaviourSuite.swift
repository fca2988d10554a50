import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

/// Makes a fresh, empty registry for one behaviour.
typealias RegistryFactory = @Sendable () async throws -> any TenantRegistry

/// One behaviour every ``TenantRegistry`` must have, runnable against any of
/// them: the memory, SQLite and PostgreSQL tests run ``RegistryBehaviourSuite/all``
/// with their own factory, as the activity stores run ``StoreBehaviourSuite``.
/// Each behaviour closes the registry it made.
struct RegistryBehaviour: Sendable, CustomStringConvertible {
    var description: String
    var run: @Sendable (RegistryFactory) async throws -> Void
}

enum RegistryBehaviourSuite {
    static let all: [RegistryBehaviour] =
        [
            RegistryBehaviour(description: "createApp on a taken id is appExists, disabled apps included", run: appExists),
            RegistryBehaviour(description: "update, disable and putCredentials of an unknown app are appNotFound", run: appNotFound),
            RegistryBehaviour(description: "createKey with a used key id is keyExists, revoked keys included", run: keyExists),
            RegistryBehaviour(
                description: "createKey naming apps that do not exist is refused NOT_FOUND naming them; a seed's key may name them",
                run: keyForUnknownApps),
            RegistryBehaviour(description: "revoking an unknown key is keyNotFound; revoking twice keeps the first time", run: revokeTwice),
            RegistryBehaviour(description: "an update patches only the fields it gives, quotas whole", run: updatePatches),
            RegistryBehaviour(description: "the version rises by one per effective change, not for no-ops", run: versions),
            RegistryBehaviour(description: "audit rows come in order and carry no secret", run: auditHasNoSecrets),
            RegistryBehaviour(description: "every field survives the round trip", run: roundTrip),
            RegistryBehaviour(description: "invalid values are refused and write nothing", run: invalidValues),
        ] + seedBehaviours + feedBehaviours + webhookBehaviours

    static let actor = "keyidaaaaadm"

    @discardableResult
    static func apply(_ registry: any TenantRegistry, _ change: RegistryChange, at time: UnixTime = t0) async throws -> RegistryApplied {
        try await registry.apply(change, actor: actor, now: time)
    }

    static func refusal(_ registry: any TenantRegistry, _ change: RegistryChange) async -> RegistryError? {
        do {
            _ = try await apply(registry, change)
            return nil
        } catch let error as RegistryError {
            return error
        } catch {
            Issue.record("expected a RegistryError, got \(error)")
            return nil
        }
    }

    static func appExists(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .createApp(registeredApp("orders")))
        try await apply(registry, .disableApp(id: "orders"))
        let before = try await registry.snapshot()
        #expect(await refusal(registry, .createApp(registeredApp("orders", bundle: "com.example.other"))) == .appExists("orders"))
        #expect(try await registry.snapshot() == before)
        try await registry.close()
    }

    static func appNotFound(_ make: RegistryFactory) async throws {
        let registry = try await make()
        #expect(await refusal(registry, .updateApp(id: "ghost", RegisteredAppPatch(weight: 2))) == .appNotFound("ghost"))
        #expect(await refusal(registry, .disableApp(id: "ghost")) == .appNotFound("ghost"))
        #expect(await refusal(registry, .putCredentials(appID: "ghost", storedCredentials())) == .appNotFound("ghost"))
        #expect(try await registry.version() == 0)
        #expect(try await registry.audit(after: 0, limit: 10).isEmpty)
        try await registry.close()
    }

    static func keyExists(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .createApp(registeredApp("orders")))
        try await apply(registry, .createKey(tenantKey(1)))
        #expect(await refusal(registry, .createKey(adminKey(1))) == .keyExists(registryKeyID(1)))
        try await apply(registry, .revokeKey(keyID: registryKeyID(1)))
        // A revoked key id is spent.
        #expect(await refusal(registry, .createKey(tenantKey(1))) == .keyExists(registryKeyID(1)))
        try await registry.close()
    }

    static func keyForUnknownApps(_ make: RegistryFactory) async throws {
        let registry = try await make()
        try await apply(registry, .createApp(registeredApp("orders")))
        try await apply(registry, .createApp(registeredApp("rides")))
        try await apply(registry, .disableApp(id: "rides"))
        let refused = await refusal(registry, .createKey(tenantKey(1, apps: .only(["orders", "phantom", "ghost"]))))
        #expect(refused == .keyAppsNotFound(["ghost", "phantom"]))
        #expect(refused?.code == .notFound)
        #expect(refused?.description.contains("ghost, phantom") == true, "\(String(describing: refused))")
        #expect(refused?.description.contains("orders") == false, "\(String(describing: refused))")
        #expect(try await registry.snapshot().keys.isEmpty)
        #expect(try await registry.version() == 3)
        // Apps that exist, a disabled one included, and every app.
        try await apply(registry, .createKey(tenantKey(2, apps: .only(["orders", "rides"]))))
        try await apply(registry, .createKey(tenantKey(3, apps: .all)))
        // A seed's key may name apps the registry does not have: a config file's keys work
        // without its "apps" (their pushes fail AppNotConfigured), and another node's seed
        // or the admin API may create the app later.
        try await apply(registry, .seed(apps: [], keys: [tenantKey(4, apps: .only(["ghost"]))]))
        #expect(try await registry.snapshot().keys[registryKeyID(4)]?.source == .seed)
        try await registry.close()
    }

    static func revokeTwice(_ make: RegistryFactory) async throws {
        let registry = try await make()
        #expect(await refusal(registry, .revokeKey(keyID: registryKeyID(9))) == .keyNotFound(registryKeyID(9)))
        try await apply(registry, .createKey(tenantKey(1, apps: .all)))
        let first = try await apply(registry, .revokeKey(keyID: registryKeyID(1)), at: t0 + .seconds(10))
        #expect(first.entry?.action == .revokeKey)
        let again = try await apply(registry, .revokeKey(keyID: registryKeyID(1)), at: t0 + .seconds(20))
        #expect(again == RegistryApplied(version: first.version, entry: nil))
        let key = try #require(try await registry.snapshot().keys[registryKeyID(1)])
        #expect(key.revokedAt == t0 + .seconds(10))
        #expect(try await registry.audit(after: 0, limit: 10).count == 2)
        try await registry.close()
    }

    static func updatePatches(_ make: RegistryFactory) async throws {
        let registry = try await make()
        var app = registeredApp("orders")
        app.queueCapacity = 500
        app.weight = 3
        app.maxPushLifetimeSeconds = 600
        app.quotas = RegisteredQuotas(callsPerSecond: 50, burst: 100, maxTokens: 1000)
        try await apply(registry, .createApp(app))
        try await apply(registry, .putCredentials(appID: "orders", storedCredentials()), at: t0 + .seconds(1))
        let applied = try await apply(
            registry, .updateApp(id: "orders", RegisteredAppPatch(weight: 5, quotas: RegisteredQuotas(pushesPerHour: 0))),
            at: t0 + .seconds(2))
        let after = try #require(try await registry.snapshot().apps["orders"])
        #expect(after.weight == 5)
        #expect(after.quotas == RegisteredQuotas(pushesPerHour: 0), "quotas are replaced as a whole")
        #expect(after.bundleID == app.bundleID)
        #expect(after.queueCapacity == 500)
        #expect(after.maxPushLifetimeSeconds == 600)
        #expect(after.enabled)
        #expect(after.credentials?.keySource == .stored(pem: registryPEM))
        #expect(after.createdAt == t0)
        #expect(after.updatedAt == t0 + .seconds(2))
        #expect(applied.entry?.details == #"{"weight":5,"quotas":{"pushes_per_hour":0}}"#)
        // The same values again: nothing changes.
        let same = try await apply(registry, .updateApp(id: "orders", RegisteredAppPatch(weight: 5)), at: t0 + .seconds(3))
        #expect(same == RegistryApplied(version: applied.version, entry: nil))
        // Enabling again is an update too.
        try await apply(registry, .disableApp(id: "orders"))
        #expect(try await registry.snapshot().apps["orders"]?.enabled == false)
        try await apply(registry, .updateApp(id: "orders", RegisteredAppPatch(enabled: true)))
        #expect(try await registry.snapshot().apps["orders"]?.enabled == true)
        try await registry.close()
    }

    static func versions(_ make: RegistryFactory) async throws {
        let registry = try await make()
        #expect(try await registry.version() == 0)
        let steps: [(RegistryChange, Bool)] = [
            (.createApp(registeredApp("orders")), true),
            (.updateApp(id: "orders", RegisteredAppPatch(bundleID: "com.example.orders")), false),  // the same bundle id
            (.putCredentials(appID: "orders", storedCredentials()), true),
            (.putCredentials(appID: "orders", storedCredentials()), false),
            (.disableApp(id: "orders"), true),
            (.disableApp(id: "orders"), false),
            (.createKey(tenantKey(1)), true),
            (.revokeKey(keyID: registryKeyID(1)), true),
            (.revokeKey(keyID: registryKeyID(1)), false),
        ]
        var expected: Int64 = 0
        for (i, (change, effective)) in steps.enumerated() {
            if effective { expected += 1 }
            let applied = try await apply(registry, change, at: t0 + .seconds(Int64(i)))
            #expect(applied.version == expected, "step \(i): \(change)")
            #expect((applied.entry != nil) == effective, "step \(i)")
            #expect(applied.entry.map(\.sequence) ?? expected == expected)
            #expect(try await registry.version() == expected)
            #expect(try await registry.snapshot().version == expected)
        }
        try await registry.close()
    }

    static func auditHasNoSecrets(_ make: RegistryFactory) async throws {
        let registry = try await make()
        var app = registeredApp("orders")
        app.credentials = storedCredentials()
        try await apply(registry, .createApp(app), at: t0)
        try await apply(registry, .putCredentials(appID: "orders", storedCredentials(endpoint: "mock.local:2197")), at: t0 + .seconds(1))
        let fromEnv = RegisteredCredentials(teamID: "TEAM123456", keyID: "KEY7654321", keySource: .environment(name: "ORDERS_APNS_KEY"))
        try await apply(registry, .putCredentials(appID: "orders", fromEnv), at: t0 + .seconds(2))
        let fromFile = RegisteredCredentials(teamID: "TEAM123456", keyID: "KEY7654321", keySource: .file(path: "/etc/liverelay/orders.p8"))
        try await apply(registry, .putCredentials(appID: "orders", fromFile), at: t0 + .seconds(3))
        try await apply(registry, .createKey(tenantKey(1)), at: t0 + .seconds(4))
        try await apply(registry, .createKey(adminKey(2)), at: t0 + .seconds(5))
        try await apply(registry, .revokeKey(keyID: registryKeyID(1)), at: t0 + .seconds(6))
        try await apply(registry, .seed(apps: [registeredApp("rides")], keys: [tenantKey(3, apps: .all)]), at: t0 + .seconds(7))

        let entries = try await registry.audit(after: 0, limit: 100)
        #expect(entries.map(\.sequence) == Array(1...8))
        #expect(entries.map(\.at) == (0..<8).map { t0 + .seconds(Int64($0)) })
        #expect(
            entries.map(\.action) == [
                .createApp, .putCredentials, .putCredentials, .putCredentials, .createKey, .createKey, .revokeKey, .seed,
            ])
        #expect(
            entries.map(\.target) == ["orders", "orders", "orders", "orders", registryKeyID(1), registryKeyID(2), registryKeyID(1), "*"])
        #expect(entries.allSatisfy { $0.actor == actor })
        for entry in entries {
            for secret in [registryPEMBody, "PRIVATE KEY", registryHash(1), registryHash(2), registryHash(3)] {
                #expect(!entry.details.contains(secret), "audit row \(entry.sequence) holds a secret: \(entry.details)")
            }
        }
        #expect(
            entries[0].details
                == #"{"bundle_id":"com.example.orders","enabled":true,"credentials":{"team_id":"TEAM123456","key_id":"KEY1234567","endpoint":"apple","key_source":"registry"}}"#
        )
        #expect(entries[2].details.contains(#""key_source":"env","key_env":"ORDERS_APNS_KEY""#))
        #expect(entries[3].details.contains(#""key_source":"file","key_file":"/etc/liverelay/orders.p8""#))
        #expect(
            entries[4].details == #"{"role":"tenant","app_ids":["orders"],"allowed_methods":["StartActivity","Ping"],"label":"worker"}"#)
        #expect(entries[7].details == #"{"apps_created":["rides"],"keys_created":["\#(registryKeyID(3))"]}"#)
        // Paging.
        #expect(try await registry.audit(after: 5, limit: 2).map(\.sequence) == [6, 7])
        #expect(try await registry.audit(after: 8, limit: 10).isEmpty)
        try await registry.close()
    }

    static func roundTrip(_ make: RegistryFactory) async throws {
        let registry = try await make()
        var app = registeredApp("orders")
        app.queueCapacity = 1234
        app.weight = 7
        app.maxPushLifetimeSeconds = 0
        app.quotas = RegisteredQuotas(
            callsPerSecond: 12.5, burst: 30, pushesPerHour: 250_000, maxTokens: 0, maxLiveActivities: 9, priorityBudgetPerHour: 0)
        app.credentials = storedCredentials(endpoint: "mock.local:2197")
        try await apply(registry, .createApp(app))
        try await apply(registry, .createApp(registeredApp("rides")))
        try await apply(
            registry,
            .putCredentials(
                appID: "rides", RegisteredCredentials(teamID: "T", keyID: "K", keySource: .file(path: "/keys/rides.p8"))))
        try await apply(registry, .createKey(tenantKey(1, apps: .only(["orders", "rides"]), label: nil)))
        try await apply(registry, .createKey(tenantKey(2, apps: .all)))
        try await apply(registry, .createKey(adminKey(3)))

        let snapshot = try await registry.snapshot()
        var expected = app
        expected.createdAt = t0
        expected.updatedAt = t0
        expected.credentials?.updatedAt = t0
        #expect(snapshot.apps["orders"] == expected)
        #expect(snapshot.apps["rides"]?.credentials?.keySource == .file(path: "/keys/rides.p8"))
        #expect(snapshot.apps["rides"]?.credentials?.trustPEM == nil)
        #expect(snapshot.keys[registryKeyID(1)] == tenantKey(1, apps: .only(["orders", "rides"]), label: nil))
        #expect(snapshot.keys[registryKeyID(2)] == tenantKey(2, apps: .all))
        #expect(snapshot.keys[registryKeyID(3)] == adminKey(3))
        #expect(snapshot.keys.values.allSatisfy { $0.source == .admin && $0.lastUsedAt == nil && $0.revokedAt == nil })
        #expect(snapshot.version == 6)
        try await registry.close()
    }

    static func invalidValues(_ make: RegistryFactory) async throws {
        let registry = try await make()
        var badCapacity = registeredApp("orders")
        badCapacity.queueCapacity = 0
        var badKey = tenantKey(1)
        badKey.secretSHA256 = String(repeating: "A", count: 64)
        let changes: [RegistryChange] = [
            .createApp(registeredApp("has space")),
            .createApp(badCapacity),
            .createKey(badKey),
            .createKey(tenantKey(2, apps: .only([]))),
            .seed(apps: [registeredApp("orders"), registeredApp("orders")], keys: []),
        ]
        for change in changes {
            guard case .invalid? = await refusal(registry, change) else {
                Issue.record("\(change) was not refused as invalid")
                continue
            }
        }
        try await apply(registry, .createApp(registeredApp("orders")))
        let bad = RegisteredCredentials(teamID: "T", keyID: "K", endpoint: "nowhere", keySource: .environment(name: "KEY"))
        guard case .invalid(field: "endpoint", _)? = await refusal(registry, .putCredentials(appID: "orders", bad)) else {
            Issue.record("an endpoint that is neither apple nor host:port was accepted")
            return
        }
        #expect(try await registry.version() == 1)
        try await registry.close()
    }
}
