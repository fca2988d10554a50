import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Tests/Support/webhook_receiver.py run as a process: a real HTTPS server,
/// written with Python's standard library alone, that checks webhook
/// signatures and answers as a script says.
///
/// The certificate is the caller's (LiveRelayTLS's `SelfSignedCertificate`
/// makes one whose SANs cover localhost and 127.0.0.1); the receiver only
/// writes it to its directory. Any `python3` will do: the receiver imports
/// nothing outside the standard library. `LIVERELAY_PYTHON` is used when set.
public final class WebhookReceiver: @unchecked Sendable {
    /// One scripted answer, consumed in order; once the script is used up the receiver answers 200.
    public enum Action: Sendable, Hashable {
        case status(Int)
        /// Waits before answering: longer than a client's timeout makes a timeout.
        case delayed(seconds: Double, status: Int)
        /// Closes the connection without answering and without a TLS close_notify.
        case close

        var json: [String: Any] {
            switch self {
            case .status(let status): return ["status": status]
            case .delayed(let seconds, let status): return ["delay_s": seconds, "status": status]
            case .close: return ["close": true]
            }
        }
    }

    /// One request as the receiver logged it, before answering.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var signatureOK: Bool
        /// Nil when the connection was closed without an answer.
        public var statusSent: Int?
        public var headers: [String: String]
        /// The body's exact bytes.
        public var body: [UInt8]

        /// The header named `name`, in any case.
        public func header(_ name: String) -> String? {
            headers.first { $0.key.lowercased() == name.lowercased() }?.value
        }
    }

    public let port: Int
    /// The certificate the receiver presents: what a client must trust.
    public let certificatePEM: String
    /// Holds the certificate, key, script, log and the receiver's stderr.
    public let directory: URL
    private let process: Process
    private let stdin: Pipe
    private var scriptURL: URL { directory.appendingPathComponent("script.json") }
    private var logURL: URL { directory.appendingPathComponent("requests.jsonl") }

    public static let scriptPath = LiveRelayPython.repositoryRoot.appendingPathComponent("Tests/Support/webhook_receiver.py").path

    /// ``init(secret:script:certificatePEM:privateKeyPEM:)`` on a thread of its own: starting
    /// Python and waiting for its first line blocks, and must not hold one of the few threads
    /// that every async test of the run shares.
    public static func start(
        secret: String, script: [Action] = [], certificatePEM: String, privateKeyPEM: String
    ) async throws -> WebhookReceiver {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        try WebhookReceiver(secret: secret, script: script, certificatePEM: certificatePEM, privateKeyPEM: privateKeyPEM)
                    })
            }
        }
    }

    /// Starts a receiver on 127.0.0.1 and a free port, checking signatures against `secret`.
    public init(secret: String, script: [Action] = [], certificatePEM: String, privateKeyPEM: String) throws {
        let directory = try temporaryDirectory(prefix: "liverelay-webhook-receiver-")
        let certificate = directory.appendingPathComponent("cert.pem")
        let key = directory.appendingPathComponent("key.pem")
        let stderrURL = directory.appendingPathComponent("stderr.txt")
        try certificatePEM.write(to: certificate, atomically: true, encoding: .utf8)
        try privateKeyPEM.write(to: key, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key.path)
        try Data().write(to: stderrURL)
        try Data().write(to: directory.appendingPathComponent("requests.jsonl"))
        try Self.write(script, to: directory.appendingPathComponent("script.json"))
        let secretURL = directory.appendingPathComponent("secret.txt")
        try Data(secret.utf8).write(to: secretURL, options: .atomic)

        let process = Process()
        let arguments = [
            Self.scriptPath, "--cert", certificate.path, "--key", key.path, "--secret", "@" + secretURL.path, "--port", "0",
            "--log", directory.appendingPathComponent("requests.jsonl").path,
            "--script", directory.appendingPathComponent("script.json").path,
        ]
        if let python = ProcessInfo.processInfo.environment["LIVERELAY_PYTHON"], !python.isEmpty {
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3"] + arguments
        }
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        let pipes = try ChildProcesses.start(process, input: true, output: .stdout)
        let (stdin, stdout) = (pipes.input!, pipes.output!)

        // The first line is `LISTENING <port>`; anything else, or nothing within 10 s, is a failure.
        let line = Self.readLine(stdout.fileHandleForReading.fileDescriptor, seconds: 10)
        guard let line, line.hasPrefix("LISTENING "), let port = Int(line.dropFirst("LISTENING ".count)) else {
            process.terminate()
            process.waitUntilExit()
            let stderr = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
            throw TestFailure("webhook receiver did not start (first line: \(line ?? "none")): \(stderr)")
        }
        self.port = port
        self.certificatePEM = certificatePEM
        self.directory = directory
        self.process = process
        self.stdin = stdin
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Checks the next requests' signatures against `secret` (one the server minted after the receiver started).
    public func setSecret(_ secret: String) throws {
        try Data(secret.utf8).write(to: directory.appendingPathComponent("secret.txt"), options: .atomic)
    }

    /// Replaces the script: the actions for the next requests, in order.
    public func setScript(_ actions: [Action]) throws {
        try Self.write(actions, to: scriptURL)
    }

    private static func write(_ actions: [Action], to url: URL) throws {
        let data = try JSONSerialization.data(withJSONObject: actions.map(\.json))
        // Written whole and renamed into place: the receiver never reads half a script.
        try data.write(to: url, options: .atomic)
    }

    /// Every request logged so far, oldest first.
    public func requests() throws -> [Request] {
        let text = try String(contentsOf: logURL, encoding: .utf8)
        return try text.split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let method = object["method"] as? String, let path = object["path"] as? String,
                let signatureOK = object["signature_ok"] as? Bool, let headers = object["headers"] as? [String: String],
                let encoded = object["body_base64"] as? String, let body = Data(base64Encoded: encoded)
            else { throw TestFailure("unreadable receiver log line: \(line)") }
            return Request(
                method: method, path: path, signatureOK: signatureOK, statusSent: object["status_sent"] as? Int,
                headers: headers, body: Array(body))
        }
    }

    /// Stops the receiver (closing its stdin, which it exits on, then terminating it). Idempotent.
    public func stop() {
        guard process.isRunning else { return }
        try? stdin.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    /// One line from `fd`, waiting at most `seconds` in all; nil at end of file or on timeout.
    private static func readLine(_ fd: Int32, seconds: Int) -> String? {
        let deadline = Date().addingTimeInterval(TimeInterval(seconds))
        var bytes: [UInt8] = []
        while bytes.last != UInt8(ascii: "\n") {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000)) > 0 else { continue }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { return nil }
            bytes.append(byte)
        }
        return String(decoding: bytes.dropLast(), as: UTF8.self)
    }
}
