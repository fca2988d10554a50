import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import LiveRelayTestSupport
import NIOCore

/// A stored key's PEM: its body is what the secrecy checks look for.
let registryPEMBody = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgSECRETSECRETSECRET"
let registryPEM = "-----BEGIN PRIVATE KEY-----\n\(registryPEMBody)\n-----END PRIVATE KEY-----\n"

/// A key id: 12 lowercase base32 characters, distinct for each `n` below 32,768.
func registryKeyID(_ n: Int) -> String {
    let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
    return "keyidaaaa" + String([alphabet[(n >> 10) & 31], alphabet[(n >> 5) & 31], alphabet[n & 31]])
}

/// A distinct 64-hex-digit hash for each `n`.
func registryHash(_ n: Int) -> String {
    let digits = String(n, radix: 16)
    return "5ec7e7" + String(repeating: "0", count: 58 - digits.count) + digits
}

func registeredApp(_ id: String, bundle: String? = nil, enabled: Bool = true) -> RegisteredApp {
    RegisteredApp(id: id, bundleID: bundle ?? "com.example.\(id)", enabled: enabled)
}

func storedCredentials(endpoint: String = "apple") -> RegisteredCredentials {
    RegisteredCredentials(
        teamID: "TEAM123456", keyID: "KEY1234567", endpoint: endpoint, keySource: .stored(pem: registryPEM),
        trustPEM: "-----BEGIN CERTIFICATE-----\ntrust\n-----END CERTIFICATE-----\n")
}

func tenantKey(_ n: Int, apps: RegisteredAPIKey.Apps = .only(["orders"]), label: String? = "worker") -> RegisteredAPIKey {
    RegisteredAPIKey(
        keyID: registryKeyID(n), secretSHA256: registryHash(n), role: .tenant(apps: apps, methods: ["StartActivity", "Ping"]),
        label: label, createdAt: t0)
}

func adminKey(_ n: Int) -> RegisteredAPIKey {
    RegisteredAPIKey(keyID: registryKeyID(n), secretSHA256: registryHash(n), role: .admin, label: "operator", createdAt: t0)
}

/// Collects what a change stream yields, so a test can wait for a version
/// with a time limit without cancelling (and so ending) the stream.
final class VersionRecorder: Sendable {
    private actor Seen {
        var versions: [Int64] = []
        var ended = false
        func add(_ version: Int64) { versions.append(version) }
        func end() { ended = true }
    }

    private let seen = Seen()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<Int64>) {
        let seen = seen
        task = Task {
            for await version in stream { await seen.add(version) }
            await seen.end()
        }
    }

    var versions: [Int64] { get async { await seen.versions } }
    var hasEnded: Bool { get async { await seen.ended } }

    /// Waits until the stream has yielded `version` or a later one. The bound is a
    /// ceiling for a hung stream, not a timing claim: on a loaded 2-core machine the
    /// poll's task can wait seconds for a cooperative thread (a CI run once took 5 s).
    func wait(for version: Int64, within timeout: TimeAmount = .seconds(30)) async throws {
        try await eventually("version \(version) from the change stream", timeout: timeout) {
            await self.versions.contains { $0 >= version }
        }
    }

    func waitForEnd(within timeout: TimeAmount = .seconds(30)) async throws {
        try await eventually("the change stream to end", timeout: timeout) { await self.hasEnded }
    }

    func cancel() { task.cancel() }
}
