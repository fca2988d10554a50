// Webhooks survive a SIGKILL of the node delivering them: nothing is lost, and what comes
// twice comes with the same ids.
//
// The test starts `liverelay serve` (SQLite, its config file's "webhooks" section trusting
// the receiver's certificate and allowing loopback), a real HTTPS receiver
// (Tests/Support/webhook_receiver.py, Python's TLS, HTTP server and HMAC), and sets an app's
// webhook through the admin CLI. It makes events (StartActivity calls for an app without
// APNs credentials: each push fails AppNotConfigured, each call settles), while the receiver
// holds its first delivery unanswered. With that batch in flight it SIGKILLs the server,
// lets the receiver answer 200 from then on, and starts the server again on the same data.
// The restarted node delivers from the cursor last acknowledged: every event of the feed
// reaches the receiver, the first batch's events come again with the same ids and bodies,
// the acknowledged deliveries are in cursor order, every signature verifies, and GetWebhook
// reports the whole feed delivered.

import Foundation
import LiveRelayTLS
import LiveRelayTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite(.serialized)
struct WebhookCrashTests {
    static let app = "hooks"

    @Test(.timeLimit(.minutes(4)))
    func aNodeKilledMidBatchLosesNoEventAndRepeatsWithTheSameIDs() async throws {
        let binary = try E2E.liverelayBinary()
        let directory = try E2E.makeTemporaryDirectory(prefix: "liverelay-webhook-crash")
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.path
        let (certificatePEM, keyPEM) = try SelfSignedCertificate.generate()
        try certificatePEM.write(toFile: root + "/receiver.pem", atomically: true, encoding: .utf8)
        // The first delivery is held far longer than the test: the SIGKILL lands while it is in flight.
        let receiver = try await WebhookReceiver.start(
            secret: "unset", script: [.delayed(seconds: 600, status: 200)], certificatePEM: certificatePEM, privateKeyPEM: keyPEM)
        defer { receiver.stop() }

        try Data(#"{"keys": []}"#.utf8).write(to: directory.appendingPathComponent("keys.json"))
        try FileManager.default.createDirectory(atPath: root + "/data", withIntermediateDirectories: true)
        let config = #"""
            {"insecure_plaintext": true, "listen": {"port": 0}, "ops": {"port": -1}, "api_key_file": "keys.json",
             "data_dir": "data",
             "webhooks": {"allow_private_addresses": true, "ca_file": "receiver.pem", "timeout_s": 300, "backoff_max_s": 1,
                          "batch_size": 40}}
            """#
        try Data(config.utf8).write(to: directory.appendingPathComponent("config.json"))
        let serve = ["serve", "--config", root + "/config.json"]
        let bootstrap = try E2E.run(binary.path, ["admin", "bootstrap", "--config", root + "/config.json"], environment: [:], timeout: 60)
        let adminKey = try #require(
            bootstrap.output.split(separator: "\n").first { $0.hasPrefix("export LIVERELAY_ADMIN_KEY=") }
                .map { String($0.dropFirst("export LIVERELAY_ADMIN_KEY=".count)) }, "\(bootstrap.output)")

        var server = try ServerProcess.launch(binary: binary, arguments: serve)
        defer { server.stop() }
        var port = try #require(server.waitUntilListening(timeout: 60)?.port, "\(server.transcript())")
        func admin(_ arguments: [String]) throws -> [String: Any] {
            let result = try E2E.run(
                binary.path, ["admin"] + arguments + ["--port", String(port), "--plaintext"],
                environment: ["LIVERELAY_ADMIN_KEY": adminKey], timeout: 60)
            #expect(result.status == 0, "\(arguments): \(result.output)")
            return ProductionConfigTests.json(result.output)
        }
        _ = try admin(["apps", "create", "--app", Self.app, "--bundle-id", "com.example.hooks"])
        let minted = try admin(
            ["keys", "create", "--app", Self.app, "--method", "RegisterToken", "--method", "StartActivity", "--method", "ListEvents"])
        let tenantKey = try #require(minted["secret"] as? String, "\(minted)")
        let put = try admin(["webhook", "put", "--app", Self.app, "--url", "https://127.0.0.1:\(receiver.port)/liverelay"])
        let secret = try #require(put["signing_secret"] as? String, "\(put)")
        try receiver.setSecret(secret)

        func tenant(_ arguments: [String]) throws {
            let result = try E2E.run(
                binary.path, arguments + ["--app", Self.app, "--port", String(port), "--plaintext"],
                environment: ["LIVERELAY_API_KEY": tenantKey], timeout: 60)
            #expect(result.status == 0, "\(arguments): \(result.output)")
        }
        let tokens = (1...12).map { String(format: "%064x", $0) }
        for token in tokens { try tenant(["register-token", "--token", token, "--attributes-type", "Order"]) }
        for n in 1...6 {
            try tenant(
                ["start", "--activity", "order-\(n)", "--attributes-type", "Order", "--attributes", "{}", "--content-state", "{}"]
                    + tokens.flatMap { ["--token", $0] })
        }
        // 6 calls of 12 pushes each: 72 PUSH_FAILED and 6 CALL_SETTLED events.
        let expected = 78
        try await eventually("the first delivery in flight", timeout: .seconds(60)) { ((try? receiver.requests())?.count ?? 0) >= 1 }
        try await eventually("every event recorded", timeout: .seconds(60)) { [port] in
            (try? Self.feedCursors(binary: binary, port: port, key: tenantKey).count) == expected
        }
        let cursors = try Self.feedCursors(binary: binary, port: port, key: tenantKey)

        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        #expect(server.process.terminationReason == .uncaughtSignal && server.process.terminationStatus == SIGKILL)
        let inFlight = try #require(try receiver.requests().first)
        #expect(try receiver.requests().count == 1, "one delivery at a time per app")
        try receiver.setScript([])

        server = try ServerProcess.launch(binary: binary, arguments: serve)
        port = try #require(server.waitUntilListening(timeout: 60)?.port, "\(server.transcript())")
        let ids = cursors.map { "\(Self.app):\($0)" }
        try await eventually("every event acknowledged after the restart", timeout: .seconds(60)) {
            Set((try? Self.events(receiver.requests().dropFirst()).map(\.id)) ?? []) == Set(ids)
        }

        let requests = try receiver.requests()
        #expect(requests.allSatisfy { $0.signatureOK }, "every delivery verifies with the app's secret")
        let acknowledged = try Self.events(requests.dropFirst())
        #expect(acknowledged.map(\.id) == ids, "after the restart: every event once, in cursor order")
        // The batch the SIGKILL cut off comes again, each event with the id and body it had.
        let first = try Self.events([inFlight])
        #expect(!first.isEmpty)
        let again = Dictionary(acknowledged.map { ($0.id, $0.json) }, uniquingKeysWith: { a, _ in a })
        for event in first { #expect(again[event.id] == event.json, "\(event.id) came again changed") }

        let got = try admin(["webhook", "get", "--app", Self.app])
        let webhook = try #require(got["webhook"] as? [String: Any], "\(got)")
        #expect(webhook["state"] as? String == "delivering")
        #expect(webhook["delivered_cursor"] as? Int == cursors.last.map(Int.init))
    }

    /// The app's feed as `liverelay events tail` prints it: every cursor.
    static func feedCursors(binary: URL, port: Int, key: String) throws -> [UInt64] {
        let result = try E2E.run(
            binary.path, ["events", "tail", "--app", app, "--port", String(port), "--plaintext"], environment: ["LIVERELAY_API_KEY": key],
            timeout: 60)
        guard result.status == 0 else { throw E2E.Failure(description: result.output) }
        return result.output.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["cursor"] as? Int
        }.map(UInt64.init)
    }

    /// The events of these deliveries, in order, each with its id and its JSON re-serialised for comparison.
    static func events(_ requests: some Sequence<WebhookReceiver.Request>) throws -> [(id: String, json: String)] {
        try requests.flatMap { request -> [(id: String, json: String)] in
            let body = try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] ?? [:]
            return try (body["events"] as? [[String: Any]] ?? []).map { event in
                let json = try JSONSerialization.data(withJSONObject: event, options: .sortedKeys)
                return (event["id"] as? String ?? "", String(decoding: json, as: UTF8.self))
            }
        }
    }
}
