/// A tenant's webhook endpoint: an `https://` URL that LiveRelay will POST to.
///
/// The rules are narrower than RFC 3986 on purpose. What is accepted here is
/// dialled by LiveRelay and shown back to operators, so every part must mean
/// the same thing to us, to the tenant's server and to anyone reading it:
///
/// - `https://` only (the scheme in any case): the body is signed, not secret,
///   and the signature alone does not stop a reader on the path;
/// - a host as `EndpointSyntax` reads one (a DNS name, a dotted-quad IPv4
///   address, an IPv6 address in brackets), and an optional port of 1-65535;
/// - no user name or password (`@`): a credential in a URL ends up in logs,
///   and `https://good.example@evil.example/` reads as the wrong host;
/// - no fragment (`#`): it is never sent, so it can only mislead;
/// - printable ASCII only, no `\` (which browsers read as `/`), and `%` only as
///   the start of a percent-encoded byte, so no two parsers split it apart
///   differently;
/// - 2,048 bytes at most, which every server and proxy accepts as a request line.
///
/// `text` is the canonical form (scheme and host in lower case, no `:443`, `/`
/// for an empty path); equality and hashing compare it.
public struct WebhookURL: Hashable, Sendable, CustomStringConvertible {
    /// Why a text is not a webhook URL, in words an API caller can act on.
    public struct SyntaxError: Error, Hashable, Sendable, CustomStringConvertible {
        public var message: String
        public init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    /// The longest URL accepted, in bytes.
    public static let maxLength = 2048

    /// The canonical form, e.g. `https://hooks.example.com:8443/in?app=1`.
    public let text: String
    /// The host as dialled and verified: a DNS name in lower case, or an IP address (IPv6 without brackets).
    public let host: String
    public let port: Int
    /// The request target: the path (at least `/`) and the query with its `?`, if any.
    public let pathAndQuery: String
    /// Whether `host` is an IPv4 or IPv6 address rather than a name to resolve.
    public let hostIsIPLiteral: Bool

    /// The `Host` header's value: the host (an IPv6 address in brackets) and the port unless it is 443.
    public var hostHeader: String {
        let bracketed = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        return port == 443 ? bracketed : "\(bracketed):\(port)"
    }

    public var description: String { text }

    /// `text` as a webhook URL, or nil; `parse` says why not.
    public init?(_ text: String) {
        guard case .success(let url) = Self.parse(text) else { return nil }
        self = url
    }

    private init(host: String, port: Int, pathAndQuery: String, hostIsIPLiteral: Bool) {
        self.host = host
        self.port = port
        self.pathAndQuery = pathAndQuery
        self.hostIsIPLiteral = hostIsIPLiteral
        let authority = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        self.text = "https://" + authority + (port == 443 ? "" : ":\(port)") + pathAndQuery
    }

    /// `text` as a webhook URL, or the first rule it breaks.
    public static func parse(_ text: String) -> Result<WebhookURL, SyntaxError> {
        func fail(_ message: String) -> Result<WebhookURL, SyntaxError> { .failure(SyntaxError(message)) }
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return fail("the url is empty") }
        guard bytes.count <= maxLength else { return fail("the url must be at most \(maxLength) bytes") }
        if let bad = bytes.first(where: { !(0x21...0x7E).contains($0) }) {
            return fail(
                bad == UInt8(ascii: " ")
                    ? "the url must not contain spaces"
                    : bad < 0x80
                        ? "the url must not contain control characters"
                        : "the url must be ASCII (percent-encode other characters)")
        }
        if bytes.contains(UInt8(ascii: "#")) { return fail("the url must not have a fragment (#)") }
        if bytes.contains(UInt8(ascii: "\\")) { return fail("the url must not contain a backslash") }
        if let percent = bytes.indices.first(where: { index in
            bytes[index] == UInt8(ascii: "%")
                && !(index + 2 < bytes.count && EndpointSyntax.isHexDigit(bytes[index + 1]) && EndpointSyntax.isHexDigit(bytes[index + 2]))
        }) {
            return fail("the % at byte \(percent + 1) must start a percent-encoded byte (%XX)")
        }

        let scheme = Array("https://".utf8)
        guard bytes.count >= scheme.count, zip(bytes, scheme).allSatisfy({ lowercased($0) == $1 }) else {
            if bytes.prefix(7).map(lowercased).elementsEqual("http://".utf8) {
                return fail("the url must start with https:// (plain http is not accepted)")
            }
            return fail("the url must start with https://")
        }
        let rest = bytes[scheme.count...]
        let authorityEnd = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let target = rest[authorityEnd...]
        guard !authority.contains(UInt8(ascii: "@")) else {
            return fail("the url must not carry a user name or password (@)")
        }
        guard !authority.isEmpty else { return fail("the url must name a host after https://") }

        // The host, and where its port (if any) starts.
        let hostPart: ArraySlice<UInt8>
        let portPart: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else {
                return fail("the url's IPv6 host must end with ]")
            }
            hostPart = authority[...close]
            let after = authority[(close + 1)...]
            if after.isEmpty {
                portPart = nil
            } else if after.first == UInt8(ascii: ":") {
                portPart = after.dropFirst()
            } else {
                return fail("the url's IPv6 host must be followed by :port or a path")
            }
        } else {
            let colons = authority.filter { $0 == UInt8(ascii: ":") }.count
            guard colons <= 1 else { return fail("the url's IPv6 host must be in brackets, e.g. https://[2001:db8::1]/") }
            if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
                hostPart = authority[..<colon]
                portPart = authority[(colon + 1)...]
            } else {
                hostPart = authority
                portPart = nil
            }
        }
        guard EndpointSyntax.isHost(hostPart) else {
            return fail(
                "the url's host '\(String(decoding: hostPart, as: UTF8.self))' is not a DNS name, an IPv4 address or an [IPv6] address")
        }
        var port = 443
        if let portPart {
            guard !portPart.isEmpty, portPart.count <= 5, portPart.allSatisfy(EndpointSyntax.isDigit),
                case let value = portPart.reduce(0, { $0 * 10 + Int($1 - UInt8(ascii: "0")) }), (1...65535).contains(value)
            else { return fail("the url's port must be a number from 1 to 65535") }
            port = value
        }

        let isIPv6 = hostPart.first == UInt8(ascii: "[")
        let host = isIPv6 ? hostPart.dropFirst().dropLast() : hostPart
        let isIPv4 = !isIPv6 && (host.split(separator: UInt8(ascii: ".")).last?.allSatisfy(EndpointSyntax.isDigit) ?? false)
        let pathAndQuery = target.first == UInt8(ascii: "/") ? Array(target) : Array("/".utf8) + target
        return .success(
            WebhookURL(
                host: String(decoding: host.map(lowercased), as: UTF8.self),
                port: port,
                pathAndQuery: String(decoding: pathAndQuery, as: UTF8.self),
                hostIsIPLiteral: isIPv4 || isIPv6))
    }

    private static func lowercased(_ c: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c) ? c + 32 : c
    }
}
