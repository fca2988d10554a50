import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

@testable import LiveRelayStorePostgres

/// The registry behaviours against PostgreSQL, each in a fresh schema, and
/// what only several nodes on one database can show: changes reaching the
/// other nodes through NOTIFY, and concurrent changes serialized.
///
/// The bound for a notification is 5 s, with the safety-net poll set to an
/// hour: within the bound only a notification (or the listener's catch-up
/// read after it re-LISTENs) can deliver the version. The bound is generous
/// on purpose: what is tested is that it arrives, not how fast.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)), .timeLimit(.minutes(3)))
struct PostgresTenantRegistryTests {
    static func registry(schema: String, node: String = "a") async throws -> PostgresTenantRegistry {
        var configuration = try PostgresTestDatabase.configuration(schema: schema)
        configuration.applicationName = "lrtest-\(node)-\(schema)"
        return try await PostgresTenantRegistry(configuration: configuration)
    }

    @Test(arguments: RegistryBehaviourSuite.all)
    func behaviour(_ behaviour: RegistryBehaviour) async throws {
        try await PostgresTestDatabase.withSchema { schema in
            try await behaviour.run { try await Self.registry(schema: schema) }
        }
    }

    @Test func aNewClientSeesEverything() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let registry = try await Self.registry(schema: schema)
            #expect(registry.openedSchemaVersion == 0)
            try await RegistryReopening.fill(registry)
            let before = try await registry.snapshot()
            let audit = try await registry.audit(after: 0, limit: 100)
            try await registry.close()

            let reopened = try await Self.registry(schema: schema)
            #expect(reopened.openedSchemaVersion == PostgresTenantRegistry.schemaVersion)
            #expect(try await reopened.snapshot() == before)
            #expect(try await reopened.audit(after: 0, limit: 100) == audit)
            try await reopened.close()
        }
    }

    @Test func theRegistryAndTheActivityStoreMigrateOneSchemaApart() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            // The registry first, then the store, then both again at once: each keeps its own version table.
            try await Self.registry(schema: schema).close()
            try await PostgresTestDatabase.store(schema: schema).close()
            async let registry = Self.registry(schema: schema, node: "b")
            async let store = PostgresTestDatabase.store(schema: schema)
            try await registry.close()
            try await store.close()
            let activity = try await PostgresTestDatabase.sql(
                ["SELECT version::text FROM \"\(schema)\".schema_version ORDER BY version"], schema: schema)
            #expect(activity == (1...PostgresActivityStore.schemaVersion).map { [String($0)] })
            let own = try await PostgresTestDatabase.sql(
                ["SELECT version::text FROM \"\(schema)\".registry_schema_version ORDER BY version"], schema: schema)
            #expect(own == (1...PostgresTenantRegistry.schemaVersion).map { [String($0)] })
        }
    }

    @Test func aChangeOnOneNodeReachesTheOtherThroughNotify() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let a = try await Self.registry(schema: schema, node: "a")
            let b = try await Self.registry(schema: schema, node: "b")
            let seenByB = VersionRecorder(b.changes(pollEvery: .seconds(3600)))
            try await seenByB.wait(for: 0)
            for n in 1...3 {
                let applied = try await a.apply(.createApp(registeredApp("app\(n)")), actor: "config", now: t0)
                try await seenByB.wait(for: applied.version)
            }
            #expect(await seenByB.versions == [0, 1, 2, 3])
            #expect(Set(try await b.snapshot().apps.keys) == ["app1", "app2", "app3"])
            try await a.close()
            try await b.close()
        }
    }

    @Test func concurrentChangesFromTwoNodesAreNeverLost() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let a = try await Self.registry(schema: schema, node: "a")
            let b = try await Self.registry(schema: schema, node: "b")
            let seenByA = VersionRecorder(a.changes(pollEvery: .seconds(3600)))
            let applied = try await withThrowingTaskGroup(of: RegistryApplied.self) { group in
                for n in 0..<40 {
                    let node = n % 2 == 0 ? a : b
                    group.addTask { try await node.apply(.createKey(tenantKey(n, apps: .all)), actor: "config", now: t0) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(applied.map(\.version).sorted() == Array(1...40), "every change its own version")
            #expect(applied.allSatisfy { $0.entry?.sequence == $0.version })
            let snapshot = try await b.snapshot()
            #expect(snapshot.version == 40)
            #expect(Set(snapshot.keys.keys) == Set((0..<40).map(registryKeyID)))
            #expect(try await a.audit(after: 0, limit: 100).map(\.sequence) == Array(1...40))
            try await seenByA.wait(for: 40)
            try await a.close()
            try await b.close()
        }
    }

    @Test func theListenerListensAgainAfterItsConnectionIsKilled() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let a = try await Self.registry(schema: schema, node: "a")
            let b = try await Self.registry(schema: schema, node: "b")
            let seenByA = VersionRecorder(a.changes(pollEvery: .seconds(3600)))
            try await b.apply(.createApp(registeredApp("before")), actor: "config", now: t0)
            try await seenByA.wait(for: 1)
            let killed = try await PostgresTestDatabase.sql(
                [
                    """
                    SELECT pg_terminate_backend(pid)::text FROM pg_stat_activity
                    WHERE application_name = 'lrtest-a-\(schema)-registry'
                    """
                ], schema: schema)
            #expect(!killed.isEmpty, "node a's connections were found")
            try await b.apply(.createApp(registeredApp("during")), actor: "config", now: t0)
            try await seenByA.wait(for: 2)
            // Listening again, not only caught up: the next change arrives too.
            try await b.apply(.createApp(registeredApp("after")), actor: "config", now: t0)
            try await seenByA.wait(for: 3)
            // And node a still works on its new connections.
            #expect(try await a.snapshot().apps.count == 3)
            try await a.close()
            try await b.close()
        }
    }

    @Test func notificationsOfAnotherSchemaAreIgnored() async throws {
        try await PostgresTestDatabase.withSchema { other in
            try await PostgresTestDatabase.withSchema { schema in
                let elsewhere = try await Self.registry(schema: other, node: "x")
                let writer = try await Self.registry(schema: schema, node: "a")
                let listener = try await Self.registry(schema: schema, node: "b")
                let seen = VersionRecorder(listener.changes(pollEvery: .seconds(3600)))
                try await seen.wait(for: 0)
                for n in 1...3 { try await elsewhere.apply(.createApp(registeredApp("x\(n)")), actor: "config", now: t0) }
                // Delivered after the other schema's three, on the same connection.
                try await writer.apply(.createApp(registeredApp("mine")), actor: "config", now: t0)
                try await seen.wait(for: 1)
                #expect(await seen.versions == [0, 1])
                try await elsewhere.close()
                try await writer.close()
                try await listener.close()
            }
        }
    }

    /// Two nodes claiming the same apps' webhooks at once, each through its
    /// own registry: exactly one wins each app, first claims (both inserting)
    /// and takeovers of a lapsed lease alike, and the loser's saves are refused.
    @Test func twoNodesRacingForALeaseNeverBothWin() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let a = try await Self.registry(schema: schema, node: "a")
            let b = try await Self.registry(schema: schema, node: "b")
            let apps = (0..<12).map { "app\($0)" }
            for app in apps { try await RegistryBehaviourSuite.appWithWebhook(a, app) }
            let lease = UnixTime.Duration.seconds(30)

            func race(at now: UnixTime) async throws -> [String: [String]] {
                try await withThrowingTaskGroup(of: (String, String?).self) { group in
                    for app in apps {
                        for (registry, node) in [(a, "node-a"), (b, "node-b")] {
                            group.addTask {
                                let won = try await registry.claimWebhook(appID: app, node: node, now: now, lease: lease)
                                return (app, won == nil ? nil : node)
                            }
                        }
                    }
                    var winners: [String: [String]] = [:]
                    for try await (app, node) in group { winners[app, default: []] += node.map { [$0] } ?? [] }
                    return winners
                }
            }

            let first = try await race(at: t0)
            for app in apps { #expect(first[app]?.count == 1, "\(app): \(first[app] ?? [])") }
            // After the leases lapse, both race to take over again.
            let second = try await race(at: t0 + .seconds(60))
            for app in apps { #expect(second[app]?.count == 1, "\(app): \(second[app] ?? [])") }

            for app in apps {
                let winner = try #require(second[app]?.first)
                let (holder, loser) = winner == "node-a" ? ((a, "node-a"), (b, "node-b")) : ((b, "node-b"), (a, "node-a"))
                var progress = WebhookProgress(appID: app, webhookCreatedAt: t0, deliveredCursor: 5)
                #expect(try await loser.0.saveWebhook(progress, node: loser.1, now: t0 + .seconds(61), lease: lease) == false)
                progress.deliveredCursor = 6
                #expect(try await holder.0.saveWebhook(progress, node: holder.1, now: t0 + .seconds(61), lease: lease))
                #expect(try await loser.0.webhookProgress(appID: app) == progress, "both nodes read the one row")
            }
            try await a.close()
            try await b.close()
        }
    }

    @Test func payloadsNameTheirSchema() {
        #expect(PostgresTenantRegistry.payload(schema: "public", version: 42) == "public:42")
        #expect(PostgresTenantRegistry.version(fromPayload: "public:42", schema: "public") == 42)
        #expect(PostgresTenantRegistry.version(fromPayload: "lrtest_x:42", schema: "public") == nil)
        #expect(PostgresTenantRegistry.version(fromPayload: "42", schema: "public") == nil)
        #expect(PostgresTenantRegistry.version(fromPayload: "public:", schema: "public") == nil)
    }
}
