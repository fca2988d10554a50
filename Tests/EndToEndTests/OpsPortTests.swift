import Foundation
import LiveRelayTestSupport
import Testing

/// `serve`'s operations port end to end: the development setup takes any free
/// port for it, prints it after the RPC line, and a scraper or a probe reads
/// it with plain HTTP/1.1 while RPCs are counted.
@Suite(.serialized)
struct OpsPortTests {
    @Test
    func metricsHealthAndReadinessAreServedOnTheOpsPort() throws {
        let binary = try E2E.liverelayBinary()
        let dataDir = try E2E.makeTemporaryDirectory(prefix: "liverelay-ops")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let server = try ServerProcess.start(binary: binary, dataDir: dataDir, extraArguments: ["--store", "memory"])
        defer { server.stop() }
        guard let (port, line) = server.waitUntilListening(timeout: 60) else {
            Issue.record("the server did not start:\n\(server.transcript())")
            return
        }
        #expect(!line.hasPrefix("ops "), "the first \"listening on\" line must be the RPC port's: \(line)")
        #expect(server.waitFor("ops listening on", timeout: 30), "\(server.transcript())")
        let opsLine = try #require(
            server.transcript().split(separator: "\n").first { $0.hasPrefix("ops listening on") }, "\(server.transcript())")
        let opsPort = try #require(ServerProcess.port(in: String(opsLine)), "no port in \(opsLine)")
        let key = try #require(server.apiKey(), "no API key printed:\n\(server.transcript())")

        #expect(try rawHTTPGet(port: opsPort, path: "/healthz").hasPrefix("HTTP/1.1 200"))
        let ready = try rawHTTPGet(port: opsPort, path: "/readyz")
        #expect(ready.hasPrefix("HTTP/1.1 200"), "\(ready)")

        let registered = try E2E.run(
            binary.path,
            [
                "register-token", "--app", "dev.app", "--token", String(repeating: "ab", count: 32), "--kind", "push-to-start",
                "--attributes-type", "OrderAttributes", "--device", "phone-1", "--environment", "sandbox",
                "--port", String(port), "--ca-file", dataDir.path + "/cert.pem",
            ], environment: ["LIVERELAY_API_KEY": key], timeout: 60)
        #expect(registered.status == 0, "\(registered.output)")

        let metrics = try rawHTTPGet(port: opsPort, path: "/metrics")
        #expect(metrics.hasPrefix("HTTP/1.1 200"), "\(metrics)")
        #expect(metrics.contains(#"liverelay_rpc_requests_total{method="RegisterToken",status="OK"} 1"#), "\(metrics)")
        #expect(metrics.contains("# TYPE liverelay_rpc_duration histogram"), "\(metrics)")
        #expect(metrics.contains("liverelay_connections_total"), "\(metrics)")
    }
}

/// One GET over a plain socket (LiveRelayTestSupport's `plainHTTPGet`), failing as this target's tests do.
func rawHTTPGet(port: Int, path: String) throws -> String {
    do {
        return try plainHTTPGet(port: port, path: path)
    } catch let failure as TestFailure {
        throw E2E.Failure(description: failure.description)
    }
}
