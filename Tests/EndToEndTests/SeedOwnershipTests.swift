import Foundation
import LiveRelayTestSupport
import Testing

/// An admin change to an app that the development setup also seeds survives a
/// restart, on SQLite and on PostgreSQL: dev.app's calls_per_second set to 1
/// and its priority-10 budget to 3 through the admin API are still so after
/// `serve` starts again with the same seed (and in force: GetAppStats), and the
/// app says the admin owns it.
@Suite(.serialized)
struct SeedOwnershipTests {
    enum Store: String, CaseIterable, Sendable { case sqlite, postgres }

    @Test(arguments: Store.allCases)
    func anAdminChangeToASeededAppSurvivesARestart(store: Store) throws {
        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-seed-\(store.rawValue)")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        var storeArguments: [String] = []
        if store == .postgres {
            guard let base = ProcessInfo.processInfo.environment["LIVERELAY_POSTGRES_URL"], !base.isEmpty else {
                Issue.record("LIVERELAY_POSTGRES_URL is not set (scripts/test.sh starts a throwaway PostgreSQL)")
                return
            }
            let schema = "seed_owner_" + UUID().uuidString.prefix(8).lowercased()
            storeArguments = ["--store", "postgres", "--postgres-url", base + (base.contains("?") ? "&" : "?") + "schema=\(schema)"]
        }

        var server = try ServerProcess.start(binary: binary, dataDir: dataDir, extraArguments: storeArguments)
        defer { server.stop() }
        var port = try #require(server.waitUntilListening(timeout: 60)?.port, "\(server.transcript())")
        let bootstrap = try E2E.run(
            binary.path, ["admin", "bootstrap", "--data-dir", dataDir.path] + storeArguments, environment: [:], timeout: 60)
        #expect(bootstrap.status == 0, "\(bootstrap.output)")
        let adminKey = try #require(
            bootstrap.output.split(separator: "\n").first { $0.hasPrefix("export LIVERELAY_ADMIN_KEY=") }
                .map { String($0.dropFirst("export LIVERELAY_ADMIN_KEY=".count)) })
        func run(_ arguments: [String]) throws -> E2E.RunResult {
            try E2E.run(
                binary.path, arguments + ["--port", String(port), "--ca-file", dataDir.path + "/cert.pem"],
                environment: ["LIVERELAY_ADMIN_KEY": adminKey], timeout: 60)
        }
        func devApp() throws -> [String: Any]? {
            let got = try run(["admin", "apps", "get", "--app", "dev.app"])
            guard got.status == 0 else { return nil }
            return ProductionConfigTests.json(got.output)["app"] as? [String: Any]
        }
        func callsPerSecond(_ app: [String: Any]?) -> Double? {
            ((app?["quotas"] as? [String: Any])?["calls_per_second"] as? NSNumber)?.doubleValue
        }
        func priorityBudget(_ object: [String: Any]?) -> Int? {
            (object?["quotas"] as? [String: Any])?["priority_budget_per_hour"] as? Int
        }

        let ready = try RegistryReloadTests.within(RegistryReloadTests.bound) { try devApp() != nil }
        #expect(ready != nil, "the admin key was not accepted:\n\(server.transcript())")
        #expect(try devApp()?["owner"] as? String == "seed")
        #expect(priorityBudget(try devApp()) == nil, "the development setup names no budget")
        let updated = try run(
            ["admin", "apps", "update", "--app", "dev.app", "--calls-per-second", "1", "--priority-budget-per-hour", "3"])
        #expect(updated.status == 0, "\(updated.output)")
        #expect(callsPerSecond(try devApp()) == 1)
        #expect(priorityBudget(try devApp()) == 3)

        // The same development setup starts again: it seeds dev.app as before.
        server.stop()
        server = try ServerProcess.start(binary: binary, dataDir: dataDir, extraArguments: storeArguments)
        port = try #require(server.waitUntilListening(timeout: 60)?.port, "\(server.transcript())")
        let again = try #require(try devApp(), "\(server.transcript())")
        #expect(callsPerSecond(again) == 1, "the seed undid the admin's quota: \(again)")
        #expect(priorityBudget(again) == 3, "the seed undid the admin's priority budget: \(again)")
        #expect(again["owner"] as? String == "admin")
        let stats = ProductionConfigTests.json(try run(["admin", "stats", "--app", "dev.app"]).output)
        #expect(priorityBudget(stats) == 3, "the budget in force: \(stats)")
    }
}
