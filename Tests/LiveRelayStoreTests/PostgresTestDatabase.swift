import LiveRelayAPNs
import LiveRelayDomain
import Logging
import PostgresNIO
import Testing

@testable import LiveRelayStorePostgres

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The PostgreSQL server of the tests: `LIVERELAY_POSTGRES_URL` (scripts/test.sh
/// starts a throwaway one with scripts/postgres.sh and exports it).
///
/// Unset, the PostgreSQL suites are skipped with a visible reason on a
/// developer machine; with `CI` set they run and fail, saying why, because a
/// CI run that silently skipped them would claim coverage it does not have.
/// Each test works in its own fresh schema of that database, dropped at the end.
enum PostgresTestDatabase {
    static let urlVariable = "LIVERELAY_POSTGRES_URL"
    static let skipReason =
        "LIVERELAY_POSTGRES_URL is not set: start a server with `eval \"$(bash scripts/postgres.sh start)\"` (bash scripts/test.sh does)"

    static var url: String? {
        guard let value = getenv(urlVariable), value.pointee != 0 else { return nil }
        return String(cString: value)
    }

    static var isCI: Bool { getenv("CI") != nil }

    /// Whether the suites run: with a server, or in CI (where they then fail).
    static var enabled: Bool { url != nil || isCI }

    struct Missing: Error, CustomStringConvertible {
        var description: String {
            "CI is set but LIVERELAY_POSTGRES_URL is not: the PostgreSQL store tests need a server (scripts/test.sh starts one with scripts/postgres.sh)"
        }
    }

    /// A unique schema name, so that parallel tests never see each other's rows.
    static func freshSchema() -> String {
        "lrtest_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }

    static func configuration(schema: String = freshSchema()) throws -> PostgresStoreConfiguration {
        guard let url else { throw Missing() }
        var configuration = try PostgresStoreConfiguration(url: url)
        configuration.schema = schema
        configuration.applicationName = "liverelay-test-\(schema)"
        configuration.maxConnections = 4
        return configuration
    }

    static func store(schema: String, lanes: Int = 2) async throws -> PostgresActivityStore {
        var configuration = try configuration(schema: schema)
        configuration.lanes = lanes
        configuration.maxConnections = lanes + 2
        return try await PostgresActivityStore(configuration: configuration)
    }

    /// Runs statements on a connection of its own and returns the rows, every column as text.
    @discardableResult
    static func sql(_ statements: [String], schema: String) async throws -> [[String?]] {
        var configuration = try configuration(schema: schema)
        configuration.applicationName = "liverelay-test-admin"
        let client = PostgresClient(configuration: configuration.client)
        let run = Task { await client.run() }
        defer { run.cancel() }
        return try await client.withConnection { connection in
            var rows: [[String?]] = []
            // An admin statement waiting on a lock (DROP SCHEMA behind a session that a
            // killed-connection test left behind) fails after a while instead of hanging the run.
            for statement in ["SET lock_timeout = '20s'", "SET statement_timeout = '60s'"] + statements {
                for try await row in try await connection.query(PostgresQuery(unsafeSQL: statement), logger: Logger(label: "test")) {
                    rows.append(try row.map { cell in try cell.decode(String?.self) })
                }
            }
            return rows
        }
    }

    /// Runs `body` on one connection of its own, kept for the whole body: for a
    /// test that holds a lock across several statements while the store works.
    static func withSession<T: Sendable>(schema: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        var configuration = try configuration(schema: schema)
        configuration.applicationName = "liverelay-test-admin"
        let client = PostgresClient(configuration: configuration.client)
        let run = Task { await client.run() }
        defer { run.cancel() }
        return try await client.withConnection { try await body($0) }
    }

    static func dropSchema(_ schema: String) async {
        _ = try? await sql(["DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"], schema: schema)
    }

    /// A fresh schema for `body`, dropped afterwards whatever happens.
    static func withSchema(_ body: (String) async throws -> Void) async throws {
        let schema = freshSchema()
        do {
            try await body(schema)
        } catch {
            await dropSchema(schema)
            throw error
        }
        await dropSchema(schema)
    }
}
