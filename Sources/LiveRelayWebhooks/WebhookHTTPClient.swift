import LiveRelayEndpoint
import LiveRelayTLS
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Sends webhook POSTs over HTTP/1.1 and TLS, one connection per call.
///
/// A call resolves the host on a thread pool (getaddrinfo blocks, so never on
/// an event loop), checks every address with the `WebhookAddressPolicy`, and
/// dials the vetted addresses themselves in turn, never the name again, so
/// what was checked is what is reached. The TLS handshake verifies the
/// certificate against the URL's host. `Connection: close` keeps nothing open
/// between calls: webhooks to one endpoint are seconds apart, and an idle pool
/// per tenant would cost more than the handshakes it saves.
///
/// The client logs nothing: the headers carry a signature, and the body is the
/// tenant's data. What goes wrong is in the result's description.
public final class WebhookHTTPClient: Sendable {
    public static let userAgent = "LiveRelay-Webhook/1"

    /// Framing is the client's: the caller's headers with these names are dropped.
    static let reservedHeaders: Set<String> = ["host", "content-length", "connection", "transfer-encoding"]

    public let addressPolicy: WebhookAddressPolicy
    private let group: any EventLoopGroup
    private let threadPool: NIOThreadPool
    /// Built once: loading the trust store is far too slow to do per request.
    private let tlsContext: TLSContext

    /// - Parameters:
    ///   - trustRoots: what the endpoint's certificate must chain to; the system store in production.
    ///   - threadPool: where names are resolved.
    public init(
        group: any EventLoopGroup,
        trustRoots: TrustRoots = .systemDefault,
        addressPolicy: WebhookAddressPolicy = WebhookAddressPolicy(),
        threadPool: NIOThreadPool = .singleton
    ) throws(TLSContextError) {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = trustRoots
        tls.applicationProtocols = ["http/1.1"]
        // The call's own timeout bounds the exchange; a close waits briefly for the peer's close_notify.
        tls.shutdownTimeout = .seconds(2)
        self.tlsContext = try TLSContext(configuration: tls)
        self.group = group
        self.threadPool = threadPool
        self.addressPolicy = addressPolicy
    }

    /// POSTs `body` to `url` with `headers` added to the client's own (Host,
    /// Content-Type: application/json, Content-Length, User-Agent,
    /// Connection: close; a caller's Content-Type or User-Agent replaces the
    /// client's). Everything, from resolving to the response head, happens
    /// within `timeout`.
    public func post(_ url: WebhookURL, headers: [(String, String)], body: ByteBuffer, timeout: TimeAmount) async -> WebhookHTTPResult {
        if let problem = Self.problem(in: headers) { return .failure(.invalidRequest(problem)) }
        let call = WebhookCall(
            client: self, url: url, head: Self.requestHead(url: url, headers: headers, bodyLength: body.readableBytes),
            body: body, timeout: timeout, eventLoop: group.next())
        return await withTaskCancellationHandler {
            await call.start()
        } onCancel: {
            call.cancel()
        }
    }

    public func post(_ url: WebhookURL, headers: [(String, String)], body: [UInt8], timeout: TimeAmount) async -> WebhookHTTPResult {
        await post(url, headers: headers, body: ByteBuffer(bytes: body), timeout: timeout)
    }

    static func requestHead(url: WebhookURL, headers: [(String, String)], bodyLength: Int) -> HTTPRequestHead {
        var fields = HTTPHeaders()
        fields.add(name: "Host", value: url.hostHeader)
        fields.add(name: "User-Agent", value: userAgent)
        fields.add(name: "Content-Type", value: "application/json")
        fields.add(name: "Content-Length", value: String(bodyLength))
        fields.add(name: "Connection", value: "close")
        for (name, value) in headers where !reservedHeaders.contains(name.lowercased()) {
            let lowered = name.lowercased()
            if lowered == "content-type" || lowered == "user-agent" { fields.remove(name: name) }
            fields.add(name: name, value: value)
        }
        return HTTPRequestHead(version: .http1_1, method: .POST, uri: url.pathAndQuery, headers: fields)
    }

    /// Why `headers` cannot be sent, if they cannot: checked before dialling, so a bad
    /// header is the caller's error and not reported as the server's.
    static func problem(in headers: [(String, String)]) -> String? {
        let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)
        for (name, value) in headers {
            let nameIsToken =
                !name.isEmpty
                && name.utf8.allSatisfy { c in
                    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c)
                        || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c) || tokenPunctuation.contains(c)
                }
            guard nameIsToken else { return "the header name '\(name)' is not an HTTP token" }
            // Visible ASCII, spaces and tabs, and bytes above ASCII (obs-text); never CR, LF or NUL.
            guard value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else {
                return "the value of header '\(name)' has a control character"
            }
        }
        return nil
    }

    // MARK: - Parts a call uses

    /// Every address `host` resolves to for TCP, in getaddrinfo's order (RFC 6724), without repeats.
    func resolve(_ host: String, port: Int, on eventLoop: any EventLoop) -> EventLoopFuture<Result<[SocketAddress], WebhookHTTPFailure>> {
        threadPool.runIfActive(eventLoop: eventLoop) { Self.lookUp(host: host, port: port) }
            .recover { _ in .failure(.dns("the resolver is shut down")) }
    }

    private static func lookUp(host: String, port: Int) -> Result<[SocketAddress], WebhookHTTPFailure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, String(port), &hints, &list)
        guard code == 0 else { return .failure(.dns("\(host): \(String(cString: gai_strerror(code)))")) }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry = list
        while let info = entry?.pointee {
            entry = info.ai_next
            guard let raw = info.ai_addr else { continue }
            let address: SocketAddress
            switch info.ai_family {
            case AF_INET: address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee, host: host) }
            case AF_INET6: address = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee, host: host) }
            default: continue
            }
            if !addresses.contains(address) { addresses.append(address) }
        }
        return addresses.isEmpty ? .failure(.dns("\(host): no IPv4 or IPv6 address")) : .success(addresses)
    }

    /// Opens one connection to `address`, with TLS and the exchange in its pipeline.
    func connect(
        to address: SocketAddress, url: WebhookURL, handler: @escaping @Sendable () -> WebhookRequestHandler,
        connectTimeout: TimeAmount, on eventLoop: any EventLoop
    ) -> EventLoopFuture<any Channel> {
        let tlsContext = self.tlsContext
        return ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(OpenSSLHandler(context: tlsContext, role: .client, serverHostname: url.host))
                    try sync.addHTTPClientHandlers()
                    try sync.addHandler(handler())
                }
            }
            .connect(to: address)
    }

    /// "connection refused" for ECONNREFUSED: strerror's text, lower-cased as a clause.
    static func describe(errno code: Int32) -> String {
        let text = String(cString: strerror(code))
        guard let first = text.first else { return "error \(code)" }
        return first.lowercased() + text.dropFirst()
    }
}
