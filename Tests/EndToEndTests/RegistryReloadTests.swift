import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayServer
import LiveRelayStore
import LiveRelayStoreSQLite
import LiveRelayTestSupport
import Testing

/// A running `liverelay serve` follows its tenant registry without a
/// restart: a key added to the registry (here by a second process's worth of
/// code opening the same SQLite registry file, as an operator's tool does) is
/// accepted, an app added with its APNs key gets its pushes delivered, and a
/// revoked key is refused, each within a bound the test states (the node
/// polls the registry every second; 60 s is a ceiling for a loaded two-core
/// machine, where each attempt starts a CLI process).
@Suite(.serialized)
struct RegistryReloadTests {
    static let bound: TimeInterval = 60

    @Test func keysAndAppsChangedInTheRegistryTakeEffectWithoutARestart() async throws {
        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-registry-reload")
        defer { try? FileManager.default.removeItem(at: dataDir) }

        // A mock APNs that knows the new app's bundle id and key (dev.app's key, reused).
        let server = try ServerProcess.start(binary: binary, dataDir: dataDir)
        defer { server.stop() }
        let port = try #require(server.waitUntilListening(timeout: 60)?.port, "\(server.transcript())")
        let (mock, mockPort) = try ServerProcess.mockAPNs(
            binary: binary, apps: ["com.example.cafe,LRDEVTEAM1,LRDEVKEY01,\(dataDir.path)/apns-dev-key.p8"],
            certificate: "\(dataDir.path)/cafe-mock.pem", record: "\(dataDir.path)/cafe.jsonl")
        defer { mock.stop() }

        let registry = try SQLiteTenantRegistry(dataDirectory: dataDir.path)
        let key = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: [.ping, .registerToken, .startActivity])
        let now = UnixTime(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
        try await registry.apply(
            .createKey(
                RegisteredAPIKey(
                    keyID: key.record.keyID, secretSHA256: key.record.secretSHA256,
                    role: .tenant(apps: .all, methods: ["Ping", "RegisterToken", "StartActivity"]), label: "added while serving")),
            actor: "test", now: now)
        func cli(_ arguments: [String]) throws -> E2E.RunResult {
            try E2E.run(
                binary.path, arguments + ["--port", String(port), "--ca-file", dataDir.path + "/cert.pem"],
                environment: ["LIVERELAY_API_KEY": key.plaintext], timeout: 60)
        }
        let keyTook = try Self.within(Self.bound) { try cli(["ping"]).status == 0 }
        #expect(keyTook != nil, "the new key was not accepted within \(Self.bound) s:\n\(server.transcript())")

        // A new app with its APNs key, endpoint and trust, in one change (two changes may reach the
        // node apart: an app without credentials is accepted, and its pushes fail AppNotConfigured
        // until the credentials arrive; AdminAPITests goes that way, with the key made after both):
        // its token and a start that waits for APNs.
        let trust = try String(contentsOfFile: dataDir.path + "/cafe-mock.pem", encoding: .utf8)
        let added = Date()
        try await registry.apply(
            .createApp(
                RegisteredApp(
                    id: "cafe", bundleID: "com.example.cafe",
                    credentials: RegisteredCredentials(
                        teamID: "LRDEVTEAM1", keyID: "LRDEVKEY01", endpoint: "127.0.0.1:\(mockPort)",
                        keySource: .file(path: dataDir.path + "/apns-dev-key.p8"), trustPEM: trust))),
            actor: "test", now: now)
        let token = String(repeating: "c0", count: 32)
        let appTook = try Self.within(Self.bound) {
            try cli([
                "register-token", "--app", "cafe", "--token", token, "--kind", "push-to-start",
                "--attributes-type", "CafeAttributes", "--device", "phone-1", "--environment", "production",
            ]).status == 0
        }
        #expect(appTook != nil, "the new app was not accepted within \(Self.bound) s:\n\(server.transcript())")
        let started = try cli([
            "start", "--app", "cafe", "--activity", "latte-1", "--attributes-type", "CafeAttributes",
            "--attributes", "{}", "--content-state", #"{"status":"brewing"}"#, "--token", token, "--wait-for-delivery",
        ])
        let summary = ProductionConfigTests.json(started.output)["summary"] as? [String: Any]
        #expect(summary?["delivered"] as? Int == 1, "\(started.output)")
        let flowing = Date().timeIntervalSince(added)
        let records = try CLIDispatchTests.records(at: dataDir.path + "/cafe.jsonl")
        #expect(records.count == 1 && records.first?["status"] as? Int == 200, "\(records)")

        // Revoked: refused from the next connection on.
        try await registry.apply(.revokeKey(keyID: key.record.keyID), actor: "test", now: now)
        let revokeTook = try Self.within(Self.bound) { try cli(["ping"]).status == 1 + 16 }
        #expect(revokeTook != nil, "the revoked key was still accepted after \(Self.bound) s")
        try await registry.close()
        print(
            "registry reload: key accepted after \(Self.seconds(keyTook)), app accepted after \(Self.seconds(appTook)), "
                + "its first push delivered \(String(format: "%.2f", flowing)) s after it was created, "
                + "revocation refused after \(Self.seconds(revokeTook))")
    }

    /// Seconds until `condition` held (checked every 100 ms), nil if it did not within `limit`.
    static func within(_ limit: TimeInterval, _ condition: () throws -> Bool) throws -> TimeInterval? {
        let start = Date()
        while Date().timeIntervalSince(start) < limit {
            if try condition() { return Date().timeIntervalSince(start) }
            usleep(100_000)
        }
        return nil
    }

    static func seconds(_ value: TimeInterval?) -> String {
        value.map { String(format: "%.2f s", $0) } ?? "never"
    }
}
