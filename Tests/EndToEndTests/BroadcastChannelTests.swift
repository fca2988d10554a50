import Foundation
import Testing

/// Broadcast channels from the command line, as the README walks through
/// them: `liverelay serve` (development setup, its in-process mock APNs),
/// `channels create`, a start that subscribes the activity to the channel,
/// an update and an end sent to the channel only, and the mock's record:
/// one broadcast POST per call, fanned out by the mock to the device the
/// start subscribed.
@Suite(.serialized)
struct BroadcastChannelTests {
    @Test
    func aChannelIsCreatedSubscribedToUpdatedEndedAndDeleted() throws {
        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-broadcast")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let server = try ServerProcess.start(
            binary: binary, dataDir: dataDir, extraArguments: ["--mock-apns-port", String(try E2E.freePort())])
        defer { server.stop() }
        guard let (port, _) = server.waitUntilListening(timeout: 60) else {
            Issue.record("the server did not start:\n\(server.transcript())")
            return
        }
        let key = try #require(server.apiKey(), "no API key printed:\n\(server.transcript())")
        let common = ["--port", String(port), "--ca-file", dataDir.path + "/cert.pem"]
        func cli(_ arguments: [String], status: Int32 = 0) throws -> (json: [String: Any], output: String) {
            let result = try E2E.run(binary.path, arguments + common, environment: ["LIVERELAY_API_KEY": key], timeout: 60)
            #expect(result.status == status, "liverelay \(arguments.joined(separator: " ")):\n\(result.output)")
            guard let open = result.output.firstIndex(of: "{"), let close = result.output.lastIndex(of: "}") else {
                return ([:], result.output)
            }
            let json = (try? JSONSerialization.jsonObject(with: Data(result.output[open...close].utf8))) as? [String: Any]
            return (json ?? [:], result.output)
        }

        let created = try cli(["channels", "create", "--app", "dev.app", "--storage-policy", "no-storage"]).json
        let channel = try #require(created["channel_id"] as? String, "\(created)")
        #expect(created["storage_policy"] as? String == "no-storage")
        #expect(created["environment"] as? String == "sandbox")
        let listed = try cli(["channels", "list", "--app", "dev.app"]).json
        #expect((listed["channels"] as? [[String: Any]])?.compactMap { $0["channel_id"] as? String } == [channel])

        let startToken = String(repeating: "ab", count: 32)
        _ = try cli([
            "register-token", "--app", "dev.app", "--token", startToken, "--kind", "push-to-start",
            "--attributes-type", "GameAttributes", "--device", "phone-1", "--environment", "sandbox",
        ])
        let started = try cli([
            "start", "--app", "dev.app", "--activity", "game-1", "--attributes-type", "GameAttributes",
            "--attributes", #"{"match":"A-B"}"#, "--content-state", #"{"score":"0-0"}"#, "--token", startToken,
            "--alert-title", "Kick-off", "--channel", channel, "--no-update-token", "--wait-for-delivery",
        ]).json
        let updated = try cli([
            "update", "--app", "dev.app", "--activity", "game-1", "--content-state", #"{"score":"1-0"}"#,
            "--channel", channel, "--channel-only", "--wait-for-delivery",
        ]).json
        let ended = try cli([
            "end", "--app", "dev.app", "--activity", "game-1", "--content-state", #"{"score":"2-1"}"#,
            "--stale-date", "1900000000", "--relevance-score", "0.5", "--channel", channel, "--channel-only",
            "--wait-for-delivery",
        ]).json
        for (name, reply) in [("start", started), ("update", updated), ("end", ended)] {
            let summary = reply["summary"] as? [String: Any] ?? [:]
            #expect(summary["targeted"] as? Int == 1, "\(name): \(reply)")
            #expect(summary["delivered"] as? Int == 1, "\(name): \(reply)")
            #expect(summary["complete"] as? Bool == true, "\(name): \(reply)")
        }

        // A channel the app does not have is NOT_FOUND (exit 1 + 5) before anything is stored or sent.
        let unknown = try cli(
            [
                "update", "--app", "dev.app", "--activity", "game-1", "--content-state", "{}", "--channel",
                "bm90LWEtY2hhbm5lbA==", "--channel-only",
            ],
            status: 6)
        #expect(unknown.output.contains("ChannelNotFound"), "\(unknown.output)")

        let records = try CLIDispatchTests.records(at: dataDir.path + "/mock-apns.jsonl")
            .filter { ($0["path"] as? String)?.hasPrefix("/1/") != true }
        #expect(records.count == 3, "mock records: \(records)")
        guard records.count == 3 else { return }
        #expect(records[0]["path"] as? String == "/3/device/" + startToken)
        #expect(records[0]["subscribed_to"] as? String == channel, "the start subscribed the device: \(records[0])")
        let body0 = records[0]["body"] as? String ?? ""
        #expect(body0.contains(#""input-push-channel":"\#(channel)""#) && !body0.contains("input-push-token"), "\(body0)")
        for record in records[1...] {
            #expect(record["path"] as? String == "/4/broadcasts/apps/dev.app", "\(record)")
            #expect(record["status"] as? Int == 200, "\(record)")
            #expect(record["fanned_out_to"] as? [String] == [startToken], "the mock fanned it out to the subscriber: \(record)")
            let headers = Dictionary(
                (record["headers"] as? [[String]] ?? []).map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
            #expect(headers["apns-channel-id"] == channel)
            #expect(headers["apns-topic"] == nil)
            #expect(headers["apns-expiration"] == "0", "a no-storage channel")
        }
        let endBody = records[2]["body"] as? String ?? ""
        #expect(endBody.contains(#""event":"end""#) && endBody.contains(#""stale-date":1900000000"#), "\(endBody)")
        #expect(endBody.contains(#""relevance-score":0.5"#), "\(endBody)")

        _ = try cli(["channels", "delete", "--app", "dev.app", "--channel", channel])
        #expect((try cli(["channels", "list", "--app", "dev.app"]).json["channels"] as? [Any])?.isEmpty == true)
        let afterDelete = try cli(
            ["update", "--app", "dev.app", "--activity", "game-1", "--content-state", "{}", "--channel", channel, "--channel-only"],
            status: 6)
        #expect(afterDelete.output.contains("ChannelNotFound"), "\(afterDelete.output)")
    }
}
