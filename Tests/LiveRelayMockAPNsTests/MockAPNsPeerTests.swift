// The mock against clients we did not write: aioapns (PyPI; HTTP/2 by the `h2`
// package, ES256 by PyJWT/cryptography) and h2load (Debian's nghttp2-client).
// scripts/setup.sh installs both; a missing one fails its test with that hint
// rather than skipping, so a green run always means the peers were exercised.

import Foundation
import LiveRelayAPNs
import LiveRelayTestSupport
import NIOConcurrencyHelpers
import NIOPosix
import Testing

@testable import LiveRelayMockAPNs

@Suite("MockAPNsServer against independent peers", .serialized)
struct MockAPNsPeerTests {
    @Test(
        "aioapns gets the answers APNs would give: 200, 400 BadDeviceToken, 410, 403 for a wrong key",
        .timeLimit(.minutes(3)))
    func aioapns() async throws {
        let directory = try PeerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("key.p8")
        let wrongKeyFile = directory.appendingPathComponent("wrong.p8")
        let caFile = directory.appendingPathComponent("ca.pem")
        try Data(Fixture.key.pkcs8PEM.utf8).write(to: keyFile)
        // Same key id, different key: a forged token, which must fail the signature check.
        try Data(APNsSigningKey.generate(keyID: Fixture.keyID, teamID: Fixture.teamID).pkcs8PEM.utf8).write(to: wrongKeyFile)
        let dead = String(repeating: "0f", count: 32)

        var configuration = MockAPNsConfiguration(apps: [Fixture.app])
        configuration.unregisteredTokens = [dead: 1_700_000_000_000]
        let server = try await MockAPNsServer.start(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton)
        try Data(server.certificatePEM.utf8).write(to: caFile)
        let result: PeerProcess.Result
        do {
            result = try await PeerProcess.run(
                "python3",
                [
                    PeerProcess.repositoryRoot().appendingPathComponent("Tests/APNsPeers/aioapns_peer.py").path,
                    "--host", "127.0.0.1", "--port", String(server.port), "--ca", caFile.path,
                    "--key-file", keyFile.path, "--wrong-key-file", wrongKeyFile.path,
                    "--key-id", Fixture.keyID, "--team-id", Fixture.teamID, "--bundle-id", Fixture.bundleID,
                    "--token", Fixture.token, "--unregistered-token", dead,
                ], timeout: 120)
        } catch {
            try await server.shutdown()
            throw error
        }
        try await server.shutdown()

        #expect(!result.output.contains("No module named"), "aioapns is missing: run scripts/setup.sh\n\(result.output)")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.lastLine == "8 passed, 0 failed", "\(result.output)")
        let records = server.received
        let delivered = records.filter { $0.status == 200 }
        #expect(delivered.count == 202)
        // What aioapns put on the wire is what APNs expects of a Live Activity push.
        #expect(
            delivered.allSatisfy {
                $0.header("apns-push-type") == "liveactivity" && $0.header("apns-topic") == Fixture.topic
                    && $0.header("authorization")?.hasPrefix("bearer ") == true && $0.method == "POST"
            })
        #expect(records.contains { $0.status == 403 && $0.reason == "InvalidProviderToken" })
        #expect(records.contains { $0.status == 410 && $0.deviceToken == dead })
    }

    @Test("h2load's POSTs over TLS are all answered 200 with a valid JWT", .timeLimit(.minutes(3)))
    func h2load() async throws {
        let directory = try PeerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let bodyFile = directory.appendingPathComponent("body.json")
        try Data(Fixture.updateBody.utf8).write(to: bodyFile)
        let server = try await MockAPNsServer.start(
            configuration: MockAPNsConfiguration(apps: [Fixture.app]),
            group: MultiThreadedEventLoopGroup.singleton)
        let requests = 2000
        let result: PeerProcess.Result
        do {
            result = try await PeerProcess.run(
                "h2load",
                [
                    "-n", String(requests), "-c", "4", "-m", "50", "-d", bodyFile.path,
                    "-H", "authorization: bearer " + Fixture.jwt(issuedAt: Int64(Date().timeIntervalSince1970)),
                    "-H", "apns-topic: " + Fixture.topic, "-H", "apns-push-type: liveactivity", "-H", "apns-priority: 10",
                    "https://127.0.0.1:\(server.port)/3/device/" + Fixture.token,
                ], timeout: 120)
        } catch {
            try await server.shutdown()
            throw error
        }
        try await server.shutdown()

        #expect(result.status == 0, "h2load failed (scripts/setup.sh installs nghttp2-client):\n\(result.output)")
        #expect(result.output.contains("status codes: \(requests) 2xx, 0 3xx, 0 4xx, 0 5xx"), "\(result.output)")
        #expect(result.output.contains("\(requests) succeeded, 0 failed, 0 errored"), "\(result.output)")
        #expect(server.counters.responsesByStatus == [200: requests])
        #expect(server.counters.connectionsAccepted == 4)
        #expect(server.received.allSatisfy { $0.bodyText == Fixture.updateBody })
    }
}

/// Runs a peer program to completion with a deadline; stdout and stderr merged.
enum PeerProcess {
    struct Result {
        var status: Int32
        var output: String
        var lastLine: String {
            output.split(separator: "\n").last.map { String($0).trimmingCharacters(in: .whitespaces) } ?? ""
        }
    }

    struct TimedOut: Error, CustomStringConvertible {
        var description: String
    }

    /// The package root: this file is Tests/LiveRelayMockAPNsTests/MockAPNsPeerTests.swift.
    static func repositoryRoot(file: String = #filePath) -> URL {
        URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("mock-apns-peer-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// `program` is looked up on PATH (through /usr/bin/env). Killed after `timeout` seconds.
    static func run(_ program: String, _ arguments: [String], timeout: Double) async throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [program] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        environment["PYTHONUNBUFFERED"] = "1"
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        let output = NIOLockedValueBox(Data())
        let readAll = DispatchSemaphore(value: 0)
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        let pipe = try ChildProcesses.start(process, output: .combined).output!
        DispatchQueue.global().async {
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            output.withLockedValue { $0 = data }
            readAll.signal()
        }
        let finished = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: exited.wait(timeout: .now() + timeout) == .success) }
        }
        if !finished {
            process.terminate()
            process.waitUntilExit()
        }
        // EOF comes once the child (and anything it started) has closed the pipe.
        let drained = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: readAll.wait(timeout: .now() + 10) == .success) }
        }
        let text = drained ? String(decoding: output.withLockedValue { $0 }, as: UTF8.self) : "(output not drained)"
        if !finished {
            throw TimedOut(description: "\(program) did not finish within \(timeout) s:\n" + text)
        }
        return Result(status: process.terminationStatus, output: text)
    }
}
