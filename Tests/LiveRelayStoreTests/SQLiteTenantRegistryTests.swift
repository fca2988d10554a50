import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayTestSupport
import Testing

@testable import LiveRelayStore
@testable import LiveRelayStoreSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite struct SQLiteTenantRegistryTests {
    @Test(arguments: RegistryBehaviourSuite.all)
    func behaviour(_ behaviour: RegistryBehaviour) async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        try await behaviour.run { try SQLiteTenantRegistry(dataDirectory: directory) }
    }

    @Test func theFileAndItsWALAreOwnerOnlyFromCreation() async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        // A permissive umask, as a service manager might leave: the files must not depend on it.
        let previous = umask(0o022)
        defer { umask(previous) }
        let registry = try SQLiteTenantRegistry(dataDirectory: directory)
        #expect(registry.path == directory + "/registry.sqlite3")
        var app = registeredApp("orders")
        app.credentials = storedCredentials()
        try await registry.apply(.createApp(app), actor: "config", now: t0)
        for file in [registry.path, registry.path + "-wal", registry.path + "-shm"] {
            var info = stat()
            #expect(stat(file, &info) == 0, "\(file) exists while the registry is open")
            #expect(info.st_mode & 0o777 == 0o600, "\(file) is \(String(info.st_mode & 0o777, radix: 8))")
        }
        try await registry.close()
    }

    @Test func aFileOthersCouldReadIsMadeOwnerOnlyWhenOpened() async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        let path = directory + "/" + SQLiteTenantRegistry.fileName
        leaveReadableByOthers(path)
        let logs = LogRecorder()
        let registry = try SQLiteTenantRegistry(dataDirectory: directory, logger: logs.logger())
        try await registry.apply(.createApp(registeredApp("orders")), actor: "config", now: t0)
        expectMadeOwnerOnly(path, logs: logs)
        try await registry.close()
    }

    @Test func reopeningTheFileKeepsEverything() async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        let registry = try SQLiteTenantRegistry(dataDirectory: directory)
        #expect(registry.openedSchemaVersion == 0)
        try await RegistryReopening.fill(registry)
        let before = try await registry.snapshot()
        let audit = try await registry.audit(after: 0, limit: 100)
        try await registry.close()

        let reopened = try SQLiteTenantRegistry(dataDirectory: directory)
        #expect(reopened.openedSchemaVersion == SQLiteTenantRegistry.schemaVersion)
        #expect(try await reopened.snapshot() == before)
        #expect(try await reopened.audit(after: 0, limit: 100) == audit)
        // The version goes on from where it was.
        let next = try await reopened.apply(.createApp(registeredApp("later")), actor: "config", now: t0)
        #expect(next.version == before.version + 1)
        try await reopened.close()
    }

    @Test func theRegistryKeepsItsOwnSchemaVersion() async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        let registry = try SQLiteTenantRegistry(dataDirectory: directory)
        try await registry.close()
        let db = try SQLiteConnection(path: registry.path, create: false)
        defer { db.close() }
        let tables = try db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") { $0.string(0) }
        #expect(tables == ["api_keys", "apps", "registry_audit", "registry_schema_version", "registry_version", "webhook_progress"])
        #expect(try db.pragma("PRAGMA journal_mode") == "wal")
    }

    /// A file the first schema wrote (before apps had a priority budget) opens, keeps its
    /// apps with the default budget, and then stores one.
    @Test func aFileOfTheFirstSchemaIsMigratedAndKeepsItsApps() async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        let path = directory + "/registry.sqlite3"
        do {
            let db = try SQLiteConnection(path: path, create: true)
            _ = try SQLiteSchema.migrate(
                db, versionTable: SQLiteRegistrySchema.versionTable, migrations: Array(SQLiteRegistrySchema.migrations.prefix(1)),
                now: 0)
            try db.execute(
                """
                INSERT INTO apps (id, bundle_id, enabled, quota_burst, created_at, updated_at, source)
                VALUES ('orders', 'com.example.orders', 1, 30, 0, 0, 'admin')
                """)
            db.close()
        }
        let registry = try SQLiteTenantRegistry(path: path)
        #expect(registry.openedSchemaVersion == 1)
        let app = try #require(try await registry.snapshot().apps["orders"])
        #expect(app.quotas == RegisteredQuotas(burst: 30))
        let patch = RegisteredAppPatch(quotas: RegisteredQuotas(burst: 30, priorityBudgetPerHour: 12))
        try await registry.apply(.updateApp(id: "orders", patch), actor: "admin-key", now: t0)
        #expect(try await registry.snapshot().apps["orders"]?.quotas.priorityBudgetPerHour == 12)
        try await registry.close()
    }

    /// The webhook's progress and its lease are on disk too: a restarted node
    /// goes on from the saved cursor, and a lease it held still holds.
    @Test func webhookProgressSurvivesReopening() async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        let registry = try SQLiteTenantRegistry(dataDirectory: directory)
        try await RegistryBehaviourSuite.appWithWebhook(registry)
        var progress = try #require(try await registry.claimWebhook(appID: "orders", node: "a", now: t0, lease: .seconds(30)))
        progress.deliveredCursor = 1234
        progress.lastSuccessAt = t0 + .seconds(1)
        progress.lastError = "HTTP 500"
        progress.failingSince = t0 + .seconds(2)
        progress.attempts = 4
        progress.failing = true
        #expect(try await registry.saveWebhook(progress, node: "a", now: t0 + .seconds(2), lease: .seconds(30)))
        let webhook = try await registry.snapshot().apps["orders"]?.webhook
        try await registry.close()

        let reopened = try SQLiteTenantRegistry(dataDirectory: directory)
        #expect(try await reopened.snapshot().apps["orders"]?.webhook == webhook)
        #expect(try await reopened.webhookProgress(appID: "orders") == progress)
        #expect(try await reopened.claimWebhook(appID: "orders", node: "b", now: t0 + .seconds(31), lease: .seconds(30)) == nil)
        #expect(try await reopened.claimWebhook(appID: "orders", node: "a", now: t0 + .seconds(31), lease: .seconds(30)) == progress)
        try await reopened.close()
    }

    /// Webhook columns that do not make a webhook (some NULL, kinds that do not
    /// parse) make the row unreadable, and the error carries no secret.
    @Test(arguments: [
        "UPDATE apps SET webhook_secret = NULL",
        "UPDATE apps SET webhook_kinds = NULL",
        "UPDATE apps SET webhook_updated_at = NULL",
        "UPDATE apps SET webhook_start_cursor = NULL",
        "UPDATE apps SET webhook_start_cursor = -1",
        "UPDATE apps SET webhook_kinds = 'not json'",
        "UPDATE apps SET webhook_kinds = '[\"1\",\"999\"]'",
        "UPDATE apps SET webhook_kinds = '[1]'",
        "UPDATE apps SET webhook_url = NULL, webhook_kinds = NULL, webhook_secret = NULL, webhook_created_at = NULL",
        """
        UPDATE apps SET webhook_url = NULL, webhook_kinds = NULL, webhook_secret = NULL, webhook_created_at = NULL,
            webhook_updated_at = NULL
        """,
    ])
    func partialWebhookColumnsAreACorruptRow(_ damage: String) async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        let registry = try SQLiteTenantRegistry(dataDirectory: directory)
        try await RegistryBehaviourSuite.appWithWebhook(registry)
        try await registry.close()
        do {
            let db = try SQLiteConnection(path: registry.path, create: false)
            try db.execute(damage)
            db.close()
        }
        let reopened = try SQLiteTenantRegistry(dataDirectory: directory)
        do {
            _ = try await reopened.snapshot()
            Issue.record("a row with damaged webhook columns was read")
        } catch {
            #expect(error is SQLiteError)
            #expect(!String(describing: error).contains(webhookSecretHex))
            #expect(!String(reflecting: error).contains(webhookSecretHex))
        }
        try await reopened.close()
    }

    @Test func aFileWithANewerRegistrySchemaIsRefused() async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        let path = directory + "/registry.sqlite3"
        try await SQLiteTenantRegistry(path: path).close()
        do {
            let db = try SQLiteConnection(path: path, create: false)
            try db.execute(
                "INSERT INTO registry_schema_version (version, applied_at) VALUES (\(SQLiteTenantRegistry.schemaVersion + 1), 0)")
            db.close()
        }
        #expect(throws: SQLiteError.self) { try SQLiteTenantRegistry(path: path) }
    }

    /// Another process (a tool) writing the file is seen through the poll.
    @Test func aSecondInstanceOnTheFileIsSeenThroughThePoll() async throws {
        let directory = try makeTemporaryDirectory("liverelay-registry-")
        defer { removeDirectory(directory) }
        let node = try SQLiteTenantRegistry(dataDirectory: directory)
        let tool = try SQLiteTenantRegistry(dataDirectory: directory)
        let recorder = VersionRecorder(node.changes(pollEvery: .milliseconds(20)))
        try await recorder.wait(for: 0)
        try await tool.apply(.createApp(registeredApp("orders")), actor: "config", now: t0)
        try await recorder.wait(for: 1)
        #expect(try await node.snapshot().apps["orders"] != nil)
        try await tool.close()
        try await node.close()
    }
}

/// A registry with something of every kind in it, for the reopening tests.
enum RegistryReopening {
    static func fill(_ registry: any TenantRegistry) async throws {
        var app = registeredApp("orders")
        app.quotas = RegisteredQuotas(callsPerSecond: 0.5, burst: 2, pushesPerHour: 0)
        app.weight = 2
        try await registry.apply(.createApp(app), actor: "config", now: t0)
        try await registry.apply(.putCredentials(appID: "orders", storedCredentials()), actor: "config", now: t0 + .seconds(1))
        try await registry.apply(
            .seed(apps: RegistryBehaviourSuite.configApps(), keys: RegistryBehaviourSuite.configKeys()), actor: "config",
            now: t0 + .seconds(2))
        try await registry.apply(.createKey(tenantKey(8, apps: .only(["orders", "rides"]))), actor: "config", now: t0 + .seconds(3))
        try await registry.apply(.revokeKey(keyID: registryKeyID(1)), actor: "config", now: t0 + .seconds(4))
        try await registry.apply(.disableApp(id: "rides"), actor: "config", now: t0 + .seconds(5))
        try await registry.touch([registryKeyID(2): t0 + .seconds(6)])
        try await registry.apply(
            .putWebhook(
                appID: "orders", url: webhookURL("orders"), eventKinds: [.callSettled, .activityEnded], newSecret: webhookSecret,
                rotate: false, startCursor: 1_234_567_890_123),
            actor: "config", now: t0 + .seconds(7))
    }
}
