import Foundation
import LiveRelayTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A full disk is a fault the server rides out, not one it turns into a permanent outage: on a
/// small tmpfs filled up under a running `serve` (SQLite, the embedded default), a registration is
/// answered UNAVAILABLE with reason StoreUnavailable (never INTERNAL), nothing accepted before is
/// lost, and once space is freed the same registration succeeds on the same process.
///
/// Needs to mount a tmpfs (root, as scripts/test.sh runs in CI).
@Suite(.serialized)
struct FullDiskTests {
    @Test func aFullDiskIsUnavailableAndTheServerRecoversWhenSpaceIsFreed() throws {
        guard getuid() == 0 else {
            Issue.record("mounting a small tmpfs needs root (scripts/test.sh runs as root in CI)")
            return
        }
        let binary = try E2E.liverelayBinary()
        let mountPoint = try E2E.makeTemporaryDirectory(prefix: "liverelay-full-disk")
        defer { try? FileManager.default.removeItem(at: mountPoint) }
        let mounted = try E2E.run("/bin/mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mountPoint.path], environment: [:], timeout: 30)
        try #require(mounted.status == 0, "mount: \(mounted.output)")
        defer { _ = try? E2E.run("/bin/umount", ["-l", mountPoint.path], environment: [:], timeout: 30) }
        let dataDir = mountPoint.appendingPathComponent("data")

        let server = try ServerProcess.start(binary: binary, dataDir: dataDir, extraArguments: [])
        defer { server.stop() }
        let (port, _) = try #require(server.waitUntilListening(timeout: 60), "\(server.transcript())")
        let key = try #require(server.apiKey(), "no API key printed:\n\(server.transcript())")
        let common = ["--port", String(port), "--ca-file", dataDir.path + "/cert.pem"]
        func register(_ n: Int) throws -> E2E.RunResult {
            try E2E.run(
                binary.path,
                [
                    "register-token", "--app", "dev.app", "--token", String(format: "%064x", n), "--kind", "push-to-start",
                    "--attributes-type", "DeliveryAttributes", "--device", "device-\(n)",
                ] + common, environment: ["LIVERELAY_API_KEY": key], timeout: 60)
        }
        let before = try register(1)
        #expect(before.status == 0, "\(before.output)")

        // Fill the file system to the last byte.
        let filler = mountPoint.appendingPathComponent("filler").path
        _ = try E2E.run("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=64k"], environment: [:], timeout: 60)
        var refused: E2E.RunResult?
        for n in 2..<200 {
            let result = try register(n)
            if result.status != 0 {
                refused = result
                break
            }
        }
        let full = try #require(refused, "a registration still succeeded on a full disk")
        #expect(full.status == 1 + 14, "UNAVAILABLE, not INTERNAL (\(1 + 13)): \(full.output)")
        #expect(full.output.contains("StoreUnavailable"), "\(full.output)")

        // Space again: the same process takes the registration, and what it accepted before is still there.
        try FileManager.default.removeItem(atPath: filler)
        let after = try register(10_000)
        #expect(after.status == 0, "the server did not recover once space was freed: \(after.output)\n\(server.transcript())")
        let again = try register(1)
        #expect(again.status == 0, "\(again.output)")
    }
}
