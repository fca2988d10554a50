import Foundation
import Testing

/// The whole path from the command line: `liverelay serve` (development
/// setup: SQLite, the in-process mock APNs) and the CLI's register-token,
/// start, update and end; the mock's record file must then hold exactly the
/// pushes APNs would have received, with their headers, in order.
@Suite(.serialized)
struct CLIDispatchTests {
    @Test
    func registerStartUpdateEndReachTheMockInOrder() throws {
        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-cli-dispatch")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        // --mock-apns-port under the name the README gives it (not --mock-ap-ns-port).
        let mockPort = try E2E.freePort()
        let server = try ServerProcess.start(
            binary: binary, dataDir: dataDir, extraArguments: ["--mock-apns-port", String(mockPort), "--apns-threads", "3"])
        defer { server.stop() }
        guard let (port, _) = server.waitUntilListening(timeout: 60) else {
            Issue.record("the server did not start:\n\(server.transcript())")
            return
        }
        let key = try #require(server.apiKey(), "no API key printed:\n\(server.transcript())")
        #expect(server.transcript().contains("mock APNs on 127.0.0.1:\(mockPort) "), "\(server.transcript())")

        let common = ["--port", String(port), "--ca-file", dataDir.path + "/cert.pem"]
        func cli(_ arguments: [String]) throws -> [String: Any] {
            let result = try E2E.run(binary.path, arguments + common, environment: ["LIVERELAY_API_KEY": key], timeout: 60)
            #expect(result.status == 0, "liverelay \(arguments.joined(separator: " ")):\n\(result.output)")
            // The reply is one JSON object (possibly over several lines).
            guard let open = result.output.firstIndex(of: "{"), let close = result.output.lastIndex(of: "}") else { return [:] }
            let json = String(result.output[open...close])
            return (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] ?? [:]
        }

        let startToken = String(repeating: "ab", count: 32)
        let updateToken = String(repeating: "cd", count: 32)
        _ = try cli([
            "register-token", "--app", "dev.app", "--token", startToken, "--kind", "push-to-start",
            "--attributes-type", "OrderAttributes", "--device", "phone-1", "--environment", "sandbox",
        ])
        let started = try cli([
            "start", "--app", "dev.app", "--activity", "order-1", "--attributes-type", "OrderAttributes",
            "--attributes", #"{"orderID":"1"}"#, "--content-state", #"{"status":"placed"}"#,
            "--token", startToken, "--alert-title", "Order placed", "--wait-for-delivery",
        ])
        _ = try cli([
            "register-token", "--app", "dev.app", "--token", updateToken, "--kind", "update",
            "--activity", "order-1", "--device", "phone-1", "--environment", "sandbox",
        ])
        let updated = try cli([
            "update", "--app", "dev.app", "--activity", "order-1",
            "--content-state", #"{"status":"shipped"}"#, "--wait-for-delivery",
        ])
        let ended = try cli([
            "end", "--app", "dev.app", "--activity", "order-1",
            "--content-state", #"{"status":"delivered"}"#, "--wait-for-delivery",
        ])

        // Each call waited for APNs's answers: one push each, delivered, final.
        for (name, reply) in [("start", started), ("update", updated), ("end", ended)] {
            let summary = reply["summary"] as? [String: Any] ?? [:]
            #expect(summary["delivered"] as? Int == 1, "\(name): \(reply)")
            #expect(summary["complete"] as? Bool == true, "\(name): \(reply)")
        }
        let timestamps = [started, updated, ended].map { $0["timestamp"] as? Int ?? 0 }
        #expect(timestamps[0] < timestamps[1] && timestamps[1] < timestamps[2], "timestamps \(timestamps)")

        let records = try Self.records(at: dataDir.path + "/mock-apns.jsonl")
        #expect(records.count == 3, "mock records: \(records)")
        guard records.count == 3 else { return }
        #expect(
            records.map { $0["path"] as? String } == ["/3/device/" + startToken, "/3/device/" + updateToken, "/3/device/" + updateToken])
        #expect(records.allSatisfy { $0["status"] as? Int == 200 && $0["method"] as? String == "POST" })
        for record in records {
            let headers = Dictionary((record["headers"] as? [[String]] ?? []).map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
            #expect(headers["apns-push-type"] == "liveactivity")
            #expect(headers["apns-topic"] == "dev.app.push-type.liveactivity")
            #expect(headers["apns-priority"] == "10")
            #expect(headers["authorization"]?.hasPrefix("bearer ") == true)
        }
        let bodies = records.map { $0["body"] as? String ?? "" }
        #expect(
            bodies[0]
                == #"{"aps":{"timestamp":\#(timestamps[0]),"event":"start","content-state":{"status":"placed"},"attributes-type":"OrderAttributes","attributes":{"orderID":"1"},"input-push-token":1,"alert":{"title":"Order placed"}}}"#
        )
        #expect(bodies[1] == #"{"aps":{"timestamp":\#(timestamps[1]),"event":"update","content-state":{"status":"shipped"}}}"#)
        #expect(bodies[2].hasPrefix(#"{"aps":{"timestamp":\#(timestamps[2]),"event":"end","content-state":{"status":"delivered"}"#))

        // The APNs side ran on loops of its own (`APNsEventLoops`, as many as --apns-threads
        // says), apart from the RPC server's.
        let names = Self.threadNames(of: server.process.processIdentifier)
        #expect(names.filter { $0.hasPrefix("APNs-ELT-") }.count == 3, "threads: \(names)")
        #expect(names.contains { $0.hasPrefix("NIO-SGLTN-") }, "threads: \(names)")  // NIO's shared group: the RPC server
    }

    /// The names of a process's threads (Linux: `/proc/PID/task/*/comm`).
    static func threadNames(of pid: Int32) -> [String] {
        let tasks = "/proc/\(pid)/task"
        let ids = (try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? []
        return ids.compactMap { id in
            (try? String(contentsOfFile: "\(tasks)/\(id)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// `serve --help` names the flags as the README does (no `--mock-ap-ns-port`)
    /// and describes the config file itself instead of pointing at a source file.
    @Test
    func serveHelpNamesTheFlagsAndDescribesTheConfigFile() throws {
        let binary = try E2E.liverelayBinary()
        let result = try E2E.run(binary.path, ["serve", "--help"], environment: [:], timeout: 60)
        #expect(result.status == 0, "\(result.output)")
        for flag in ["--mock-apns-port", "--apns-endpoint", "--apns-trust", "--postgres-url", "--data-dir", "--null-service"] {
            #expect(result.output.contains(flag), "\(flag) missing:\n\(result.output)")
        }
        #expect(!result.output.contains("ap-ns"), "\(result.output)")
        #expect(!result.output.contains(".swift"), "\(result.output)")
        for key in [
            "\"listen\"", "\"tls\"", "\"api_key_file\"", "\"app_ids\"", "\"allowed_methods\"", "\"limits\"",
            "\"store\"", "\"apps\"", "\"queue_capacity\"", "\"admission\"", "\"max_in_flight_per_app\"",
        ] {
            #expect(result.output.contains(key), "\(key) missing:\n\(result.output)")
        }
    }

    /// Each client command's --help names the environment variable it reads the key
    /// from: the admin commands LIVERELAY_ADMIN_KEY, the others LIVERELAY_API_KEY.
    @Test
    func helpNamesTheKeyVariableEachCommandReads() throws {
        let binary = try E2E.liverelayBinary()
        let admin = [
            ["admin", "apps", "list"], ["admin", "apps", "create"], ["admin", "apps", "get"], ["admin", "apps", "update"],
            ["admin", "apps", "disable"], ["admin", "keys", "create"], ["admin", "keys", "list"], ["admin", "keys", "revoke"],
            ["admin", "credentials", "put"], ["admin", "stats"], ["admin", "webhook", "put"], ["admin", "webhook", "get"],
            ["admin", "webhook", "delete"], ["admin", "webhook", "reset"],
        ]
        let tenant = [["ping"], ["register-token"], ["start"], ["update"], ["end"], ["channels", "list"]]
        for (commands, reads, other) in [
            (admin, "LIVERELAY_ADMIN_KEY", "LIVERELAY_API_KEY"), (tenant, "LIVERELAY_API_KEY", "LIVERELAY_ADMIN_KEY"),
        ] {
            for command in commands {
                let result = try E2E.run(binary.path, command + ["--help"], environment: [:], timeout: 60)
                let name = command.joined(separator: " ")
                #expect(result.status == 0, "\(name) --help:\n\(result.output)")
                #expect(result.output.contains(reads), "\(name) --help does not name \(reads):\n\(result.output)")
                #expect(!result.output.contains(other), "\(name) --help names \(other):\n\(result.output)")
            }
        }
    }

    static func records(at path: String) throws -> [[String: Any]] {
        let text = String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }
}
