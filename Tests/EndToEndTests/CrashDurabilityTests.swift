// Every acknowledged RegisterToken survives a SIGKILL: the test kills the server while
// RegisterToken calls are in flight, restarts it, and finds every acknowledged token.
//
// The test starts the built `liverelay serve` (SQLite store, the default, in a fresh data
// directory), and runs clients/python/tests/durability/crash_durability.py `load`: 4 TLS connections with 64
// RegisterToken calls pipelined on each (update tokens, every call a new device id), recording
// each call whose OK reply arrived. At 3,000 acknowledgements the driver SIGKILLs the server
// (the pid it was given) with ~250 calls still in flight, keeps reading replies already on the
// wire, and writes what was acknowledged and what was not. The test checks the server died of
// SIGKILL, restarts `serve` on the same data directory (the API key file persists; the key was
// printed on the first start), and runs `verify`: every acknowledged token re-registered with
// the same fields must be UNCHANGED (CREATED means it was lost); every unanswered one must be
// CREATED or UNCHANGED (present or absent; the restarted server answers, so nothing is
// corrupt); and tokens never sent before must be CREATED, then UNCHANGED, so that the check
// can tell a lost token from a kept one.
//
// A second test runs the same crash with the restart on `--store memory`, where everything is
// forgotten: the same check must then report every acknowledged token lost. It proves the
// assertion of the first test fails when durability does.
//
// A SIGKILL loses what the process held, not the kernel's page cache: this proves "acknowledged
// only after the commit reached the database file (WAL)", not power-loss durability (fsync),
// which Tests/LiveRelayStoreTests cover at the store level.
//
// The driver uses the `liverelay` Python package: it runs in the Python that LiveRelayPython finds
// (LIVERELAY_PYTHON, or the virtual environment `bash clients/python/scripts/test.sh` makes).

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("SIGKILL durability of `liverelay serve`", .serialized)
struct CrashDurabilityTests {
    static let killAfter = 3000

    @Test("every acknowledged RegisterToken survives a SIGKILL of the server (SQLite)", .timeLimit(.minutes(5)))
    func acknowledgedTokensSurviveSIGKILL() throws {
        guard let run = try CrashRun.perform(restartArguments: []) else { return }
        let load = run.load, verify = run.verify

        #expect(load.int("acked") >= Self.killAfter, "only \(load.int("acked")) acknowledgements")
        #expect(load.int("in_flight_at_kill") > 0, "no call was in flight at the SIGKILL: \(load)")
        #expect(load.int("errors") == 0, "error replies before the kill: \(load["error_samples"] ?? "")")
        #expect(load.int("acked_not_created") == 0, "an acknowledged first registration was not CREATED: \(load)")

        #expect(verify.int("acked_checked") == load.int("acked"))
        #expect(
            verify.int("lost") == 0,
            "\(verify.int("lost")) of \(verify.int("acked_checked")) acknowledged tokens were lost (CREATED again after the restart), e.g. [conn, seq, result] \(verify["lost_samples"] ?? "")"
        )
        #expect(
            verify.int("acked_other") == 0,
            "acknowledged tokens came back neither UNCHANGED nor CREATED: \(verify["acked_other_samples"] ?? "")")
        #expect(verify.int("acked_unchanged") == load.int("acked"))
        #expect(verify.int("unacked_checked") == load.int("unacked"))
        #expect(
            verify.int("unacked_present") + verify.int("unacked_absent") == verify.int("unacked_checked"),
            "unanswered calls came back neither present nor absent: \(verify["unacked_other_samples"] ?? "")")
        // The check can fail: tokens never sent are CREATED after the restart, and UNCHANGED when repeated.
        #expect(verify.int("controls") > 0)
        #expect(verify.int("controls_created") == verify.int("controls"), "control tokens: \(verify)")
        #expect(verify.int("controls_unchanged_on_repeat") == verify.int("controls"), "control tokens: \(verify)")
        #expect(run.verifyStatus == 0, "crash_durability.py verify exited \(run.verifyStatus)")
        print(
            "crash durability: \(load.int("acked")) acknowledged (\(load.int("acked_after_kill")) read after the SIGKILL), "
                + "\(load.int("in_flight_at_kill")) in flight at the kill, \(load.int("unacked")) unanswered "
                + "(\(verify.int("unacked_present")) present, \(verify.int("unacked_absent")) absent after the restart); "
                + "\(verify.int("acked_unchanged")) of \(verify.int("acked_checked")) acknowledged found")
    }

    @Test(
        "control: restarted on the in-memory store, the same check reports every acknowledged token lost",
        .timeLimit(.minutes(5)))
    func checkNoticesLostTokens() throws {
        guard let run = try CrashRun.perform(restartArguments: ["--store", "memory"]) else { return }
        #expect(run.load.int("acked") >= Self.killAfter)
        #expect(run.verify.int("acked_checked") == run.load.int("acked"))
        #expect(
            run.verify.int("lost") == run.verify.int("acked_checked"),
            "the check missed lost tokens: \(run.verify)")
        #expect(run.verifyStatus != 0, "crash_durability.py verify passed although the server forgot everything")
    }
}

/// One crash: serve (SQLite) -> load + SIGKILL -> serve again on the same data directory -> verify.
struct CrashRun {
    /// What `serve` prints when it opens the SQLite store.
    static let banner = "SQLite store"

    var load: [String: Any]
    var verify: [String: Any]
    var verifyStatus: Int32
    var restartTranscript = ""

    /// nil after recording an issue (the server did not start, the driver failed, ...).
    static func perform(restartArguments: [String]) throws -> CrashRun? {
        let binary = try E2E.liverelayBinary()
        let (python, script) = try E2E.pythonDriver("crash_durability.py")
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        environment["PYTHONUNBUFFERED"] = "1"

        var directories: [URL] = []
        var servers: [ServerProcess] = []
        defer {
            for server in servers { server.stop() }
            for d in directories { try? FileManager.default.removeItem(at: d) }
        }

        // First start, on a fresh data directory: the SQLite store, a new API key.
        var first: (server: ServerProcess, port: Int, dataDir: URL)?
        var failures: [String] = []
        for _ in 0..<3 where first == nil {
            let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-crash-")
            directories.append(dataDir)
            let server = try ServerProcess.start(binary: binary, dataDir: dataDir, extraArguments: ["--store", "sqlite"])
            servers.append(server)
            if let ready = server.waitUntilListening(timeout: 60) {
                first = (server, ready.port, dataDir)
            } else {
                let stillRunning = server.isRunning
                server.stop()
                failures.append(server.transcript())
                if stillRunning { break }  // hung rather than lost the port race: do not retry
            }
        }
        guard let (server, port, dataDir) = first else {
            Issue.record("`liverelay serve` did not start listening.\n\(failures.joined(separator: "\n---\n"))")
            return nil
        }
        guard server.transcript().contains(Self.banner) else {
            Issue.record("the first server does not run on the \(Self.banner):\n\(server.transcript())")
            return nil
        }
        guard let apiKey = server.apiKey() else {
            Issue.record("`liverelay serve` printed no `export LIVERELAY_API_KEY=...` line.\n\(server.transcript())")
            return nil
        }
        let certificate = dataDir.appendingPathComponent("cert.pem").path
        let state = dataDir.appendingPathComponent("crash-state.json").path
        let common = ["--host", "127.0.0.1", "--api-key", apiKey, "--ca", certificate, "--state", state]

        // Load, and the SIGKILL at --kill-after acknowledgements (sent by the driver, which knows what is in flight).
        let pid = server.process.processIdentifier
        let loaded = try E2E.run(
            python,
            [
                script, "load", "--port", String(port), "--kill-pid", String(pid),
                "--connections", "4", "--depth", "64", "--kill-after", String(CrashDurabilityTests.killAfter),
                "--duration", "120",
            ] + common,
            environment: environment, timeout: 180
        )
        // The driver has returned: the server must be dead by its SIGKILL (not by a crash of its own, not alive).
        let exitDeadline = Date().addingTimeInterval(10)
        while server.isRunning, Date() < exitDeadline { usleep(10_000) }
        if server.isRunning {
            Issue.record("the server is still running after the driver's SIGKILL\n\(loaded.output)")
            return nil
        }
        #expect(
            server.process.terminationReason == .uncaughtSignal && server.process.terminationStatus == SIGKILL,
            "the server exited with \(server.process.terminationReason == .exit ? "status" : "signal") \(server.process.terminationStatus), not SIGKILL\n\(server.transcript())"
        )
        guard !loaded.timedOut, let load = parseResult(loaded.output) else {
            Issue.record(
                "crash_durability.py load failed (exit \(loaded.status), timed out: \(loaded.timedOut)):\n\(loaded.output)\n--- server:\n\(server.transcript())"
            )
            return nil
        }
        guard loaded.status == 0, load["killed"] as? Bool == true else {
            Issue.record(
                "crash_durability.py load did not reach the kill cleanly (exit \(loaded.status)): \(load)\n--- server:\n\(server.transcript())"
            )
            return nil
        }

        // Restart on the same data directory; the key file persists, so the same key works.
        var second: (server: ServerProcess, port: Int)?
        failures = []
        for _ in 0..<3 where second == nil {
            let restarted = try ServerProcess.start(binary: binary, dataDir: dataDir, extraArguments: restartArguments)
            servers.append(restarted)
            if let ready = restarted.waitUntilListening(timeout: 60) {
                second = (restarted, ready.port)
            } else {
                let stillRunning = restarted.isRunning
                restarted.stop()
                failures.append(restarted.transcript())
                if stillRunning { break }
            }
        }
        guard let (restarted, restartedPort) = second else {
            Issue.record("`liverelay serve` did not come back on the crashed data directory:\n\(failures.joined(separator: "\n---\n"))")
            return nil
        }
        #expect(restarted.apiKey() == nil, "the restart minted a new API key: the data directory was not reused")

        let verified = try E2E.run(
            python,
            [script, "verify", "--port", String(restartedPort)] + common,
            environment: environment, timeout: 180
        )
        guard !verified.timedOut, let verify = parseResult(verified.output) else {
            Issue.record(
                "crash_durability.py verify failed (exit \(verified.status), timed out: \(verified.timedOut)):\n\(verified.output)\n--- server:\n\(restarted.transcript())"
            )
            return nil
        }
        #expect(restarted.isRunning, "the restarted server exited during the check:\n\(restarted.transcript())")
        return CrashRun(load: load, verify: verify, verifyStatus: verified.status, restartTranscript: restarted.transcript())
    }

    /// The driver's last `RESULT {json}` line.
    static func parseResult(_ output: String) -> [String: Any]? {
        guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("RESULT ") }) else { return nil }
        let json = Data(line.dropFirst("RESULT ".count).utf8)
        return (try? JSONSerialization.jsonObject(with: json)) as? [String: Any]
    }
}

extension Dictionary where Key == String, Value == Any {
    /// A JSON number as Int; -1 when missing, so a missing field fails the comparisons above.
    func int(_ key: String) -> Int {
        (self[key] as? NSNumber)?.intValue ?? -1
    }
}
