import Foundation

/// The Python that runs the tests' Python peers and drivers: one with the `liverelay`
/// package (clients/python) installed, the same client the package's own suite tests.
///
/// `LIVERELAY_PYTHON` when set; otherwise the virtual environment that
/// `bash clients/python/scripts/test.sh` makes (clients/python/.test-venvs/protobuf-newest),
/// which scripts/test.sh runs before `swift test`. Missing, or without the package, it is
/// an error saying how to get one: the tests that need it fail rather than skip.
public enum LiveRelayPython {
    /// The repository root: this file is Tests/Support/LiveRelayTestSupport/LiveRelayPython.swift.
    public static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The Python client package's directory, clients/python.
    public static var packageDirectory: URL { repositoryRoot.appendingPathComponent("clients/python") }

    /// The path of the Python executable; throws ``TestFailure`` saying what to do when there is none.
    public static func executable() throws -> String {
        if let problem = lookup.problem { throw TestFailure(problem) }
        return lookup.path
    }

    /// Looked up once per test process: the path, or why there is no usable one.
    private static let lookup: (path: String, problem: String?) = find()

    private static let remedy =
        "run `bash clients/python/scripts/test.sh` (it creates clients/python/.test-venvs/protobuf-newest with the "
        + "package installed) or set LIVERELAY_PYTHON to a python3 that can `import liverelay`"

    private static func find() -> (path: String, problem: String?) {
        let path: String
        let origin: String
        if let explicit = ProcessInfo.processInfo.environment["LIVERELAY_PYTHON"], !explicit.isEmpty {
            path = explicit
            origin = "LIVERELAY_PYTHON=\(explicit)"
        } else {
            path = packageDirectory.appendingPathComponent(".test-venvs/protobuf-newest/bin/python").path
            origin = path
        }
        guard FileManager.default.isExecutableFile(atPath: path) else {
            return (path, "no Python with the liverelay package: \(origin) is not an executable; \(remedy)")
        }
        // The package must import: a virtual environment half made, or a LIVERELAY_PYTHON without it, says so here.
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: path)
        probe.arguments = ["-c", "import liverelay"]
        probe.standardInput = FileHandle.nullDevice
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        do {
            try ChildProcesses.start(probe)
            probe.waitUntilExit()
        } catch {
            return (path, "\(origin) could not be started (\(error)); \(remedy)")
        }
        guard probe.terminationStatus == 0 else {
            return (path, "\(origin) cannot `import liverelay`; \(remedy)")
        }
        return (path, nil)
    }
}
