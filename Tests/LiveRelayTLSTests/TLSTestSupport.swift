import Foundation
import LiveRelayTLS
import LiveRelayTestSupport
import NIOCore
import NIOEmbedded

// MARK: - Certificates

/// A private CA with server and client certificates, plus an unrelated ("rogue") CA and
/// a server certificate it signed, made once per test run with the `openssl` command.
/// A missing `openssl` makes every test that needs them fail, not skip.
struct TLSFixtures: Sendable {
    let directory: String
    var caCertificate: String { directory + "/ca.pem" }
    var serverCertificate: String { directory + "/server.pem" }
    var serverKey: String { directory + "/server.key" }
    var clientCertificate: String { directory + "/client.pem" }
    var clientKey: String { directory + "/client.key" }
    var rogueServerCertificate: String { directory + "/rogue-server.pem" }
    var rogueServerKey: String { directory + "/rogue-server.key" }

    static let shared: Result<TLSFixtures, Error> = Result { try make() }

    static func get() throws -> TLSFixtures { try shared.get() }

    private static func make() throws -> TLSFixtures {
        let directory = NSTemporaryDirectory() + "liverelay-tls-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let fixtures = TLSFixtures(directory: directory)
        func openssl(_ arguments: [String]) throws {
            let result = try runProcess(["openssl"] + arguments, currentDirectory: directory)
            guard result.status == 0 else {
                throw TestFailure("openssl \(arguments.joined(separator: " ")) failed: \(result.stderr)")
            }
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        for ca in ["ca", "rogue-ca"] {
            try openssl(
                ["req", "-x509"] + ec + ["-keyout", "\(ca).key", "-out", "\(ca).pem", "-days", "30", "-subj", "/CN=LiveRelay Test \(ca)"])
        }
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
            .write(toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n"
            .write(toFile: directory + "/client.ext", atomically: true, encoding: .utf8)
        let leaves: [(name: String, cn: String, ca: String, ext: String)] = [
            ("server", "localhost", "ca", "server.ext"),
            ("client", "client-1", "ca", "client.ext"),
            ("rogue-server", "localhost", "rogue-ca", "server.ext"),
        ]
        for (index, leaf) in leaves.enumerated() {
            try openssl(["req"] + ec + ["-keyout", "\(leaf.name).key", "-out", "\(leaf.name).csr", "-subj", "/CN=\(leaf.cn)/O=LiveRelay"])
            try openssl([
                "x509", "-req", "-in", "\(leaf.name).csr", "-CA", "\(leaf.ca).pem", "-CAkey", "\(leaf.ca).key",
                "-set_serial", "\(1000 + index)", "-days", "30", "-extfile", leaf.ext, "-out", "\(leaf.name).pem",
            ])
        }
        return fixtures
    }

    func serverConfiguration(alpn: [String] = []) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: .file(serverCertificate), privateKey: .file(serverKey))
        configuration.applicationProtocols = alpn
        return configuration
    }

    func clientConfiguration(alpn: [String] = [], hostname: String? = "localhost") -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .pem(.file(caCertificate))
        configuration.applicationProtocols = alpn
        configuration.serverHostname = hostname
        return configuration
    }
}

// MARK: - Processes

struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a command found on PATH under coreutils `timeout`, so a hung peer cannot hang the suite.
/// Output goes through files, not pipes, so a chatty child cannot block on a full pipe.
func runProcess(
    _ arguments: [String], stdin: String? = nil, timeoutSeconds: Int = 30, currentDirectory: String? = nil
) throws -> ProcessResult {
    let scratch = NSTemporaryDirectory() + "lr-proc-" + UUID().uuidString
    let stdoutPath = scratch + ".out", stderrPath = scratch + ".err", stdinPath = scratch + ".in"
    defer { [stdoutPath, stderrPath, stdinPath].forEach { try? FileManager.default.removeItem(atPath: $0) } }
    _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
    _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
    _ = FileManager.default.createFile(atPath: stdinPath, contents: Data((stdin ?? "").utf8))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["timeout", "-k", "5", "\(timeoutSeconds)"] + arguments
    if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
    let outHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
    let errHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
    let inHandle = try FileHandle(forReadingFrom: URL(fileURLWithPath: stdinPath))
    defer { try? outHandle.close(); try? errHandle.close(); try? inHandle.close() }
    process.standardOutput = outHandle
    process.standardError = errHandle
    process.standardInput = inHandle
    try ChildProcesses.start(process)
    process.waitUntilExit()
    let out = (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
    return ProcessResult(status: process.terminationStatus, stdout: out, stderr: err)
}

/// The repository's Tests/Support/tls directory (this file is in Tests/LiveRelayTLSTests).
let tlsSupportDirectory: String = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Support/tls").path

// MARK: - Recording what reaches the application

/// Sits after the TLS handler and records what the application would see.
final class Recorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    var received = ByteBuffer()
    var events: [TLSEvent] = []
    var errors: [Error] = []
    var inactive = false

    var tlsErrors: [TLSError] { errors.compactMap { $0 as? TLSError } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        received.writeBuffer(&buffer)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSEvent { events.append(event) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        errors.append(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        inactive = true
    }
}

// MARK: - In-memory pair

/// A client and a server handler on two EmbeddedChannels; `interact()` carries the bytes between them.
struct InMemoryPair {
    let client: EmbeddedChannel
    let server: EmbeddedChannel
    let clientHandler: OpenSSLHandler
    let serverHandler: OpenSSLHandler
    let clientRecorder = Recorder()
    let serverRecorder = Recorder()

    init(server serverConfiguration: TLSConfiguration, client clientConfiguration: TLSConfiguration, serverHostname: String? = nil) throws {
        serverHandler = try OpenSSLHandler(context: TLSContext(configuration: serverConfiguration), role: .server)
        clientHandler = try OpenSSLHandler(
            context: TLSContext(configuration: clientConfiguration), role: .client, serverHostname: serverHostname)
        client = EmbeddedChannel()
        server = EmbeddedChannel()
        try client.pipeline.syncOperations.addHandler(clientHandler)
        try client.pipeline.syncOperations.addHandler(clientRecorder)
        try server.pipeline.syncOperations.addHandler(serverHandler)
        try server.pipeline.syncOperations.addHandler(serverRecorder)
    }

    static let address = try! SocketAddress(ipAddress: "127.0.0.1", port: 443)

    /// Brings both channels up; the client starts the handshake.
    func connect() throws {
        try server.connect(to: Self.address).wait()
        try client.connect(to: Self.address).wait()
    }

    /// Moves bytes both ways until neither side has anything left to send.
    /// Returns the number of network writes each way.
    @discardableResult
    func interact() throws -> (clientToServer: Int, serverToClient: Int) {
        var counts = (clientToServer: 0, serverToClient: 0)
        for _ in 0..<1000 {
            var moved = false
            while let bytes = try client.readOutbound(as: ByteBuffer.self) {
                moved = true
                counts.clientToServer += 1
                if server.isActive { try server.writeInbound(bytes) }
            }
            while let bytes = try server.readOutbound(as: ByteBuffer.self) {
                moved = true
                counts.serverToClient += 1
                if client.isActive { try client.writeInbound(bytes) }
            }
            if !moved { return counts }
        }
        throw TestFailure("in-memory peers did not go quiet")
    }

    func handshake() throws {
        try connect()
        try interact()
    }
}

extension ByteBuffer {
    /// Every byte value in a repeating pattern, so misordered or dropped bytes show.
    static func pattern(size: Int) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: size)
        for index in 0..<size { buffer.writeInteger(UInt8(truncatingIfNeeded: index)) }
        return buffer
    }
}
