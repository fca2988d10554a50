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
    let connection = try RawConnection(port: port)
    let extra = headers.map { $0 + "\r\n" }.joined()
    guard connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(extra)\r\n") else {
        throw TestFailure("write failed: errno \(errno)")
    }
    return String(decoding: try connection.readToEnd(seconds: 10), as: UTF8.self)
}

/// A blocking TCP connection to 127.0.0.1:`port`, for requests a client library would
/// not make (a head sent in pieces, a connection held open and idle).
public final class RawConnection: @unchecked Sendable {
    private var fd: Int32

    public init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close()
            throw TestFailure("connect to port \(port) failed: errno \(errno)")
        }
    }

    /// Whether every byte of `text` was written. A peer that closed gets EPIPE, not
    /// SIGPIPE: the signal would end the whole test process.
    @discardableResult
    public func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return Glibc.send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count
    }

    private func receiveTimeout(_ seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Everything until the peer closes; throws when nothing comes for `seconds`.
    public func readToEnd(seconds: Int) throws -> [UInt8] {
        receiveTimeout(seconds)
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 { throw TestFailure("read failed: errno \(errno)") }
            if n == 0 { return received }
            received += chunk[0..<n]
        }
    }

    /// What arrives within `seconds` (nil on a timeout with nothing read).
    public func readSome(seconds: Int) -> String? {
        receiveTimeout(seconds)
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &chunk, chunk.count)
        return n > 0 ? String(decoding: chunk[0..<n], as: UTF8.self) : nil
    }

    /// Whether the peer closes the connection within `seconds` (reading until end of stream).
    public func waitForClose(seconds: Int) -> Bool {
        receiveTimeout(seconds)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }

    /// Whether the peer has not closed it (a non-blocking peek).
    public var isOpen: Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    public func close() {
        #if canImport(Glibc)
        if fd >= 0 { _ = Glibc.close(fd) }
        #else
        if fd >= 0 { _ = Darwin.close(fd) }
        #endif
        fd = -1
    }

    deinit { close() }
}
