import Testing

@testable import LiveRelayStorePostgres

/// The batch reads' plans on tables that have never been analysed: a new
/// deployment, a restored database, or any table before autovacuum's first pass.
/// Each key must be an index lookup whatever the (missing) statistics say; a
/// sequential scan or a hash join of the whole table per batch is what made
/// RegisterToken fall to a tenth of its rate on a fresh database.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)), .timeLimit(.minutes(3)))
struct PostgresPlanTests {
    static let keys = 1_000
    static let rows = 20_000

    /// `{"v1","v2",...}` as an array literal of `count` values made by `value`.
    static func array(_ count: Int, _ value: (Int) -> String) -> String {
        "'{" + (0..<count).map { "\"\(value($0))\"" }.joined(separator: ",") + "}'"
    }

    static func explain(_ sql: String, types: [String], arguments: [String], schema: String) async throws -> String {
        let rows = try await PostgresTestDatabase.sql(
            [
                "PREPARE read(\(types.joined(separator: ", "))) AS \(sql)",
                "EXPLAIN EXECUTE read(\(arguments.joined(separator: ", ")))",
            ], schema: schema)
        return rows.compactMap { $0.first ?? nil }.joined(separator: "\n")
    }

    @Test func everyBatchReadIsAnIndexLookupPerKeyWithoutStatistics() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            // The store's migrations make the tables and indexes.
            try await PostgresTestDatabase.store(schema: schema).close()
            try await Self.checkPlans(schema: schema)
        }
    }

    static func checkPlans(schema: String) async throws {
        try await PostgresTestDatabase.sql(
            [
                "ALTER TABLE tokens SET (autovacuum_enabled = false)",
                "ALTER TABLE activities SET (autovacuum_enabled = false)",
                "ALTER TABLE idempotency_records SET (autovacuum_enabled = false)",
                """
                INSERT INTO tokens (app_id, hex, kind, environment, attributes_type, activity_id, device_id, created_at, updated_at)
                SELECT 'app', md5(i::text) || md5((i + 1)::text), i % 2, 0, CASE WHEN i % 2 = 1 THEN 'Type' END,
                       CASE WHEN i % 2 = 0 THEN 'act-' || (i % 500) END, 'dev-' || i, 0, 0
                FROM generate_series(1, \(Self.rows)) i
                """,
            ], schema: schema)
        let statistics = try await PostgresTestDatabase.sql(
            ["SELECT count(*)::text FROM pg_stats WHERE schemaname = '\(schema)' AND tablename = 'tokens'"], schema: schema)
        #expect(statistics.first?.first == "0", "the table must not have been analysed for this test to mean anything")

        let apps = array(keys) { _ in "app" }
        let values = array(keys) { "v\($0)" }
        let plans = [
            (
                "tokens", PostgresTables.tokensSQL, Array(repeating: "text[]", count: 15),
                [apps, values, apps, values, values, apps, values, values, apps, values, apps, values, apps, values, values]
            ),
            ("update targets", PostgresTables.updateTargetsSQL, ["text[]", "text[]"], [apps, values]),
            ("push-to-start targets", PostgresTables.pushToStartTargetsSQL, ["text[]", "text[]"], [apps, values]),
            ("activities", PostgresTables.activitiesSQL, ["text[]", "text[]"], [apps, values]),
            ("records", PostgresTables.recordsSQL, ["text[]", "text[]", "text[]"], [apps, values, values]),
        ]
        for (name, sql, types, arguments) in plans {
            let plan = try await explain(sql, types: types, arguments: arguments, schema: schema)
            #expect(!plan.contains("Seq Scan"), "\(name): \(plan)")
            #expect(!plan.contains("Hash Join") && !plan.contains("Materialize"), "\(name): \(plan)")
            #expect(plan.contains("Index"), "\(name): \(plan)")
        }
    }
}
