import Foundation
import LiveRelayTestSupport
import Testing

/// The production path: `liverelay serve --config` with two apps, each with
/// its own APNs key and its own API key, mutual TLS with a CA of the test's,
/// quotas, and a `liverelay mock-apns` of its own process that knows both
/// apps' keys. Everything is made with the openssl command, as an operator
/// would; the CLI is the caller.
@Suite(.serialized)
struct ProductionConfigTests {
    /// The operator's files, made with openssl and python3 in `directory`.
    struct Operator {
        let directory: URL
        var path: String { directory.path }
        let ordersKey: String
        let ridesKey: String

        static func make(in directory: URL) throws -> Operator {
            func openssl(_ arguments: [String]) throws {
                let result = try E2E.run("/usr/bin/openssl", arguments, environment: [:], timeout: 60)
                guard result.status == 0 else { throw E2E.Failure(description: "openssl \(arguments): \(result.output)") }
            }
            let d = directory.path
            // A CA that signs the server's certificate and the callers' client certificates.
            try openssl([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=LiveRelay test CA", "-keyout", "\(d)/ca-key.pem", "-out", "\(d)/ca.pem",
            ])
            for (name, extensions) in [("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"), ("client", "extendedKeyUsage=clientAuth")] {
                try openssl([
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=\(name)",
                    "-keyout", "\(d)/\(name)-key.pem", "-out", "\(d)/\(name).csr",
                ])
                try Data((extensions + "\n").utf8).write(to: directory.appendingPathComponent("\(name).ext"))
                try openssl([
                    "x509", "-req", "-in", "\(d)/\(name).csr", "-CA", "\(d)/ca.pem", "-CAkey", "\(d)/ca-key.pem",
                    "-CAcreateserial", "-days", "2", "-extfile", "\(d)/\(name).ext", "-out", "\(d)/\(name).pem",
                ])
            }
            // Each app's .p8 signing key (PKCS#8, P-256), as Apple hands them out.
            for app in ["orders", "rides"] {
                try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(d)/\(app).p8"])
            }
            // Two tenant keys, each for its own app; the file keeps hashes only.
            let minted = try E2E.run(
                "/usr/bin/python3",
                [
                    "-c",
                    """
                    import hashlib, json, secrets, sys
                    def key(apps, methods, label):
                        key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(12))
                        secret = secrets.token_hex(32)
                        record = {"key_id": key_id, "secret_sha256": hashlib.sha256(secret.encode()).hexdigest(),
                                  "app_ids": apps, "allowed_methods": methods, "created_at": "2026-01-01T00:00:00Z", "label": label}
                        return record, f"lrk_{key_id}_{secret}"
                    orders, orders_key = key(["orders"], ["RegisterToken", "StartActivity", "UpdateActivity", "EndActivity", "Ping"], "orders")
                    rides, rides_key = key(["rides"], ["RegisterToken", "Ping"], "rides registrations")
                    json.dump({"keys": [orders, rides]}, open(sys.argv[1], "w"))
                    print(orders_key); print(rides_key)
                    """,
                    "\(d)/api-keys.json",
                ], environment: [:], timeout: 60)
            let keys = minted.output.split(separator: "\n").map(String.init).filter { $0.hasPrefix("lrk_") }
            guard minted.status == 0, keys.count == 2 else { throw E2E.Failure(description: "minting keys: \(minted.output)") }
            return Operator(directory: directory, ordersKey: keys[0], ridesKey: keys[1])
        }
    }

    @Test func twoAppsWithTheirOwnKeysOverMutualTLS() throws {
        let binary = try E2E.liverelayBinary()
        let directory = try E2E.makeTemporaryDirectory(prefix: "liverelay-production")
        defer { try? FileManager.default.removeItem(at: directory) }
        let op = try Operator.make(in: directory)

        let (mock, mockPort) = try ServerProcess.mockAPNs(
            binary: binary,
            apps: [
                "com.example.orders,ORDERSTEAM,ORDERSKEY1,\(op.path)/orders.p8",
                "com.example.rides,RIDESTEAM1,RIDESKEY01,\(op.path)/rides.p8",
            ],
            certificate: "\(op.path)/mock.pem", record: "\(op.path)/mock.jsonl")
        defer { mock.stop() }

        let rpcPort = try E2E.freePort()
        let config: [String: Any] = [
            "listen": ["host": "127.0.0.1", "port": rpcPort],
            "ops": ["host": "127.0.0.1", "port": 0],
            "tls": ["certificate": "server.pem", "private_key": "server-key.pem", "client_ca": "ca.pem", "client_auth": "require"],
            "api_key_file": "api-keys.json",
            "data_dir": "data",
            "quotas": ["pushes_per_hour": 1000, "priority_budget_per_hour": 60],
            "apps": [
                [
                    "id": "orders", "bundle_id": "com.example.orders",
                    "apns": [
                        "team_id": "ORDERSTEAM", "key_id": "ORDERSKEY1", "key_file": "orders.p8",
                        "endpoint": "127.0.0.1:\(mockPort)", "trust_certificate": "mock.pem",
                    ],
                ],
                [
                    "id": "rides", "bundle_id": "com.example.rides", "quotas": ["max_tokens": 2, "priority_budget_per_hour": "unlimited"],
                    "apns": [
                        "team_id": "RIDESTEAM1", "key_id": "RIDESKEY01", "key_file": "rides.p8",
                        "endpoint": "127.0.0.1:\(mockPort)", "trust_certificate": "mock.pem",
                    ],
                ],
            ],
        ]
        try JSONSerialization.data(withJSONObject: config).write(to: directory.appendingPathComponent("config.json"))
        let oldMask = umask(0o022)
        let server = try ServerProcess.launch(
            binary: binary, arguments: ["serve", "--config", "\(op.path)/config.json", "--log-format", "json"], requestedPort: rpcPort)
        umask(oldMask)
        defer { server.stop() }
        try #require(server.waitUntilListening(timeout: 60) != nil, "serve: \(server.transcript())")
        let opsPort = try #require(Self.opsPort(server), "no ops line: \(server.transcript())")

        let tls = ["--port", String(rpcPort), "--ca-file", "\(op.path)/ca.pem"]
        let mtls = tls + ["--client-cert", "\(op.path)/client.pem", "--client-key", "\(op.path)/client-key.pem"]
        func cli(_ key: String, _ arguments: [String], connection: [String]? = nil) throws -> E2E.RunResult {
            try E2E.run(binary.path, arguments + (connection ?? mtls), environment: ["LIVERELAY_API_KEY": key], timeout: 60)
        }
        let token = { (n: Int) in String(repeating: String(format: "%02x", n), count: 32) }

        // The orders app, end to end: its token, a start waiting for APNs's answer.
        let registered = try cli(
            op.ordersKey,
            [
                "register-token", "--app", "orders", "--token", token(1), "--kind", "push-to-start",
                "--attributes-type", "OrderAttributes", "--device", "phone-1", "--environment", "production",
            ])
        #expect(registered.status == 0, "\(registered.output)")
        let started = try cli(
            op.ordersKey,
            [
                "start", "--app", "orders", "--activity", "order-1", "--attributes-type", "OrderAttributes",
                "--attributes", #"{"id":1}"#, "--content-state", #"{"status":"placed"}"#, "--token", token(1),
                "--alert-title", "Placed", "--wait-for-delivery",
            ])
        #expect(started.status == 0, "\(started.output)")
        let summary = Self.json(started.output)["summary"] as? [String: Any]
        #expect(summary?["delivered"] as? Int == 1 && summary?["complete"] as? Bool == true, "\(started.output)")

        // Each key acts for its own app only; a key's methods are its own.
        let crossed = try cli(
            op.ordersKey,
            [
                "register-token", "--app", "rides", "--token", token(2), "--kind", "push-to-start",
                "--attributes-type", "RideAttributes", "--device", "phone-1",
            ])
        #expect(crossed.status == 1 + 7, "PERMISSION_DENIED: \(crossed.output)")
        let forbiddenStart = try cli(
            op.ridesKey,
            [
                "start", "--app", "rides", "--activity", "ride-1", "--attributes-type", "RideAttributes",
                "--attributes", "{}", "--content-state", "{}", "--all-devices",
            ])
        #expect(forbiddenStart.status == 1 + 7, "PERMISSION_DENIED: \(forbiddenStart.output)")
        #expect(try cli(op.ordersKey, ["ping"]).status == 0)

        // The rides app's token quota: two tokens, the third refused with its reason, nothing stored.
        for n in 2...3 {
            let ok = try cli(
                op.ridesKey,
                [
                    "register-token", "--app", "rides", "--token", token(n), "--kind", "push-to-start",
                    "--attributes-type", "RideAttributes", "--device", "phone-\(n)",
                ])
            #expect(ok.status == 0, "\(ok.output)")
        }
        let over = try cli(
            op.ridesKey,
            [
                "register-token", "--app", "rides", "--token", token(4), "--kind", "push-to-start",
                "--attributes-type", "RideAttributes", "--device", "phone-4",
            ])
        #expect(over.status == 1 + 8, "RESOURCE_EXHAUSTED: \(over.output)")
        #expect(over.output.contains("TokenQuotaExceeded"), "\(over.output)")

        // No client certificate: no connection at all, and the server carries on.
        let anonymous = try cli(op.ordersKey, ["ping"], connection: tls)
        #expect(anonymous.status != 0, "\(anonymous.output)")
        #expect(try cli(op.ordersKey, ["ping"]).status == 0)

        // What APNs saw: the orders push under its own topic, signed with the orders key.
        let records = try CLIDispatchTests.records(at: "\(op.path)/mock.jsonl")
        #expect(records.count == 1, "\(records)")
        let headers = Dictionary(
            (records.first?["headers"] as? [[String]] ?? []).map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
        #expect(headers["apns-topic"] == "com.example.orders.push-type.liveactivity")
        #expect(records.first?["status"] as? Int == 200)
        let jwtHeader = headers["authorization"]?.dropFirst("bearer ".count).split(separator: ".").first.map(String.init) ?? ""
        #expect(Self.base64URLDecoded(jwtHeader).contains(#""kid":"ORDERSKEY1""#), "\(jwtHeader)")

        // Device tokens on disk are the owner's only, whatever the umask was.
        for (file, mode) in [
            ("data", 0o700), ("data/liverelay.sqlite3", 0o600), ("data/liverelay.sqlite3-wal", 0o600), ("mock.jsonl", 0o600),
            ("data/channels.sqlite3", 0o600),
        ] {
            let found = try FileManager.default.attributesOfItem(atPath: "\(op.path)/\(file)")[.posixPermissions] as? Int
            #expect(found == mode, "\(file): \(String(found ?? 0, radix: 8))")
        }

        // The operations port tells the same story, per app.
        let metrics = try plainHTTPGet(port: opsPort, path: "/metrics")
        for line in [
            #"liverelay_app_calls_total{app="orders",method="StartActivity",status="OK"} 1"#,
            #"liverelay_app_calls_total{app="rides",method="RegisterToken",status="RESOURCE_EXHAUSTED"} 1"#,
            #"liverelay_quota_refused_total{app="rides",quota="max_tokens"} 1"#,
            #"liverelay_queue_capacity{app="orders"} 100000"#,
            #"liverelay_queue_depth{app="rides"} 0"#,
            #"liverelay_apns_provider_tokens_signed_total{team_id="ORDERSTEAM",key_id="ORDERSKEY1"} 1"#,
        ] {
            #expect(metrics.contains(line), "\(line) missing from /metrics")
        }
        #expect(metrics.contains(#"liverelay_store_commit_duration_count{store="sqlite"}"#))
        #expect(metrics.contains(#"liverelay_store_batch_size_bucket{store="sqlite",le="1.0"}"#))

        // --log-format json: every line on stderr is one JSON object, and no key's secret is in any of them.
        server.stop()
        let logLines = server.stderrText().split(separator: "\n")
        #expect(!logLines.isEmpty)
        for line in logLines {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "not JSON: \(line)")
        }
        let everything = server.transcript()
        for key in [op.ordersKey, op.ridesKey] {
            #expect(!everything.contains(String(key.suffix(64))), "a key's secret reached the log")
        }
    }

    @Test func anEmptyAppListAndAPlaintextFallbackAreRefusedAtStart() throws {
        let binary = try E2E.liverelayBinary()
        let directory = try E2E.makeTemporaryDirectory(prefix: "liverelay-footguns")
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile =
            #"{"keys": [{"key_id": "abcdefghijkl", "secret_sha256": "\#(String(repeating: "ab", count: 32))", "app_ids": [], "allowed_methods": ["Ping"], "created_at": "2026-01-01T00:00:00Z"}]}"#
        try Data(keyFile.utf8).write(to: directory.appendingPathComponent("keys.json"))
        let base =
            #""insecure_plaintext": true, "listen": {"port": \#(try E2E.freePort())}, "ops": {"port": -1}, "api_key_file": "keys.json""#
        try Data("{\(base), \"store\": {\"kind\": \"memory\"}}".utf8).write(to: directory.appendingPathComponent("empty.json"))
        let empty = try E2E.run(binary.path, ["serve", "--config", "\(directory.path)/empty.json"], environment: [:], timeout: 60)
        #expect(empty.status != 0)
        #expect(empty.output.contains(#""app_ids" is empty"#) && empty.output.contains(#""all_apps": true"#), "\(empty.output)")

        try Data(keyFile.replacingOccurrences(of: #""app_ids": []"#, with: #""all_apps": true"#).utf8)
            .write(to: directory.appendingPathComponent("keys.json"))
        let url = "postgres://relay:hunter2@db.example.invalid:5432/relay?sslmode=prefer"
        try Data("{\(base), \"store\": {\"kind\": \"postgres\", \"postgres_url\": \"\(url)\"}}".utf8)
            .write(to: directory.appendingPathComponent("prefer.json"))
        let prefer = try E2E.run(binary.path, ["serve", "--config", "\(directory.path)/prefer.json"], environment: [:], timeout: 60)
        #expect(prefer.status != 0)
        #expect(prefer.output.contains("sslmode=prefer falls back to plaintext"), "\(prefer.output)")
        #expect(!prefer.output.contains("hunter2"), "the password never reaches the output")
    }

    @Test func aPriorityBudgetBelowOneIsRefusedAtStart() throws {
        try Self.expectRefusedAtStart([
            (#""quotas": {"priority_budget_per_hour": 0}"#, "quotas.priority_budget_per_hour must be a whole number from 1"),
            (#""quotas": {"priority_budget_per_hour": -3}"#, "quotas.priority_budget_per_hour must be a whole number from 1"),
            (#""quotas": {"priority_budget_per_hour": 2.5}"#, "quotas.priority_budget_per_hour must be a whole number from 1"),
            (#""quotas": {"priority_budget_per_hour": "lots"}"#, #"a number or "unlimited", not "lots""#),
        ])
    }

    @Test func anEventRetentionBelowOneOrAnUnknownEventsKeyIsRefusedAtStart() throws {
        try Self.expectRefusedAtStart([
            (#""events": {"retention_hours": 0}"#, "events.retention_hours must be at least 1"),
            (#""events": {"max_per_app": 0}"#, "events.max_per_app must be at least 1"),
            (#""events": {"retention": 5}"#, "events.retention"),
        ])
    }

    /// Each config section (a minimal memory-store config around it) stops `serve` at start, saying `expected`.
    static func expectRefusedAtStart(_ cases: [(section: String, expected: String)]) throws {
        let binary = try E2E.liverelayBinary()
        let directory = try E2E.makeTemporaryDirectory(prefix: "liverelay-refused-config")
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile =
            #"{"keys": [{"key_id": "abcdefghijkl", "secret_sha256": "\#(String(repeating: "ab", count: 32))", "all_apps": true, "allowed_methods": ["Ping"], "created_at": "2026-01-01T00:00:00Z"}]}"#
        try Data(keyFile.utf8).write(to: directory.appendingPathComponent("keys.json"))
        let base =
            #""insecure_plaintext": true, "listen": {"port": \#(try E2E.freePort())}, "ops": {"port": -1}, "api_key_file": "keys.json", "store": {"kind": "memory"}"#
        for (section, expected) in cases {
            try Data("{\(base), \(section)}".utf8).write(to: directory.appendingPathComponent("config.json"))
            let run = try E2E.run(binary.path, ["serve", "--config", "\(directory.path)/config.json"], environment: [:], timeout: 60)
            #expect(run.status != 0, "\(section) was accepted")
            #expect(run.output.contains(expected), "\(section): \(run.output)")
        }
    }

    /// The JSON object a client command printed.
    static func json(_ output: String) -> [String: Any] {
        guard let open = output.firstIndex(of: "{"), let close = output.lastIndex(of: "}") else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(output[open...close].utf8))) as? [String: Any] ?? [:]
    }

    static func opsPort(_ server: ServerProcess) -> Int? {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            for line in server.transcript().split(separator: "\n") where line.hasPrefix("ops listening on ") {
                return ServerProcess.port(in: String(line))
            }
            usleep(50_000)
        }
        return nil
    }

    static func base64URLDecoded(_ text: String) -> String {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }
}
