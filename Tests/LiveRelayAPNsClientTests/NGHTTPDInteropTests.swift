import Foundation
import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayTLS
import LiveRelayTestSupport
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import LiveRelayAPNsClient

/// nghttpd (Debian's `nghttp2-server`), started by the test on loopback over TLS:
/// an HTTP/2 server that shares no code with the mock APNs. It answers each POST
/// with 200 and the body it read (`--echo-upload`), so a request it answers went
/// through its flow control whole.
final class NGHTTPD {
    static let path = "/usr/sbin/nghttpd"

    let port: Int
    let certificatePEM: String
    private let directory: URL
    private let process: Process

    /// Starts nghttpd with `options` (`-m`, `-w`, `-W`...) on a free port, or on `port`.
    init(options: [String], port: Int? = nil, reusing other: NGHTTPD? = nil) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.path) else {
            throw WorkloadError("\(Self.path) is missing: scripts/setup.sh installs Debian's nghttp2-server")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("nghttpd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let (certificate, key) =
            try other.map { ($0.certificatePEM, try String(contentsOf: $0.directory.appendingPathComponent("key.pem"), encoding: .utf8)) }
            ?? SelfSignedCertificate.generate()
        certificatePEM = certificate
        try certificate.write(to: directory.appendingPathComponent("cert.pem"), atomically: true, encoding: .utf8)
        try key.write(to: directory.appendingPathComponent("key.pem"), atomically: true, encoding: .utf8)
        if let port {
            self.port = port
        } else {
            self.port = try await Self.freePort()
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.path)
        process.arguments =
            ["--echo-upload", "--htdocs", directory.path] + options
            + [String(self.port), directory.appendingPathComponent("key.pem").path, directory.appendingPathComponent("cert.pem").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try ChildProcesses.start(process)
        try await waitUntilListening()
    }

    /// Freezes it (SIGSTOP): it reads and answers nothing until killed.
    func pause() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGSTOP)
    }

    /// Kills it at once: no GOAWAY, the connection just drops.
    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func stop() {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    private static func freePort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress!.port!
        try await channel.close()
        return port
    }

    private func waitUntilListening() async throws {
        // Up to a minute: a ceiling for a loaded machine.
        for _ in 0..<2400 {
            guard process.isRunning else { throw WorkloadError("nghttpd exited (status \(process.terminationStatus))") }
            if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port)
                .get()
            {
                try? await channel.close()
                return
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw WorkloadError("nghttpd did not listen on \(port) within 60 s")
    }

    struct WorkloadError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

/// The APNs client against nghttpd: ALPN, many streams, flow-control windows of
/// either extreme, and a connection that drops in the middle of a burst.
@Suite("APNs client against nghttpd", .serialized)
struct NGHTTPDInteropTests {
    static func request(_ n: Int, payloadBytes: Int = 0) -> APNsRequest {
        var request = PoolIntegrationTests.request(n)
        if payloadBytes > 0 {
            let filler = String(repeating: "x", count: payloadBytes)
            request.payload = APNsPayload(bytes: Array(#"{"aps":{"event":"update","timestamp":1},"f":"\#(filler)"}"#.utf8))
        }
        return request
    }

    static func withPool(
        _ server: NGHTTPD, logger: Logger = Logger(label: "nghttpd-interop"),
        adjust: ((inout APNsClientConfiguration) -> Void)? = nil,
        _ body: (APNsConnectionPool) async throws -> Void
    ) async throws {
        var configuration = APNsClientConfiguration.trusting(
            certificatePEM: server.certificatePEM, endpoint: .custom(host: "127.0.0.1", port: server.port))
        configuration.backoff = Backoff(initial: .milliseconds(20), maximum: .milliseconds(200))
        configuration.tickInterval = .milliseconds(50)
        adjust?(&configuration)
        let pool = try APNsConnectionPool(
            configuration: configuration, tokenSource: ProviderTokenSource(key: PoolIntegrationTests.key),
            group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        do {
            try await body(pool)
        } catch {
            try? await pool.shutdown().get()
            throw error
        }
        try await pool.shutdown().get()
    }

    static func statuses(_ futures: [EventLoopFuture<APNsResponse>]) async -> [Result<Int, APNsTransportError>] {
        var results: [Result<Int, APNsTransportError>] = []
        for future in futures { results.append(await PoolIntegrationTests.outcome(future).map(\.status)) }
        return results
    }

    @Test func theHandshakeNegotiatesH2AndAPushIsAnswered() async throws {
        let server = try await NGHTTPD(options: [])
        defer { server.stop() }
        try await Self.withPool(server) { pool in
            let response = try await pool.send(Self.request(1)).get()
            #expect(response.status == 200)
        }
    }

    /// nghttpd allows 1,000 streams; one connection carries all 1,000 pushes at once.
    @Test func oneThousandConcurrentStreamsOnOneConnection() async throws {
        let server = try await NGHTTPD(options: ["--max-concurrent-streams=1000"])
        defer { server.stop() }
        let logs = LogRecorder()
        try await Self.withPool(server, logger: logs.logger(level: .debug), adjust: { $0.maximumConnections = 1 }) { pool in
            let results = await Self.statuses((0..<1000).map { pool.send(Self.request($0)) })
            #expect(results.filter { $0 == .success(200) }.count == 1000)
        }
        let ready = logs.lines.filter { $0.message == "APNs connection ready" }
        // One connection, which learned nghttpd's limit from its SETTINGS.
        #expect(Set(ready.compactMap { $0.metadata["connection"] }) == ["0"])
        #expect(ready.last?.metadata["streams"] == "1000")
    }

    /// A 1,023-byte stream window and a 4,095-byte connection window: every 3 KB body
    /// crosses several WINDOW_UPDATEs.
    @Test func smallWindowsCarryBodiesLargerThanThem() async throws {
        let server = try await NGHTTPD(options: ["--window-bits=10", "--connection-window-bits=12"])
        defer { server.stop() }
        try await Self.withPool(server) { pool in
            let results = await Self.statuses((0..<50).map { pool.send(Self.request($0, payloadBytes: 3000)) })
            #expect(results == Array(repeating: .success(200), count: 50))
        }
    }

    @Test func largeWindowsCarryABurst() async throws {
        let server = try await NGHTTPD(options: ["--window-bits=30", "--connection-window-bits=30"])
        defer { server.stop() }
        try await Self.withPool(server) { pool in
            let results = await Self.statuses((0..<500).map { pool.send(Self.request($0, payloadBytes: 3000)) })
            #expect(results == Array(repeating: .success(200), count: 500))
        }
    }

    /// The server dies in the middle of a burst: every push is answered, or fails
    /// with a transport error the dispatcher acts on (none hangs), and the pool
    /// connects again once a server listens on the port. The server is frozen
    /// before the burst, so the pushes written to it cannot be answered before
    /// the drop, whatever the machine's load.
    @Test func aConnectionDroppedMidBurstAccountsForEveryPushAndReconnects() async throws {
        let server = try await NGHTTPD(options: [])
        defer { server.stop() }
        try await Self.withPool(server, adjust: { $0.timeouts.responseTimeout = .seconds(30) }) { pool in
            _ = try await pool.send(Self.request(0)).get()  // connected, nghttpd's SETTINGS read
            server.pause()
            let futures = (1...2000).map { pool.send(Self.request($0, payloadBytes: 3000)) }
            // The first streams' frames reach the frozen server's socket (an event-loop turn);
            // the rest wait in the pool for free streams.
            try await Task.sleep(for: .seconds(1))
            server.kill()
            // A server listens again on the port; what waits for a connection goes there.
            let restarted = try await NGHTTPD(options: [], port: server.port, reusing: server)
            defer { restarted.stop() }
            let results = await Self.statuses(futures)
            #expect(results.count == 2000)
            let unexpected = results.filter {
                switch $0 {
                case .success(200), .failure(.connectionLost), .failure(.refusedByGoAway), .failure(.connectFailed): return false
                default: return true
                }
            }
            #expect(unexpected.isEmpty, "\(unexpected.prefix(5))")
            #expect(results.contains { $0 != .success(200) }, "no push was in flight when the connection dropped")
            var answered: Int?
            for _ in 0..<600 where answered == nil {  // up to a minute
                answered = try? await pool.send(Self.request(5000)).get().status
                if answered == nil { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(answered == 200)
        }
    }
}
