import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import Testing

@testable import LiveRelayStore
@testable import LiveRelayStoreSQLite

/// Migration 4 (the fan-out's covering index) on a file written by the previous schema.
@Suite struct SQLiteSchemaTests {
    /// A file at schema version 3, as the previous build left it, with update tokens in it.
    static func versionThreeFile(_ path: String) throws {
        let db = try SQLiteConnection(path: path, create: true)
        defer { db.close() }
        _ = try db.pragma("PRAGMA journal_mode = WAL")
        let found = try SQLiteSchema.migrate(
            db, versionTable: "schema_version", migrations: Array(SQLiteSchema.migrations.prefix(3)), now: 0)
        #expect(found == 0)
        try db.execute(
            """
            INSERT INTO activities VALUES ('\(appID)', 'order-1', NULL, 'active', 0, NULL, \(t0.milliseconds),
                \((t0 + ActivityLifetime.maxActive).milliseconds), NULL, NULL, \((t0 + ActivityLifetime.maxActive).milliseconds));
            INSERT INTO tokens VALUES ('\(appID)', '\(hex(1))', 0, 0, NULL, 'order-1', NULL, 'a', 0, 0, NULL);
            INSERT INTO tokens VALUES ('\(appID)', '\(hex(2))', 0, 1, NULL, 'order-1', NULL, 'b', 0, 0, \((t0 + .seconds(60)).milliseconds));
            INSERT INTO tokens VALUES ('\(appID)', '\(hex(3))', 0, 0, NULL, 'order-1', NULL, NULL, 0, 0, NULL);
            """)
    }

    @Test func aVersionThreeFileGetsTheCoveringIndexAndKeepsItsTokens() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        try Self.versionThreeFile(path)

        let store = try SQLiteActivityStore(path: path)
        #expect(store.openedSchemaVersion == 3)
        let loop = StoreBehaviourSuite.group.any()
        #expect(Set(try await store.updateTokens(of: order1, on: loop).get().map(\.hex)) == [hex(1), hex(2), hex(3)])
        let outcome = try await StoreBehaviourSuite.apply(store, ChangeActivity(update(), app: app), now: t0 + .seconds(61))
        #expect(Set(outcome.accepted?.batch.targets.map(\.token) ?? []) == [hex(1), hex(3)])
        // The slot is still unique: the old unique index's guarantee, now kept by the triggers.
        #expect(
            try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(4), device: "a"))).result
                == .rotated(replacedToken: hex(1)))
        try await store.close()

        let db = try SQLiteConnection(path: path, create: false)
        defer { db.close() }
        let indexes = try db.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tokens'") { $0.string(0) }
        #expect(indexes.contains("tokens_update_targets"))
        #expect(!indexes.contains("tokens_update_slot"))
        #expect(try SQLiteSchema.version(db) == SQLiteSchema.current)
    }

    @Test func aSecondUpdateTokenInATakenSlotIsAConstraintError() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteActivityStore(path: directory + "/store.sqlite3")
        try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(1), device: "a")))
        try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(2), device: "b")))
        func update(_ hex: String, device: String?) -> Token {
            Token(
                kind: .update, hex: hex, environment: .sandbox, appID: appID, activityID: "order-1", deviceID: device,
                createdAt: t0, updatedAt: t0)
        }
        // Buggy plans: a new token into a taken slot (INSERT), an existing one moved into it (the upsert's UPDATE).
        await #expect(throws: SQLiteError.self) {
            try await StoreBehaviourSuite.apply(store, Writes([.putToken(update(hex(3), device: "a"))]))
        }
        await #expect(throws: SQLiteError.self) {
            try await StoreBehaviourSuite.apply(store, Writes([.putToken(update(hex(2), device: "a"))]))
        }
        // Without a device id there is no slot; the same token rewritten in its own slot is fine.
        try await StoreBehaviourSuite.apply(
            store, Writes([.putToken(update(hex(5), device: nil)), .putToken(update(hex(6), device: nil))]))
        try await StoreBehaviourSuite.apply(store, Writes([.putToken(update(hex(1), device: "a"))]))
        let loop = StoreBehaviourSuite.group.any()
        #expect(Set(try await store.updateTokens(of: order1, on: loop).get().map(\.hex)) == [hex(1), hex(2), hex(5), hex(6)])
        try await store.close()
    }
}
