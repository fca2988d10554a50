// What the end-to-end suites share: the built `liverelay` binary, `liverelay serve` and other
// child processes with their output collected, and bounded waits for them.

import Foundation
import LiveRelayTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum E2E {
    /// SIGTERM, then SIGKILL if the process has not exited within 10 s. Always reaps it.
    static func stop(_ process: Process) {
        if process.isRunning {
            process.terminate()
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning, Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The package root: this file is Tests/EndToEndTests/EndToEndSupport.swift.
    static func repositoryRoot(file: String = #filePath) -> URL {
        URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// A driver of the durability tests (clients/python/tests/durability), written with the `liverelay`
    /// Python package, and the Python to run it with (``LiveRelayPython``: LIVERELAY_PYTHON, or the
    /// virtual environment of clients/python/scripts/test.sh). Throws, saying how to get one, without it.
    static func pythonDriver(_ name: String) throws -> (python: String, script: String) {
        let python = try LiveRelayPython.executable()
        return (python, LiveRelayPython.packageDirectory.appendingPathComponent("tests/durability/\(name)").path)
    }

    /// The `liverelay` executable that `swift build` put next to the test bundle (.build/<config>/liverelay).
    /// LIVERELAY_BINARY overrides the search.
    static func liverelayBinary() throws -> URL {
        let fm = FileManager.default
        if let explicit = ProcessInfo.processInfo.environment["LIVERELAY_BINARY"], !explicit.isEmpty {
            guard fm.isExecutableFile(atPath: explicit) else {
                throw Failure(description: "LIVERELAY_BINARY=\(explicit) is not an executable file")
            }
            return URL(fileURLWithPath: explicit)
        }
        var directories: [URL] = []
        // The running test process (LiveRelayPackageTests.xctest, or the swift-testing runner) and the bundle.
        if let exe = try? fm.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        if let argument0 = CommandLine.arguments.first, argument0.contains("/") {
            directories.append(URL(fileURLWithPath: argument0).resolvingSymlinksInPath().deletingLastPathComponent())
        }
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
        directories.append(Bundle.main.bundleURL)
        // On macOS the bundle is .build/<config>/X.xctest/Contents/MacOS/X: walk up a few levels.
        var candidates: [URL] = []
        for directory in directories {
            var d = directory.resolvingSymlinksInPath()
            for _ in 0..<4 {
                let candidate = d.appendingPathComponent("liverelay")
                if !candidates.contains(candidate) { candidates.append(candidate) }
                d = d.deletingLastPathComponent()
            }
        }
        for candidate in candidates where fm.isExecutableFile(atPath: candidate.path) {
            var isDirectory: ObjCBool = false
            if fm.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                return candidate
            }
        }
        throw Failure(
            description: """
                the `liverelay` executable was not found next to the test bundle; looked at:
                \(candidates.map(\.path).joined(separator: "\n"))
                Build it first (`swift build --product liverelay`, same --scratch-path and configuration), \
                or set LIVERELAY_BINARY.
                """)
    }

    static func makeTemporaryDirectory(prefix: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent(prefix + UUID().uuidString.prefix(8).lowercased())
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A port that was free a moment ago (bound to port 0 on 127.0.0.1, then released).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw Failure(description: "bind() failed: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw Failure(description: "getsockname() failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    struct RunResult {
        let status: Int32
        let output: String
        let timedOut: Bool
    }

    /// Runs a program to completion (or kills it after `timeout` seconds); stdout and stderr merged.
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String],
        timeout: TimeInterval
    ) throws -> RunResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let capture = OutputCapture()
        process.standardInput = FileHandle.nullDevice
        let pipe = try ChildProcesses.start(process, output: .combined).output!
        let reader = capture.follow(pipe)
        let deadline = Date().addingTimeInterval(timeout)
        var timedOut = false
        while process.isRunning {
            if Date() > deadline {
                timedOut = true
                kill(process.processIdentifier, SIGKILL)
                break
            }
            usleep(20_000)
        }
        process.waitUntilExit()
        // Let the reader drain what is left in the pipe (bounded).
        _ = reader.wait(timeout: 5)
        return RunResult(status: process.terminationStatus, output: capture.text(), timedOut: timedOut)
    }
}

/// Output collected from a child process's pipe by a thread of its own.
///
/// A thread doing blocking reads until end of file, not a `readabilityHandler`:
/// Foundation on Linux watches a handler's descriptor with a dispatch source,
/// and a pipe closed (its FileHandle released) while the source still watches
/// it crashes libdispatch's event loop for the whole test process. The thread
/// holds the pipe until the child's end is closed, so nothing is closed under it.
final class OutputCapture: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()

    /// Ends when the pipe reaches end of file.
    final class Reader: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        fileprivate func finish() { done.signal() }
        /// Whether the pipe reached end of file within `timeout` seconds.
        func wait(timeout: TimeInterval) -> Bool { done.wait(timeout: .now() + timeout) == .success }
    }

    /// Reads `pipe` into this capture on a new thread until end of file; call after the process started.
    @discardableResult
    func follow(_ pipe: Pipe) -> Reader {
        let reader = Reader()
        let thread = Thread {
            let handle = pipe.fileHandleForReading
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                self.append(chunk)
            }
            reader.finish()
        }
        thread.start()
        return reader
    }

    func append(_ chunk: Data) {
        lock.lock()
        data.append(chunk)
        lock.unlock()
    }

    func text() -> String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: data, as: UTF8.self)
    }
}

/// `liverelay serve` as a child process.
final class ServerProcess {
    let process: Process
    let requestedPort: Int
    private let stdout = OutputCapture()
    private let stderr = OutputCapture()

    private init(process: Process, requestedPort: Int) {
        self.process = process
        self.requestedPort = requestedPort
    }

    /// - Parameter extraArguments: appended to `serve`'s arguments (for example `--store memory`).
    /// `--port 0`: the port is the one the "listening on" line names. A port picked free here and
    /// passed in could be taken meanwhile by the server's own in-process mock APNs (port 0 too).
    static func start(binary: URL, dataDir: URL, extraArguments: [String] = []) throws -> ServerProcess {
        try launch(
            binary: binary, arguments: ["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir.path] + extraArguments)
    }

    /// A `liverelay mock-apns` of its own process on a free port that knows the
    /// apps given as `bundle,TEAM,KEYID,KEYFILE` (dev.app's key file in the
    /// tests), writing its certificate to `certificate` and every push to
    /// `record`; returns it with its port once it listens.
    static func mockAPNs(binary: URL, apps: [String], certificate: String, record: String) throws -> (ServerProcess, Int) {
        let mock = try launch(
            binary: binary,
            arguments: ["mock-apns", "--port", "0", "--cert-out", certificate, "--record", record] + apps.flatMap { ["--app", $0] })
        guard let port = mock.waitUntilListening(timeout: 60)?.port else {
            mock.stop()
            throw E2E.Failure(description: "the mock APNs did not start:\n\(mock.transcript())")
        }
        return (mock, port)
    }

    /// `liverelay` with any arguments (`serve --config FILE`, `mock-apns ...`); `requestedPort` is what
    /// ``waitUntilListening(timeout:)`` reports when the line names no port.
    static func launch(binary: URL, arguments: [String], requestedPort: Int = 0) throws -> ServerProcess {
        let port = requestedPort
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let server = ServerProcess(process: process, requestedPort: port)
        let pipes = try ChildProcesses.start(process, output: .separate)
        let (out, err) = (pipes.output!, pipes.error!)
        server.stdout.follow(out)
        server.stderr.follow(err)
        return server
    }

    var isRunning: Bool { process.isRunning }

    func transcript() -> String {
        "stdout:\n\(stdout.text())\nstderr:\n\(stderr.text())"
    }

    func stderrText() -> String { stderr.text() }

    /// Waits for a line containing "listening on" (stdout or stderr); returns the port it names
    /// (or the requested one), nil after `timeout` seconds or when the server exits first.
    func waitUntilListening(timeout: TimeInterval) -> (port: Int, line: String)? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            for text in [stdout.text(), stderr.text()] {
                for line in text.split(separator: "\n") where line.lowercased().contains("listening on") {
                    return (Self.port(in: String(line)) ?? requestedPort, String(line))
                }
            }
            if !process.isRunning { return nil }
            usleep(50_000)
        }
        return nil
    }

    /// The port of the last `host:port` in a line, if it is not 0.
    static func port(in line: String) -> Int? {
        let tokens = line.split(whereSeparator: { $0 == " " || $0 == "\"" || $0 == "," })
        for token in tokens.reversed() {
            if let colon = token.lastIndex(of: ":"),
                let port = Int(
                    token[token.index(after: colon)...]
                        .trimmingCharacters(in: .punctuationCharacters)), port > 0, port < 65536
            {
                return port
            }
        }
        return nil
    }

    /// The key from the `export LIVERELAY_API_KEY=...` line printed at first start.
    func apiKey() -> String? {
        for line in stdout.text().split(separator: "\n") + stderr.text().split(separator: "\n") {
            guard let range = line.range(of: "LIVERELAY_API_KEY=") else { continue }
            var key = String(line[range.upperBound...]).trimmingCharacters(in: .whitespaces)
            if key.count >= 2, let first = key.first, first == "\"" || first == "'", key.last == first {
                key = String(key.dropFirst().dropLast())
            }
            if !key.isEmpty { return key }
        }
        return nil
    }

    /// SIGTERM, then SIGKILL if it has not exited within 10 s. Always reaps the process.
    func stop() { E2E.stop(process) }
}
