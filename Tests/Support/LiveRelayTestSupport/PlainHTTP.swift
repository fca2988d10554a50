#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One `GET path` over a plain TCP socket to 127.0.0.1:`port` with
/// `Connection: close`: the whole answer, head and body, as text. Blocking
/// (10 s receive timeout): an independent HTTP/1.1 peer for the operations
/// port, sharing nothing with the server's HTTP stack.
public func plainHTTPGet(port: Int, path: String, headers: [String] = []) throws -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
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
    guard connected == 0 else { throw TestFailure("connect to port \(port) failed: errno \(errno)") }
    let extra = headers.map { $0 + "\r\n" }.joined()
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(extra)\r\n".utf8)
    guard write(fd, request, request.count) == request.count else { throw TestFailure("write failed: errno \(errno)") }
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n < 0 { throw TestFailure("read failed: errno \(errno)") }
        if n == 0 { break }
        received += chunk[0..<n]
    }
    return String(decoding: received, as: UTF8.self)
}
