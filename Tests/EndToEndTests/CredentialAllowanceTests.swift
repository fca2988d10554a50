import Foundation
import LiveRelayAPNs
import LiveRelayTestSupport
import Testing

/// The config file's `credential_key_directories` and `credential_endpoints` bound what an
/// admin's PutAPNsCredentials may name: a key file outside the directories (directly, through
/// `..` or through a symbolic link) and an endpoint not listed are INVALID_ARGUMENT naming the
/// config key, and what they allow is accepted. A bad entry stops the server at start.
@Suite(.serialized)
struct CredentialAllowanceTests {
    @Test func theConfigFilesAllowanceBoundsWhatAnAdminMayName() throws {
        let binary = try E2E.liverelayBinary()
        let directory = try E2E.makeTemporaryDirectory(prefix: "liverelay-allowance")
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.path
        for sub in ["/keys", "/data"] { try FileManager.default.createDirectory(atPath: root + sub, withIntermediateDirectories: true) }
        let pem = try APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456").pkcs8PEM
        try pem.write(toFile: root + "/keys/orders.p8", atomically: true, encoding: .utf8)
        try pem.write(toFile: root + "/outside.p8", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: root + "/keys/escape.p8", withDestinationPath: "../outside.p8")
        let keyFile =
            #"{"keys": [{"key_id": "abcdefghijkl", "secret_sha256": "\#(String(repeating: "ab", count: 32))", "all_apps": true, "allowed_methods": ["Ping"], "created_at": "2026-01-01T00:00:00Z"}]}"#
        try Data(keyFile.utf8).write(to: directory.appendingPathComponent("keys.json"))
        let base =
            #""insecure_plaintext": true, "listen": {"port": 0}, "ops": {"port": -1}, "api_key_file": "keys.json", "data_dir": "data""#

        try Data(#"{\#(base), "credential_endpoints": ["https://relay.example:8443"]}"#.utf8)
            .write(to: directory.appendingPathComponent("bad.json"))
        let bad = try E2E.run(binary.path, ["serve", "--config", root + "/bad.json"], environment: [:], timeout: 60)
        #expect(bad.status != 0 && bad.output.contains("credential_endpoints"), "\(bad.output)")

        try Data(#"{\#(base), "credential_key_directories": ["keys"], "credential_endpoints": ["relay.example:8443"]}"#.utf8)
            .write(to: directory.appendingPathComponent("config.json"))
        let config = ["--config", root + "/config.json"]
        let bootstrap = try E2E.run(binary.path, ["admin", "bootstrap"] + config, environment: [:], timeout: 60)
        let adminKey = try #require(
            bootstrap.output.split(separator: "\n").first { $0.hasPrefix("export LIVERELAY_ADMIN_KEY=") }
                .map { String($0.dropFirst("export LIVERELAY_ADMIN_KEY=".count)) }, "\(bootstrap.output)")
        let server = try ServerProcess.launch(binary: binary, arguments: ["serve"] + config)
        defer { server.stop() }
        let port = try #require(server.waitUntilListening(timeout: 60)?.port, "\(server.transcript())")
        func admin(_ arguments: [String]) throws -> E2E.RunResult {
            try E2E.run(
                binary.path, ["admin"] + arguments + ["--port", String(port), "--plaintext"],
                environment: ["LIVERELAY_ADMIN_KEY": adminKey], timeout: 60)
        }
        let created = try admin(["apps", "create", "--app", "orders", "--bundle-id", "com.example.orders"])
        #expect(created.status == 0, "\(created.output)")
        let put = ["credentials", "put", "--app", "orders", "--team-id", "TEAM123456", "--key-id", "KEY1234567"]

        for path in [root + "/outside.p8", root + "/keys/../outside.p8", root + "/keys/escape.p8"] {
            let refused = try admin(put + ["--key-path", path])
            #expect(
                refused.status == 1 + 3 && refused.output.contains("private_key_file")
                    && refused.output.contains("credential_key_directories"), "\(path): \(refused.output)")
        }
        let endpoint = try admin(put + ["--key-path", root + "/keys/orders.p8", "--endpoint", "evil.example:443"])
        #expect(endpoint.status == 1 + 3 && endpoint.output.contains("credential_endpoints"), "\(endpoint.output)")
        let got = try admin(["apps", "get", "--app", "orders"])
        #expect((ProductionConfigTests.json(got.output)["app"] as? [String: Any])?["credentials"] == nil, "\(got.output)")

        let allowed = try admin(put + ["--key-path", root + "/keys/orders.p8", "--endpoint", "relay.example:8443"])
        #expect(allowed.status == 0, "\(allowed.output)")
        let credentials = (ProductionConfigTests.json(allowed.output)["app"] as? [String: Any])?["credentials"] as? [String: Any]
        #expect(credentials?["key_source"] as? String == "file:\(root)/keys/orders.p8", "\(allowed.output)")
    }
}
