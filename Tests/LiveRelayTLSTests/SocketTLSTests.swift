import Foundation
import LiveRelayTLS
import LiveRelayTestSupport
import NIOCore
import NIOPosix
import Testing

/// The handler on real loopback sockets against independent TLS stacks: the
/// `openssl` command and Python's `ssl` module. Missing tools fail these tests.
@Suite("TLS over loopback sockets", .serialized, .timeLimit(.minutes(3)))
struct SocketTLSTests {
    private func withServer(
        _ configuration: TLSConfiguration, closeOnError: Bool = false, _ body: (TestTLSServer) throws -> Void
    ) throws {
        let server = try TestTLSServer(configuration: configuration, closeOnError: closeOnError)
        defer { server.shutdown() }
        try body(server)
    }

    private static func connectionFinished(_ log: [String]) -> Bool { log.contains("inactive") }

    @Test(arguments: [("-tls1_3", "TLSv1.3"), ("-tls1_2", "TLSv1.2")])
    func opensslClientEchoes(flag: String, version: String) throws {
        let fixtures = try TLSFixtures.get()
        try withServer(fixtures.serverConfiguration(alpn: ["h2"])) { server in
            let run = try runProcess(
                [
                    "openssl", "s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost",
                    "-CAfile", fixtures.caCertificate, "-verify_return_error", "-verify_hostname", "localhost",
                    "-alpn", "h2", flag, "-quiet",
                ], stdin: "hello over tls BYE\n")
            #expect(run.status == 0, "s_client: \(run.stderr)")
            #expect(run.stdout.contains("hello over tls BYE"))
            let log = server.log.wait(until: Self.connectionFinished)
            #expect(log.first == "handshake alpn=h2 version=\(version) peer=none")
            #expect(!log.contains { $0.hasPrefix("error") }, "\(log)")
        }
    }

    /// A TLS 1.0 or 1.1 client gets alert 70 protocol_version, not a bare close,
    /// also when the handler behind TLS closes the channel as soon as it hears
    /// of the error (as the RPC server's does).
    @Test(arguments: [("-tls1_1", false), ("-tls1_1", true), ("-tls1", true)])
    func opensslClientOfferingOnlyTLS11IsRefused(flag: String, closeOnError: Bool) throws {
        let fixtures = try TLSFixtures.get()
        try withServer(fixtures.serverConfiguration(), closeOnError: closeOnError) { server in
            // SECLEVEL=0 lets this client actually offer TLS 1.0 or 1.1, so the refusal is the server's.
            let run = try runProcess(
                [
                    "openssl", "s_client", "-connect", "127.0.0.1:\(server.port)", flag,
                    "-cipher", "DEFAULT:@SECLEVEL=0",
                ], stdin: "")
            #expect(run.status != 0)
            #expect(run.stderr.contains("alert protocol version") || run.stdout.contains("alert protocol version"), "\(run.stderr)")
            let log = server.log.wait(until: Self.connectionFinished)
            #expect(log.contains { $0.hasPrefix("error TLS handshake failed") && $0.contains("unsupported protocol") }, "\(log)")
            #expect(!log.contains { $0.hasPrefix("handshake") })
        }
    }

    @Test func plaintextToTheTLSPortIsRefusedWithACleanClose() throws {
        let fixtures = try TLSFixtures.get()
        try withServer(fixtures.serverConfiguration()) { server in
            let run = try runPythonClient(["plaintext", "--port", "\(server.port)"])
            #expect(run.status == 0, "\(run.result) \(run.stderr)")
            #expect(run.result["closedWith"] as? String == "FIN")
            let log = server.log.wait(until: Self.connectionFinished)
            #expect(log.contains { $0.hasPrefix("error TLS handshake failed") && $0.contains("http request") }, "\(log)")
        }
    }

    @Test(arguments: ["1.3", "1.2"])
    func pythonClientEchoesOneMegabyte(tlsVersion: String) throws {
        let fixtures = try TLSFixtures.get()
        try withServer(fixtures.serverConfiguration(alpn: ["h2", "http/1.1"])) { server in
            let run = try runPythonClient([
                "echo", "--port", "\(server.port)", "--tls", tlsVersion, "--cafile", fixtures.caCertificate,
                "--alpn", "http/1.1", "--size", "\(1 << 20)",
            ])
            #expect(run.status == 0, "\(run.result) \(run.stderr)")
            #expect(run.result["version"] as? String == "TLSv\(tlsVersion)")
            #expect(run.result["alpn"] as? String == "http/1.1")
            #expect(run.result["received"] as? Int == 1 << 20)
            #expect(run.result["intact"] as? Bool == true)
            #expect(run.result["closeNotifyAnswered"] as? Bool == true)
            let log = server.log.wait(until: Self.connectionFinished)
            #expect(!log.contains { $0.hasPrefix("error") }, "\(log)")
        }
    }

    @Test func aClientThatDropsTheConnectionWithoutCloseNotifyIsReportedAsUnclean() throws {
        let fixtures = try TLSFixtures.get()
        try withServer(fixtures.serverConfiguration()) { server in
            let run = try runPythonClient([
                "echo", "--port", "\(server.port)", "--cafile", fixtures.caCertificate, "--size", "1000", "--abrupt",
            ])
            #expect(run.status == 0, "\(run.result)")
            let log = server.log.wait(until: Self.connectionFinished)
            #expect(log.contains("error \(TLSError.uncleanShutdown)"), "\(log)")
        }
    }

    @Test(arguments: ["1.3", "1.2"])
    func mutualTLSAcceptsOnlyClientsWithACertificateFromTheCA(tlsVersion: String) throws {
        let fixtures = try TLSFixtures.get()
        var configuration = fixtures.serverConfiguration()
        configuration.certificateVerification = .fullVerification
        configuration.trustRoots = .pem(.file(fixtures.caCertificate))
        try withServer(configuration) { server in
            let common = ["echo", "--port", "\(server.port)", "--tls", tlsVersion, "--cafile", fixtures.caCertificate, "--size", "65536"]
            let accepted = try runPythonClient(common + ["--cert", fixtures.clientCertificate, "--key", fixtures.clientKey])
            #expect(accepted.status == 0, "\(accepted.result)")
            #expect(accepted.result["intact"] as? Bool == true)
            let first = server.log.wait(until: Self.connectionFinished)
            #expect(first.first?.contains("CN=client-1") == true, "\(first)")

            let refused = try runPythonClient(common)
            #expect(refused.status == 1)
            #expect((refused.result["error"] as? String)?.isEmpty == false)
            let log = server.log.wait { $0.filter { $0 == "inactive" }.count == 2 }
            #expect(log.contains { $0.contains("peer did not return a certificate") }, "\(log)")
        }
    }

    @Test func ourClientAndServerTalkH2OverLoopback() throws {
        let fixtures = try TLSFixtures.get()
        try withServer(fixtures.serverConfiguration(alpn: ["h2"])) { server in
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            defer { try? group.syncShutdownGracefully() }
            let payload = ByteBuffer.pattern(size: 1 << 20)
            let result = try runEchoClient(
                configuration: fixtures.clientConfiguration(alpn: ["h2"]), port: server.port, payload: payload, group: group)
            #expect(result.negotiatedProtocol == "h2")
            #expect(result.intact)
            let log = server.log.wait(until: Self.connectionFinished)
            #expect(!log.contains { $0.hasPrefix("error") }, "\(log)")
        }
    }

    @Test func ourClientTalksToOpensslServer() throws {
        let fixtures = try TLSFixtures.get()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "timeout", "30", "openssl", "s_server", "-accept", "127.0.0.1:0", "-naccept", "1",
            "-cert", fixtures.serverCertificate, "-key", fixtures.serverKey, "-alpn", "h2", "-rev",
        ]
        process.standardInput = FileHandle.nullDevice
        let output = try ChildProcesses.start(process, output: .combined).output!
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        // s_server prints "ACCEPT 127.0.0.1:<port>" once it listens: wait for that line, not a sleep.
        var seen = ""
        while !seen.contains("ACCEPT 127.0.0.1:") || !seen.hasSuffix("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw TestFailure("s_server exited: \(seen)") }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        let portText = seen.split(separator: "ACCEPT 127.0.0.1:")[1].prefix { $0.isNumber }
        let port = try #require(Int(portText))

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        // -rev answers each line reversed.
        let result = try runEchoClient(
            configuration: fixtures.clientConfiguration(alpn: ["h2"]), port: port,
            payload: ByteBuffer(string: "liverelay\n"), expected: ByteBuffer(string: "yalerevil\n"), group: group)
        #expect(result.negotiatedProtocol == "h2")
        #expect(result.intact)
    }
}
