import Foundation
import LiveRelayTestSupport

/// Runs the external tools the contract and interop tests need (protoc, python3).
/// A missing tool is an error with a clear message, never a skipped test: CI installs them.
enum ExternalTools {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The package root, found from this file's path.
    static let repoRoot: URL = {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) {
            precondition(dir.path != "/", "Package.swift not found above \(#filePath)")
            dir.deleteLastPathComponent()
        }
        return dir
    }()

    static var protosDir: URL { repoRoot.appendingPathComponent("Protos") }

    static let installHint = [
        "protoc": "install Debian's protobuf-compiler (apt-get install protobuf-compiler)",
        "python3": "install python3 and the Python protobuf package (pip install protobuf)",
    ]

    /// Finds `tool` on PATH or throws a Failure that says how to install it.
    static func locate(_ tool: String) throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(dir)).appendingPathComponent(tool)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw Failure(description: "\(tool) is not on PATH: \(installHint[tool] ?? "install it"). These tests never skip.")
    }

    /// Runs `tool` with `arguments`, feeding `stdin`; returns stdout. Throws with stderr on a non-zero exit.
    /// Output goes through files, so a large output cannot block the child.
    @discardableResult
    static func run(_ tool: String, _ arguments: [String], stdin: Data = Data()) throws -> Data {
        let scratch = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let inURL = scratch.appendingPathComponent("stdin")
        let outURL = scratch.appendingPathComponent("stdout")
        let errURL = scratch.appendingPathComponent("stderr")
        try stdin.write(to: inURL)
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)

        let process = Process()
        process.executableURL = try locate(tool)
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: inURL)
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        try ChildProcesses.start(process)
        process.waitUntilExit()

        let out = try Data(contentsOf: outURL)
        let err = String(decoding: try Data(contentsOf: errURL), as: UTF8.self)
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw Failure(description: "\(tool) \(arguments.joined(separator: " ")) failed (status \(process.terminationStatus)):\n\(err)")
        }
        return out
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("liverelay-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The packages the bindings cover, as directories under Protos/: the tenant
    /// API (liverelay.v1) and the admin API (liverelay.admin.v1).
    static let protoPackages = ["liverelay/v1", "liverelay/admin/v1"]

    /// The entry points of the descriptor set: liverelay.proto (which imports
    /// activity.proto) and admin.proto.
    static let contractRoots = ["liverelay/v1/liverelay.proto", "liverelay/admin/v1/admin.proto"]

    /// `protoc --descriptor_set_out --include_imports` over the contract roots in `protos`.
    static func descriptorSet(protos: URL = protosDir) throws -> [UInt8] {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("liverelay.pb")
        try run(
            "protoc",
            [
                "--descriptor_set_out=\(out.path)", "--include_imports",
                "-I", protos.path,
            ] + contractRoots)
        return [UInt8](try Data(contentsOf: out))
    }

    /// Every .proto of the contract's packages in `protos`, as paths relative to it.
    static func protoFiles(protos: URL = protosDir) throws -> [String] {
        try protoPackages.flatMap { package in
            try FileManager.default.contentsOfDirectory(atPath: protos.appendingPathComponent(package).path)
                .filter { $0.hasSuffix(".proto") }.sorted().map { "\(package)/\($0)" }
        }
    }

    /// `protoc --python_out` for every .proto of the contract's packages, into `directory`.
    static func generatePython(into directory: URL, protos: URL = protosDir) throws {
        try run("protoc", ["--python_out=\(directory.path)", "-I", protos.path] + protoFiles(protos: protos))
    }
}
