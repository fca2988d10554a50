// Durable dispatch intents proven with kills. A SIGKILL of `liverelay serve`
// in the middle of a fan-out must not lose the pushes of an acknowledged call.
//
// Each test runs a `liverelay mock-apns` of its own process (it records every push it receives
// to a JSON-lines file, and answers each after a delay so that a fan-out takes a few seconds)
// and `liverelay serve` processes sending dev.app's pushes to it (--apns-endpoint), all signing
// with one P-256 key made with openssl before the first start. The driver
// clients/python/tests/durability/intent_durability.py `load` registers 20,000 update tokens for one activity
// through the server, sends two UpdateActivity calls back to back (fire and forget, both
// acknowledged) and, once the mock's record shows the last one at 3,000 tokens or more (not
// all), SIGKILLs the server. Then:
//
// - SQLite: `serve` restarts on the same data directory; its DispatchIntents service claims
//   what the killed process left and sends it again (same payload, same aps timestamp);
// - PostgreSQL: two nodes share one schema, the update goes through node A, A is killed, and
//   node B claims A's intent once A's lease (15 s here, --intent-lease-ms) has run out.
//
// `verify` then reads the record until every token has received the last acknowledged update
// (bounded), and reports how many pushes went out before and after the kill, the duplicates
// (tokens that received the latest update twice: the price of at-least-once) and the times.
// The control runs the same crash with --no-durable-intents on both starts: tokens must then
// still miss the latest update after a generous wait, so the test is known to notice a loss.
//
// Needs openssl on PATH (scripts/setup.sh) and the Python that LiveRelayPython finds for the driver, which
// uses the `liverelay` package (LIVERELAY_PYTHON, or the virtual environment of clients/python/scripts/test.sh);
// the PostgreSQL test needs LIVERELAY_POSTGRES_URL (`eval "$(bash scripts/postgres.sh start)"`)
// and skips itself without it.

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite(
    "Durable dispatch intents survive a SIGKILL mid-fan-out", .serialized,
    .enabled(if: heavyEndToEndTestsEnabled, "set LIVERELAY_HEAVY_E2E=1 (scripts/test.sh runs them alone)"))
struct IntentDurabilityTests {
    static let tokens = 20_000
    static let killAfter = 3_000
    /// The PostgreSQL nodes' lease: how long node B waits before it takes node A's work over. Node A renews its
    /// leases every third of it, through the store's one writer lane, where a renewal waits behind A's own
    /// 20,000-token UpdateActivity transactions (seconds each in a debug build on a busy machine): 3 s let B take
    /// A's work while A was alive; 15 s leaves room.
    static let leaseMilliseconds = 15_000
    /// Seconds from the restart to the last token covered in the durable SQLite run, for the control's wait.
    static let durableFinish = Measured()

    @Test("SQLite: after a SIGKILL mid-fan-out, the restarted server sends the latest update to every token", .timeLimit(.minutes(4)))
    func sqliteRestartFinishesTheFanOut() throws {
        guard let run = try IntentCrash.perform(.sqlite(durable: true), verifyTimeout: 90) else { return }
        let load = run.load, verify = run.verify
        run.expectKilledMidFanOut()
        run.expectEachAcknowledgedCallSettledOnce()
        #expect(
            verify.int("missing") == 0,
            "\(verify.int("missing")) of \(Self.tokens) tokens never received the latest acknowledged update: \(verify)")
        #expect(verify.int("covered") == Self.tokens)
        #expect(verify.int("pushes_after_kill") >= Self.tokens - load.int("covered_at_kill"), "\(verify)")
        #expect(run.restartedTranscript.contains("resuming dispatch intents"), "\(run.restartedTranscript)")
        #expect(run.verifyStatus == 0)
        if let seconds = verify["finish_after_restart_seconds"] as? Double { Self.durableFinish.set(seconds) }
        run.printNumbers("SQLite, restart")
    }

    @Test("control: without durable intents the same crash loses the latest update for some tokens", .timeLimit(.minutes(4)))
    func controlWithoutIntentsLosesPushes() throws {
        // Longer than the durable run needed after its restart (or a default when it did not run), capped:
        // the durable run's first resumed push came within a second of its restart, and this run must send none.
        let wait = min(30, max(20, 3 * (Self.durableFinish.get() ?? 15)))
        guard let run = try IntentCrash.perform(.sqlite(durable: false), verifyTimeout: wait) else { return }
        let load = run.load, verify = run.verify
        run.expectKilledMidFanOut()
        #expect(
            verify.int("missing") > 0,
            "every token received the latest update although nothing was durable: the test cannot notice a loss: \(verify)")
        #expect(verify.int("missing") == Self.tokens - verify.int("covered"))
        #expect(verify.int("pushes_after_kill") == 0, "the restarted server sent pushes although intents were off: \(verify)")
        #expect(!run.restartedTranscript.contains("resuming dispatch intents"), "\(run.restartedTranscript)")
        #expect(verify.int("covered") >= load.int("covered_at_kill"))
        #expect(run.verifyStatus != 0, "intent_durability.py verify passed although tokens missed the latest update")
        run.printNumbers("control (--no-durable-intents), waited \(verify["waited_seconds"] ?? "?") s")
    }

    @Test(
        "PostgreSQL: node A is killed mid-fan-out and node B finishes its work once A's lease ran out",
        .enabled(if: ProcessInfo.processInfo.environment["LIVERELAY_POSTGRES_URL"] != nil, "LIVERELAY_POSTGRES_URL is not set"),
        .timeLimit(.minutes(5)))
    func postgresOtherNodeFinishesTheFanOut() throws {
        let url = try #require(ProcessInfo.processInfo.environment["LIVERELAY_POSTGRES_URL"])
        let lease = Double(Self.leaseMilliseconds) / 1000
        // B claims within a lease and a claim interval (1 s) of A's last renewal; the resend takes what a fan-out takes.
        let bound = lease + 1 + 100
        guard let run = try IntentCrash.perform(.postgres(url: url, durable: true), verifyTimeout: bound) else { return }
        let verify = run.verify
        run.expectKilledMidFanOut()
        run.expectEachAcknowledgedCallSettledOnce()
        #expect(
            verify.int("missing") == 0,
            "\(verify.int("missing")) of \(Self.tokens) tokens never received the latest acknowledged update: \(verify)")
        #expect(verify.int("pushes_after_kill") > 0)
        #expect(!run.resumedBeforeKill, "node B took A's work over while A was alive (A's lease ran out):\n\(run.restartedTranscript)")
        let failover = verify["failover_seconds"] as? Double ?? .infinity
        // A's lease ran out at most a lease after the kill; B looks every second (and connects to APNs, then sends).
        #expect(failover <= lease + 1 + 5, "node B took \(failover) s after the kill to resume A's work (lease \(lease) s)")
        #expect(failover >= 1, "node B resumed A's work \(failover) s after the kill, before A's lease could have run out")
        #expect((verify["finish_after_kill_seconds"] as? Double ?? .infinity) <= bound)
        #expect(run.restartedTranscript.contains("resuming dispatch intents"), "node B:\n\(run.restartedTranscript)")
        #expect(run.verifyStatus == 0)
        run.printNumbers("PostgreSQL, node B takes over (lease \(Self.leaseMilliseconds) ms)")
    }
}

/// One crash: mock APNs, serve (one node, or two on PostgreSQL), load + SIGKILL, restart (SQLite), verify.
struct IntentCrash {
    enum Mode {
        case sqlite(durable: Bool)
        case postgres(url: String, durable: Bool)
    }

    var load: [String: Any]
    var verify: [String: Any]
    var verifyStatus: Int32
    /// The restarted server's output (SQLite), or node B's (PostgreSQL).
    var restartedTranscript: String
    /// Node B had resumed intents before node A was killed.
    var resumedBeforeKill = false
    /// The app's event feed after the work finished: CALL_SETTLED events per acknowledged update (by its
    /// aps timestamp), nil when intents were off (nothing to settle).
    var settledEvents: [Int64: Int]?

    /// The mock answers each push after this many milliseconds, with at most this many streams per connection: at
    /// most 4 connections x 50 streams / 20 ms = 10,000 pushes a second, so even a release build takes 2 s for the
    /// fan-out and the SIGKILL lands in the middle of it (a debug build is slower: about 1,000 a second on 2 cores).
    static let mockLatencyMilliseconds = 20
    static let mockMaxStreams = 50

    /// The feed after the crash: every acknowledged update settled exactly once, whichever process
    /// settled it (the killed one before the kill, or the one that resumed it).
    func expectEachAcknowledgedCallSettledOnce() {
        let acked = (load["acked"] as? [[String: Any]] ?? []).map { Int64($0.int("timestamp")) }
        #expect(!acked.isEmpty)
        for timestamp in acked {
            #expect(
                settledEvents?[timestamp] == 1, "CALL_SETTLED events of the update at \(timestamp): \(String(describing: settledEvents))")
        }
        #expect(Set(settledEvents?.keys.map { $0 } ?? []) == Set(acked), "settled events of calls never acknowledged")
    }

    func expectKilledMidFanOut() {
        #expect(load.int("registered") == IntentDurabilityTests.tokens, "\(load)")
        let acked = load["acked"] as? [[String: Any]] ?? []
        #expect(acked.count == 2, "both updates must be acknowledged: \(load)")
        #expect(acked.allSatisfy { $0.int("targeted") == IntentDurabilityTests.tokens }, "\(acked)")
        #expect(load.int("covered_at_kill") >= IntentDurabilityTests.killAfter, "\(load)")
        #expect(
            load.int("covered_at_kill") < IntentDurabilityTests.tokens,
            "the fan-out had finished before the SIGKILL: nothing was left to resume (make the mock slower): \(load)")
        #expect(verify.int("unparsed_lines") == 0 && verify.int("other_records") == 0, "\(verify)")
    }

    func printNumbers(_ name: String) {
        let restart = verify["finish_after_restart_seconds"].map { ", \($0) s after the restart" } ?? ""
        let acked = load["acked"] as? [[String: Any]] ?? []
        print(
            "intent durability [\(name)]: \(verify.int("tokens")) tokens registered in \(load["register_seconds"] ?? "?") s, "
                + "\(acked.count) updates acknowledged after \(acked.map { "\($0.int("reply_ms"))" }.joined(separator: ", ")) ms; SIGKILL after "
                + "\(load["fanout_seconds_to_kill"] ?? "?") s of fan-out with \(load.int("covered_at_kill")) tokens holding the "
                + "latest update; pushes: \(verify.int("pushes_before_kill")) before the kill, \(verify.int("pushes_after_kill")) "
                + "after; \(verify.int("covered")) tokens covered, \(verify.int("missing")) missing; \(verify.int("duplicates")) "
                + "duplicates of the latest update; failover \(verify["failover_seconds"] ?? "-") s; last token covered "
                + "\(verify["finish_after_kill_seconds"] ?? "-") s after the kill\(restart); answers not 200: "
                + "\(verify["not_ok"] ?? [:])")
    }

    /// nil after recording an issue (a process did not start, the driver failed, ...).
    static func perform(_ mode: Mode, verifyTimeout: Double) throws -> IntentCrash? {
        let binary = try E2E.liverelayBinary()
        let (python, script) = try E2E.pythonDriver("intent_durability.py")
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        environment["PYTHONUNBUFFERED"] = "1"

        let work = try E2E.makeTemporaryDirectory(prefix: "liverelay-intents-")
        var servers: [ServerProcess] = []
        var mock: ChildProcess?
        var schema: String?
        defer {
            for server in servers { server.stop() }
            mock?.stop()
            if case let .postgres(url, _) = mode, let schema { dropSchema(schema, url: url) }
            try? FileManager.default.removeItem(at: work)
        }

        // dev.app's signing key, shared by the mock and every node (the development setup uses the file it finds).
        let key = work.appendingPathComponent("apns-dev-key.p8").path
        let made = try E2E.run(
            "/usr/bin/env", ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
            environment: environment, timeout: 60)
        guard made.status == 0 else {
            Issue.record("openssl could not make the signing key:\n\(made.output)")
            return nil
        }

        let record = work.appendingPathComponent("mock-apns.jsonl").path
        let trust = work.appendingPathComponent("mock-apns.pem").path
        let child = try ChildProcess.start(
            binary,
            [
                "mock-apns", "--port", "0", "--cert-out", trust, "--app", "dev.app,LRDEVTEAM1,LRDEVKEY01,\(key)",
                "--record", record, "--latency-ms", String(mockLatencyMilliseconds), "--max-streams", String(mockMaxStreams),
                "--log-level", "warning",
            ])
        mock = child
        guard let mockLine = child.waitFor("listening on", timeout: 60), let mockPort = ServerProcess.port(in: mockLine),
            child.waitFor("certificate", timeout: 10) != nil
        else {
            Issue.record("the mock APNs did not start:\n\(child.transcript())")
            return nil
        }

        var storeArguments: [String] = []
        var durable = true
        switch mode {
        case let .sqlite(d):
            durable = d
        case let .postgres(url, d):
            durable = d
            let name = "lr_intents_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            schema = name
            storeArguments = [
                "--store", "postgres", "--postgres-url", url + (url.contains("?") ? "&" : "?") + "schema=\(name)",
                "--intent-lease-ms", String(IntentDurabilityTests.leaseMilliseconds),
            ]
        }
        let arguments =
            ["--apns-endpoint", "127.0.0.1:\(mockPort)", "--apns-trust", trust] + storeArguments
            + (durable ? [] : ["--no-durable-intents"])

        /// A node on a fresh data directory holding the shared key; retried when it loses the race for its port.
        func startNode(_ name: String) throws -> (server: ServerProcess, port: Int, dataDir: URL)? {
            var failures: [String] = []
            for attempt in 0..<3 {
                let dataDir = work.appendingPathComponent("\(name)-\(attempt)")
                try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true)
                try FileManager.default.copyItem(atPath: key, toPath: dataDir.appendingPathComponent("apns-dev-key.p8").path)
                let server = try ServerProcess.start(binary: binary, dataDir: dataDir, extraArguments: arguments)
                servers.append(server)
                if let ready = server.waitUntilListening(timeout: 60) { return (server, ready.port, dataDir) }
                let stillRunning = server.isRunning
                server.stop()
                failures.append(server.transcript())
                if stillRunning { break }  // hung rather than lost the port race: do not retry
            }
            Issue.record("`liverelay serve` (\(name)) did not start listening:\n\(failures.joined(separator: "\n---\n"))")
            return nil
        }

        guard let (server, port, dataDir) = try startNode("node-a") else { return nil }
        var nodeB: ServerProcess?
        var nodeBPort: Int?
        var nodeBDataDir: URL?
        if case .postgres = mode {
            guard let b = try startNode("node-b") else { return nil }
            (nodeB, nodeBPort, nodeBDataDir) = (b.server, b.port, b.dataDir)
        }
        guard let apiKey = server.apiKey() else {
            Issue.record("`liverelay serve` printed no `export LIVERELAY_API_KEY=...` line.\n\(server.transcript())")
            return nil
        }
        var storeName = "SQLite store"
        if case .postgres = mode { storeName = "PostgreSQL store" }
        guard server.transcript().contains(storeName) else {
            Issue.record("the server does not run on the \(storeName):\n\(server.transcript())")
            return nil
        }

        let state = work.appendingPathComponent("intent-state.json").path
        let common = ["--state", state, "--record", record]
        let loaded = try E2E.run(
            python,
            [
                script, "load", "--port", String(port), "--api-key", apiKey,
                "--ca", dataDir.appendingPathComponent("cert.pem").path, "--kill-pid", String(server.process.processIdentifier),
                "--tokens", String(IntentDurabilityTests.tokens), "--updates", "2",
                "--kill-after", String(IntentDurabilityTests.killAfter), "--fanout-timeout", "90", "--timeout", "30",
            ] + common,
            environment: environment, timeout: 240)
        let nodeBAtKill = nodeB?.transcript() ?? ""
        let exitDeadline = Date().addingTimeInterval(10)
        while server.isRunning, Date() < exitDeadline { usleep(10_000) }
        guard !loaded.timedOut, let load = CrashRun.parseResult(loaded.output) else {
            Issue.record(
                "intent_durability.py load failed (exit \(loaded.status), timed out: \(loaded.timedOut)):\n\(loaded.output)\n--- server:\n\(server.transcript())"
            )
            return nil
        }
        guard loaded.status == 0, load["killed"] as? Bool == true, !server.isRunning else {
            Issue.record(
                "intent_durability.py load did not reach the kill (exit \(loaded.status)): \(load)\n--- server:\n\(server.transcript())")
            return nil
        }
        #expect(
            server.process.terminationReason == .uncaughtSignal && server.process.terminationStatus == SIGKILL,
            "the server exited with \(server.process.terminationStatus), not SIGKILL\n\(server.transcript())")

        // SQLite: the same data directory again. PostgreSQL: node B is already running.
        var restartedAt: Int64 = 0
        var resumer: ServerProcess
        var resumerPort = nodeBPort
        var resumerDataDir = nodeBDataDir ?? dataDir
        if let nodeB {
            resumer = nodeB
        } else {
            restartedAt = Int64(Date().timeIntervalSince1970 * 1000)
            var restarted: ServerProcess?
            var failures: [String] = []
            for _ in 0..<3 where restarted == nil {
                let candidate = try ServerProcess.start(binary: binary, dataDir: dataDir, extraArguments: arguments)
                servers.append(candidate)
                if let ready = candidate.waitUntilListening(timeout: 60) {
                    restarted = candidate
                    resumerPort = ready.port
                    resumerDataDir = dataDir
                } else {
                    let stillRunning = candidate.isRunning
                    candidate.stop()
                    failures.append(candidate.transcript())
                    if stillRunning { break }
                }
            }
            guard let restarted else {
                Issue.record("`liverelay serve` did not come back on the crashed data directory:\n\(failures.joined(separator: "\n---\n"))")
                return nil
            }
            #expect(restarted.apiKey() == nil, "the restart minted a new API key: the data directory was not reused")
            resumer = restarted
        }

        let verified = try E2E.run(
            python,
            [script, "verify", "--timeout", String(verifyTimeout), "--restarted-at", String(restartedAt)] + common,
            environment: environment, timeout: verifyTimeout + 120)
        guard !verified.timedOut, let verify = CrashRun.parseResult(verified.output) else {
            Issue.record(
                "intent_durability.py verify failed (exit \(verified.status), timed out: \(verified.timedOut)):\n\(verified.output)\n--- server:\n\(resumer.transcript())"
            )
            return nil
        }
        #expect(resumer.isRunning, "the server that was to finish the work exited:\n\(resumer.transcript())")
        var settled: [Int64: Int]?
        if durable, let resumerPort {
            let acked = (load["acked"] as? [[String: Any]] ?? []).map { Int64($0.int("timestamp")) }
            settled = try settledEvents(
                binary: binary, port: resumerPort, apiKey: resumer.apiKey() ?? apiKey,
                ca: resumerDataDir.appendingPathComponent("cert.pem").path, until: Set(acked))
        }
        return IntentCrash(
            load: load, verify: verify, verifyStatus: verified.status, restartedTranscript: resumer.transcript(),
            resumedBeforeKill: nodeBAtKill.contains("resuming dispatch intents"), settledEvents: settled)
    }

    /// dev.app's CALL_SETTLED events by call timestamp, read with `liverelay events tail` once every call of
    /// `until` has one (or after 60 s), then once more 2 s later, so that a late duplicate shows.
    static func settledEvents(binary: URL, port: Int, apiKey: String, ca: String, until: Set<Int64>) throws -> [Int64: Int] {
        func read() throws -> [Int64: Int] {
            let tail = try E2E.run(
                binary.path, ["events", "tail", "--app", "dev.app", "--port", String(port), "--ca-file", ca, "--page-size", "1000"],
                environment: ["LIVERELAY_API_KEY": apiKey], timeout: 60)
            var counts: [Int64: Int] = [:]
            for line in tail.output.split(separator: "\n") {
                guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    event["kind"] as? String == "EVENT_KIND_CALL_SETTLED", let timestamp = event["call_timestamp"] as? Int
                else { continue }
                counts[Int64(timestamp), default: 0] += 1
            }
            return counts
        }
        let deadline = Date().addingTimeInterval(60)
        var counts = try read()
        while !until.isSubset(of: counts.keys), Date() < deadline {
            usleep(250_000)
            counts = try read()
        }
        usleep(2_000_000)
        return try read()
    }

    /// Best effort: the throwaway server is removed at the end anyway.
    static func dropSchema(_ schema: String, url: String) {
        _ = try? E2E.run(
            "/usr/bin/env", ["psql", url, "-q", "-c", "DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"],
            environment: ProcessInfo.processInfo.environment, timeout: 60)
    }
}

/// A value one test measures and a later one reads.
final class Measured: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Double?

    func set(_ newValue: Double) {
        lock.lock()
        value = newValue
        lock.unlock()
    }

    func get() -> Double? {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}
