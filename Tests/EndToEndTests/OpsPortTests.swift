import Foundation
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

/// One GET over a plain socket with `Connection: close`: the whole answer, head and body, as text.
func rawHTTPGet(port: Int, path: String) throws -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw E2E.Failure(description: "socket() failed: errno \(errno)") }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw E2E.Failure(description: "connect to \(port) failed: errno \(errno)") }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
    guard write(fd, request, request.count) == request.count else { throw E2E.Failure(description: "write failed: errno \(errno)") }
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n < 0 { throw E2E.Failure(description: "read failed: errno \(errno)") }
        if n == 0 { break }
        received += chunk[0..<n]
    }
    return String(decoding: received, as: UTF8.self)
}
