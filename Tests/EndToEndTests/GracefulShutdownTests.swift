import Foundation
import LiveRelayTestSupport
import Testing

/// The order of `serve`'s services on SIGTERM, end to end: the RPC server
/// drains first while the dispatcher, the APNs client and the store still run,
/// so a call waiting for a push that APNs has not answered yet gets its full
/// account, and only then do the others stop. In the opposite order the call
/// would come back with its push failed as ShuttingDown, or not at all.
@Suite(.serialized)
struct GracefulShutdownTests {
    @Test
    func aSIGTERMWhileAPushIsInFlightAnswersTheWaitingCallThenExitsCleanly() throws {
        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-graceful")
        defer { try? FileManager.default.removeItem(at: dataDir) }

        // A first start makes the development setup: certificate, API key, dev.app's signing key.
        let first = try ServerProcess.start(binary: binary, dataDir: dataDir)
        guard first.waitUntilListening(timeout: 60) != nil else {
            first.stop()
            Issue.record("the server did not start:\n\(first.transcript())")
            return
        }
        let key = try #require(first.apiKey(), "no API key printed:\n\(first.transcript())")
        first.stop()

        // A mock APNs of its own process that answers each push after 5 s (inside the 30 s drain),
        // long enough for the probes below on a loaded machine.
        let mock = try ChildProcess.start(
            binary,
            [
                "mock-apns", "--port", "0", "--cert-out", dataDir.path + "/mock.pem", "--latency-ms", "5000",
                "--app", "dev.app,LRDEVTEAM1,LRDEVKEY01," + dataDir.path + "/apns-dev-key.p8",
            ])
        defer { mock.stop() }
        let mockLine = try #require(mock.waitFor("listening on", timeout: 60), "mock: \(mock.transcript())")
        let mockPort = try #require(ServerProcess.port(in: mockLine), "no port in \(mockLine)")

        let server = try ServerProcess.start(
            binary: binary, dataDir: dataDir,
            extraArguments: [
                "--apns-endpoint", "127.0.0.1:\(mockPort)", "--apns-trust", dataDir.path + "/mock.pem", "--log-level", "debug",
            ])
        defer { server.stop() }
        guard let (port, _) = server.waitUntilListening(timeout: 60) else {
            Issue.record("the server did not start:\n\(server.transcript())")
            return
        }
        let common = ["--port", String(port), "--ca-file", dataDir.path + "/cert.pem"]
        let token = String(repeating: "ef", count: 32)
        let register: [String] = [
            "register-token", "--app", "dev.app", "--token", token, "--kind", "push-to-start",
            "--attributes-type", "OrderAttributes", "--device", "phone-1", "--environment", "sandbox",
        ]
        let registered = try E2E.run(binary.path, register + common, environment: ["LIVERELAY_API_KEY": key], timeout: 60)
        #expect(registered.status == 0, "\(registered.output)")

        let startArguments: [String] = [
            "start", "--app", "dev.app", "--activity", "order-1", "--attributes-type", "OrderAttributes",
            "--attributes", "{}", "--content-state", #"{"status":"placed"}"#, "--token", token,
            "--alert-title", "Order placed", "--wait-for-delivery", "--timeout", "30",
        ]
        let start = try ChildProcess.start(binary, startArguments + common, environment: ["LIVERELAY_API_KEY": key])
        defer { start.stop() }
        // The dispatcher logs the call once its push is queued: the push is then on its way to the mock.
        #expect(server.waitFor("pushes queued", timeout: 30), "\(server.transcript())")
        let opsLine = server.transcript().split(separator: "\n").first { $0.hasPrefix("ops listening on") }
        let opsPort = try #require(opsLine.flatMap { ServerProcess.port(in: String($0)) }, "\(server.transcript())")
        #expect(try rawHTTPGet(port: opsPort, path: "/readyz").hasPrefix("HTTP/1.1 200"))
        server.process.terminate()  // SIGTERM
        // The drain has begun (the waiting call holds it until its answer): a load
        // balancer's probe sees 503, from an ops port that is still up.
        var readyz = ""
        let drainSeen = Date().addingTimeInterval(4)
        repeat {
            readyz = (try? rawHTTPGet(port: opsPort, path: "/readyz")) ?? "no answer"
            if readyz.hasPrefix("HTTP/1.1 503") { break }
            usleep(10_000)
        } while Date() < drainSeen
        #expect(readyz.hasPrefix("HTTP/1.1 503") && readyz.contains("not ready: draining"), "\(readyz)")

        #expect(start.waitForExit(timeout: 30) == 0, "start: \(start.transcript())")
        let output = start.stdoutText()
        let json = output.firstIndex(of: "{").map { String(output[$0...]) } ?? ""
        let reply = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] ?? [:]
        let summary = reply["summary"] as? [String: Any] ?? [:]
        #expect(summary["delivered"] as? Int == 1, "start: \(start.transcript())")
        #expect(summary["failed"] as? Int == 0, "start: \(start.transcript())")
        #expect(summary["complete"] as? Bool == true, "start: \(start.transcript())")

        let deadline = Date().addingTimeInterval(30)
        while server.isRunning, Date() < deadline { usleep(20_000) }
        #expect(!server.isRunning, "serve did not exit after SIGTERM:\n\(server.transcript())")
        if !server.isRunning {
            #expect(server.process.terminationStatus == 0, "\(server.transcript())")
        }
        // The services stopped in the reverse of serve's list, each after the one before had finished.
        let transcript = server.transcript()
        let order = ["RPC server stopped", "dispatcher stopped", "APNs connections closed", "store closed"]
            .map { transcript.range(of: $0)?.lowerBound }
        #expect(order.allSatisfy { $0 != nil }, "\(transcript)")
        let found = order.compactMap { $0 }
        #expect(found == found.sorted(), "shutdown order \(order):\n\(transcript)")
    }
}

/// A `liverelay` subcommand as a child process, its output captured.
final class ChildProcess {
    let process: Process
    private let stdout = OutputCapture()
    private let stderr = OutputCapture()

    private init(process: Process) { self.process = process }

    static func start(_ binary: URL, _ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let child = ChildProcess(process: process)
        let pipes = try ChildProcesses.start(process, output: .separate)
        let (out, err) = (pipes.output!, pipes.error!)
        child.stdout.follow(out)
        child.stderr.follow(err)
        return child
    }

    func stdoutText() -> String { stdout.text() }

    func transcript() -> String { "stdout:\n\(stdout.text())\nstderr:\n\(stderr.text())" }

    /// The first output line containing `text`, waiting up to `timeout` seconds.
    func waitFor(_ text: String, timeout: TimeInterval) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            for output in [stdout.text(), stderr.text()] {
                if let line = output.split(separator: "\n").first(where: { $0.contains(text) }) { return String(line) }
            }
            if !process.isRunning { return nil }
            usleep(20_000)
        }
        return nil
    }

    /// The exit status, or nil if it is still running after `timeout` seconds.
    func waitForExit(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// SIGTERM, then SIGKILL if it has not exited within 10 s.
    func stop() { E2E.stop(process) }
}

extension ServerProcess {
    /// Whether a line containing `text` appears in the server's output within `timeout` seconds.
    func waitFor(_ text: String, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if transcript().contains(text) { return true }
            if !process.isRunning { return false }
            usleep(20_000)
        }
        return false
    }
}
