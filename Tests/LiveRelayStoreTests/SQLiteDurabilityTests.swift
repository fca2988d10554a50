import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import LiveRelayStoreSQLite
import LiveRelayTestSupport
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every acknowledged write survives a SIGKILL: a process is SIGKILLed while
/// RegisterToken calls are in flight, the store is reopened, and every
/// acknowledged token is there.
///
/// The process is `sqlite-crash-helper` (Tests/Support/SQLiteCrashHelper):
/// it keeps 64 RegisterToken applies in flight on a SQLiteActivityStore and
/// prints each token only after its future succeeded (the point at which the
/// server would acknowledge it). Everything it printed before the kill is in
/// the pipe, so the test knows exactly which tokens were acknowledged.
///
/// Once per durability/checkpoint mode of the helper: the default (pipelined
/// fsync, background checkpoints), synchronous=FULL, no checkpoint at all (the
/// kill comes between commit and checkpoint: everything is only in the WAL),
/// and tiny WAL limits (checkpoints and WAL restarts all the time).
@Suite(.serialized) struct SQLiteDurabilityTests {
    static let appID = "crash.app"

    @Test(.timeLimit(.minutes(3)), arguments: ["default", "full", "no-checkpoint", "busy-checkpoint"])
    func everyAcknowledgedTokenSurvivesSIGKILL(mode: String) async throws {
        let helper = try Self.helperBinary()
        let directory = try makeTemporaryDirectory("liverelay-sqlite-crash-")
        defer { removeDirectory(directory) }
        let path = directory + "/liverelay.sqlite3"

        var acknowledged: [String] = []
        // Twice on the same file: the second run starts from a recovered, crashed WAL.
        for (round, first) in [0, 1_000_000].enumerated() {
            // Its reads and waits block: on a thread of their own, not one the async tests share.
            let run = try await onThread {
                try Self.runAndKill(helper: helper, arguments: [path, "64", String(first), mode], afterAcknowledgements: 3000)
            }
            #expect(run.killedBySIGKILL, "\(mode) round \(round): the helper was not killed by SIGKILL: \(run.stderr)")
            #expect(run.acknowledged.count >= 3000, "round \(round): \(run.acknowledged.count) acknowledged; stderr: \(run.stderr)")
            acknowledged += run.acknowledged
            if mode == "no-checkpoint" {
                // The scenario really is "killed before any checkpoint": the acknowledged tokens are in the WAL.
                var info = stat()
                #expect(stat(path + "-wal", &info) == 0 && info.st_size > 1_000_000, "round \(round): WAL of \(info.st_size) bytes")
            }

            let store = try SQLiteActivityStore(path: path)
            let present = try await store.pushToStartTokens(
                appID: Self.appID, attributesType: "CrashAttributes", on: StoreBehaviourSuite.group.any()
            ).get()
            try await store.close()
            let presentSet = Set(present.map(\.hex))
            let missing = acknowledged.filter { !presentSet.contains($0) }
            #expect(missing.count == 0, "\(mode) round \(round): \(missing.count) acknowledged tokens lost, e.g. \(missing.prefix(3))")
            #expect(presentSet.count >= acknowledged.count)
        }
    }

    struct Run {
        var acknowledged: [String]
        var killedBySIGKILL: Bool
        var stderr: String
    }

    /// Starts the helper, reads its acknowledgements until `count`, SIGKILLs it
    /// mid-stream, then drains what it printed before dying.
    static func runAndKill(helper: String, arguments: [String], afterAcknowledgements count: Int) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: helper)
        process.arguments = arguments
        let pipes = try ChildProcesses.start(process, output: .separate)
        let (out, err) = (pipes.output!, pipes.error!)
        try? out.fileHandleForWriting.close()
        try? err.fileHandleForWriting.close()

        let fd = out.fileHandleForReading.fileDescriptor
        var pending: [UInt8] = []
        var lines: [String] = []
        var killed = false
        let deadline = Date().addingTimeInterval(60)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let ackCount = lines.count - (lines.first == "ready" ? 1 : 0)
            if !killed && (ackCount >= count || Date() > deadline) {
                kill(process.processIdentifier, SIGKILL)
                killed = true
            }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 1000)
            if ready == 0 { continue }
            if ready < 0 { if errno == EINTR { continue } else { break } }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 { if errno == EINTR { continue } else { break } }
            if n == 0 { break }  // EOF: the helper is gone and everything it wrote has been read
            pending += buffer[0..<n]
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: pending[..<newline], as: UTF8.self))
                pending.removeSubrange(...newline)
            }
        }
        if !killed { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return Run(
            acknowledged: lines.filter { $0 != "ready" },
            killedBySIGKILL: process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL,
            stderr: stderr)
    }

    /// `sqlite-crash-helper` next to the test bundle (.build/<config>/).
    static func helperBinary() throws -> String {
        var directories: [String] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append((exe as NSString).deletingLastPathComponent)
        }
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent().path)
        directories.append(Bundle.main.bundleURL.path)
        for directory in directories {
            var d = directory
            for _ in 0..<4 {
                let candidate = d + "/sqlite-crash-helper"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                d = (d as NSString).deletingLastPathComponent
            }
        }
        throw SQLiteError(code: 1, message: "sqlite-crash-helper not found near \(directories)")
    }
}
