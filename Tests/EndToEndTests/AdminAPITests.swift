import Foundation
import LiveRelayDomain
import LiveRelayStore
import LiveRelayStoreSQLite
import LiveRelayTestSupport
import Testing

/// The admin API end to end, as a platform team would use it: `liverelay
/// admin bootstrap` on the server's data, then the CLI over TLS with the
/// admin key: an app created with its quotas and APNs key (a bad key refused
/// before anything is stored), a tenant key minted for it, its pushes
/// delivered, its quota enforced, its stats read, the app disabled and the
/// key revoked, each taking effect on the running server without a restart,
/// and the audit table holding every change and no secret.
@Suite(.serialized)
struct AdminAPITests {
    @Test func aPlatformTeamRunsATenantThroughTheAdminAPI() async throws {
        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-admin")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let server = try ServerProcess.start(binary: binary, dataDir: dataDir)
        defer { server.stop() }
        let port = try #require(server.waitUntilListening(timeout: 60)?.port, "\(server.transcript())")
        let devKey = try #require(server.apiKey())
        let (mock, mockPort) = try ServerProcess.mockAPNs(
            binary: binary, apps: ["com.example.cafe,LRDEVTEAM1,LRDEVKEY01,\(dataDir.path)/apns-dev-key.p8"],
            certificate: "\(dataDir.path)/cafe-mock.pem", record: "\(dataDir.path)/cafe.jsonl")
        defer { mock.stop() }

        let bootstrap = try E2E.run(binary.path, ["admin", "bootstrap", "--data-dir", dataDir.path], environment: [:], timeout: 60)
        #expect(bootstrap.status == 0, "\(bootstrap.output)")
        let adminKey = try #require(
            bootstrap.output.split(separator: "\n").first { $0.hasPrefix("export LIVERELAY_ADMIN_KEY=") }
                .map { String($0.dropFirst("export LIVERELAY_ADMIN_KEY=".count)) })
        let connection = ["--port", String(port), "--ca-file", dataDir.path + "/cert.pem"]
        func run(_ arguments: [String], key: String, variable: String = "LIVERELAY_ADMIN_KEY") throws -> E2E.RunResult {
            try E2E.run(binary.path, arguments + connection, environment: [variable: key], timeout: 60)
        }
        func json(_ result: E2E.RunResult) -> [String: Any] { ProductionConfigTests.json(result.output) }

        // The bootstrap key reaches the running server through the registry's poll.
        let adminReady = try RegistryReloadTests.within(RegistryReloadTests.bound) {
            try run(["admin", "apps", "list"], key: adminKey).status == 0
        }
        #expect(adminReady != nil, "the admin key was not accepted:\n\(server.transcript())")
        // Roles do not mix: a tenant key cannot administer, an admin key cannot push.
        #expect(try run(["admin", "apps", "list"], key: devKey).status == 1 + 7)
        #expect(try run(["ping"], key: adminKey, variable: "LIVERELAY_API_KEY").status == 1 + 7)

        let created = try run(
            ["admin", "apps", "create", "--app", "cafe", "--bundle-id", "com.example.cafe", "--max-tokens", "1"], key: adminKey)
        #expect(created.status == 0, "\(created.output)")
        let app = json(created)["app"] as? [String: Any]
        #expect(app?["app_id"] as? String == "cafe" && app?["enabled"] as? Bool == true, "\(created.output)")
        #expect((app?["quotas"] as? [String: Any])?["max_tokens"] as? Int == 1)
        #expect(try run(["admin", "apps", "create", "--app", "cafe", "--bundle-id", "x.y"], key: adminKey).status == 1 + 6)
        #expect(try run(["admin", "apps", "get", "--app", "nope"], key: adminKey).status == 1 + 5)

        // A key APNs would refuse (P-384, not P-256) is refused here, before anything is stored, naming the field.
        let p384 = try E2E.run(
            "/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", dataDir.path + "/p384.p8"],
            environment: [:], timeout: 60)
        #expect(p384.status == 0, "\(p384.output)")
        let badKey = try run(
            [
                "admin", "credentials", "put", "--app", "cafe", "--team-id", "LRDEVTEAM1", "--key-id", "LRDEVKEY01",
                "--key-file", dataDir.path + "/p384.p8",
            ], key: adminKey)
        #expect(badKey.status == 1 + 3 && badKey.output.contains("private_key_pem"), "\(badKey.output)")
        let put = try run(
            [
                "admin", "credentials", "put", "--app", "cafe", "--team-id", "LRDEVTEAM1", "--key-id", "LRDEVKEY01",
                "--key-file", dataDir.path + "/apns-dev-key.p8", "--endpoint", "127.0.0.1:\(mockPort)",
                "--trust-certificate", dataDir.path + "/cafe-mock.pem",
            ], key: adminKey)
        #expect(put.status == 0, "\(put.output)")
        let credentials = (json(put)["app"] as? [String: Any])?["credentials"] as? [String: Any]
        #expect(credentials?["key_source"] as? String == "registry" && !put.output.contains("PRIVATE KEY"), "\(put.output)")

        let minted = try run(
            [
                "admin", "keys", "create", "--app", "cafe", "--method", "RegisterToken", "--method", "StartActivity", "--method", "Ping",
                "--label", "cafe backend",
            ], key: adminKey)
        #expect(minted.status == 0, "\(minted.output)")
        let tenantKey = try #require(json(minted)["secret"] as? String, "\(minted.output)")
        let tenantKeyID = try #require((json(minted)["key"] as? [String: Any])?["key_id"] as? String)
        func tenant(_ arguments: [String]) throws -> E2E.RunResult { try run(arguments, key: tenantKey, variable: "LIVERELAY_API_KEY") }

        // The new tenant's calls, pushes and quota, on the running server.
        let token = String(repeating: "c1", count: 32)
        let registered = try RegistryReloadTests.within(RegistryReloadTests.bound) {
            try tenant([
                "register-token", "--app", "cafe", "--token", token, "--kind", "push-to-start", "--attributes-type", "CafeAttributes",
                "--device", "phone-1", "--environment", "production",
            ]).status == 0
        }
        #expect(registered != nil, "the new tenant's first call failed:\n\(server.transcript())")
        let started = try tenant([
            "start", "--app", "cafe", "--activity", "latte-1", "--attributes-type", "CafeAttributes", "--attributes", "{}",
            "--content-state", #"{"status":"brewing"}"#, "--token", token, "--wait-for-delivery",
        ])
        #expect((json(started)["summary"] as? [String: Any])?["delivered"] as? Int == 1, "\(started.output)")
        let overQuota = try tenant([
            "register-token", "--app", "cafe", "--token", String(repeating: "c2", count: 32), "--kind", "push-to-start",
            "--attributes-type", "CafeAttributes", "--device", "phone-2", "--environment", "production",
        ])
        #expect(overQuota.status == 1 + 8 && overQuota.output.contains("TokenQuotaExceeded"), "\(overQuota.output)")

        let stats = json(try run(["admin", "stats", "--app", "cafe"], key: adminKey))
        #expect(stats["tokens"] as? Int == 1, "\(stats)")
        let delivered = (stats["pushes"] as? [[String: Any]])?.first { $0["outcome"] as? String == "delivered" }
        #expect(delivered?["count"] as? Int == 1, "\(stats)")

        // Disabled: the app's calls are refused with their reason; enabled again, they pass.
        #expect(try run(["admin", "apps", "disable", "--app", "cafe"], key: adminKey).status == 0)
        let disabled = try RegistryReloadTests.within(RegistryReloadTests.bound) {
            let result = try tenant([
                "register-token", "--app", "cafe", "--token", token, "--kind", "push-to-start",
                "--attributes-type", "CafeAttributes", "--device", "phone-1", "--environment", "production",
            ])
            return result.status == 1 + 9 && result.output.contains("AppDisabled")
        }
        #expect(disabled != nil, "the disabled app's calls were still taken")

        // Revoked: refused from the next connection on.
        let revoked = try run(["admin", "keys", "revoke", "--key", tenantKeyID], key: adminKey)
        #expect((json(revoked)["key"] as? [String: Any])?["revoked_at_ms"] is Int, "\(revoked.output)")
        let refused = try RegistryReloadTests.within(RegistryReloadTests.bound) { try tenant(["ping"]).status == 1 + 16 }
        #expect(refused != nil, "the revoked key was still accepted")
        let listed = json(try run(["admin", "keys", "list", "--app", "cafe", "--include-revoked"], key: adminKey))
        #expect((listed["keys"] as? [[String: Any]])?.map { $0["key_id"] as? String } == [tenantKeyID], "\(listed)")

        // Every change is audited under the admin key's id, and no secret is in the audit. The
        // keys' last use is written once a minute, and at shutdown.
        server.stop()
        let registry = try SQLiteTenantRegistry(dataDirectory: dataDir.path)
        let audit = try await registry.audit(after: 0, limit: 100)
        let lastUsed = try await registry.snapshot().keys[tenantKeyID]?.lastUsedAt
        try await registry.close()
        #expect(lastUsed != nil && lastUsed!.milliseconds % 60_000 == 0, "last use \(String(describing: lastUsed)), rounded to the minute")
        let adminKeyID = String(adminKey.dropFirst(4).prefix(12))
        let byAdmin = audit.filter { $0.actor == adminKeyID }.map(\.action)
        #expect(byAdmin == [.createApp, .putCredentials, .createKey, .disableApp, .revokeKey], "\(audit)")
        let pem = try String(contentsOfFile: dataDir.path + "/apns-dev-key.p8", encoding: .utf8)
        let secretOf = { (key: String) in String(key.suffix(64)) }
        for entry in audit {
            #expect(!entry.details.contains("PRIVATE KEY") && !entry.details.contains(pem.prefix(40)))
            #expect(!entry.details.contains(secretOf(tenantKey)) && !entry.details.contains(secretOf(adminKey)))
        }
        #expect(!server.transcript().contains(secretOf(tenantKey)), "a secret reached the log")
        #expect(server.transcript().contains("RPC server stopped"), "a graceful stop: \(server.transcript())")
    }
}
