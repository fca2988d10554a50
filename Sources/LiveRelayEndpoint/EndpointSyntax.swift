/// The syntax of a `host:port` APNs endpoint, in one place for everything
/// that reads one: LiveRelayAPNs' `APNsDestination` (which connects to it) and
/// `APNsEndpoint` (which names it in headers and logs), and the admin request's
/// `endpoint` field in LiveRelayMessages (which refuses what the server could
/// never connect to). A module of its own because neither of those imports
/// the other: the message layer must not bring OpenSSL into the client library.
///
/// The host is one of what a connect can use and a certificate can name:
///
/// - a DNS name: dot-separated labels of 1-63 letters, digits, `-` and `_`
///   (not starting or ending with `-`), 253 bytes at most. `_` is not a host
///   name character, but service names that container networks resolve use it;
/// - a dotted-quad IPv4 address (`10.0.0.1`): a name whose last label is all
///   digits is one, and must be a valid one (no top-level domain is numeric);
/// - an IPv6 address in brackets (`[::1]`), as in a URL's authority: without
///   them the address's own colons make the port ambiguous.
public enum EndpointSyntax {
    /// The longest DNS name.
    public static let maxHost = 253

    /// The host (an IPv6 address without its brackets) and the port of `text`, or
    /// nil when it is not `host:port` with a host and a port of 1-65535 as above.
    public static func hostAndPort(_ text: String) -> (host: String, port: Int)? {
        let bytes = Array(text.utf8)
        guard let colon = bytes.lastIndex(of: UInt8(ascii: ":")) else { return nil }
        let host = bytes[..<colon]
        let digits = bytes[(colon + 1)...]
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy(isDigit) else { return nil }
        let port = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        guard (1...65535).contains(port) else { return nil }
        guard isHost(host) else { return nil }
        let bracketed = host.first == UInt8(ascii: "[")
        return (String(decoding: bracketed ? host.dropFirst().dropLast() : host, as: UTF8.self), port)
    }

    /// Whether `host` (the part before the port's colon) is a host as above, an IPv6
    /// address in its brackets.
    public static func isHost(_ host: ArraySlice<UInt8>) -> Bool {
        if host.first == UInt8(ascii: "["), host.last == UInt8(ascii: "]"), host.count > 2 {
            return isIPv6(host.dropFirst().dropLast())
        }
        return isNameOrIPv4(host)
    }

    /// `host:port`, with an IPv6 host in brackets again.
    public static func authority(host: String, port: Int) -> String {
        host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    static func isDigit(_ c: UInt8) -> Bool { c &- UInt8(ascii: "0") < 10 }

    static func isHexDigit(_ c: UInt8) -> Bool {
        isDigit(c) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(c) || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(c)
    }

    /// A DNS name, or a dotted-quad IPv4 address when its last label is all digits.
    static func isNameOrIPv4(_ host: ArraySlice<UInt8>) -> Bool {
        guard !host.isEmpty, host.count <= maxHost else { return false }
        let labels = host.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        if let last = labels.last, last.allSatisfy(isDigit) { return isIPv4(labels) }
        return labels.allSatisfy { label in
            let hyphen = UInt8(ascii: "-")
            return (1...63).contains(label.count) && label.first != hyphen && label.last != hyphen
                && label.allSatisfy { c in
                    isDigit(c) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c)
                        || c == hyphen || c == UInt8(ascii: "_")
                }
        }
    }

    /// Four decimal numbers of 0-255 without leading zeros (which some parsers read as octal).
    static func isIPv4(_ parts: [ArraySlice<UInt8>]) -> Bool {
        parts.count == 4
            && parts.allSatisfy { part in
                (1...3).contains(part.count) && part.allSatisfy(isDigit) && (part.count == 1 || part.first != UInt8(ascii: "0"))
                    && part.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } <= 255
            }
    }

    /// An IPv6 address in RFC 4291's text forms: eight groups of 1-4 hex digits,
    /// one run of them compressed to `::` at most, an IPv4 address as the last two.
    /// No zone (`%eth0`): it names an interface of one machine, not a server.
    static func isIPv6(_ address: ArraySlice<UInt8>) -> Bool {
        let colon = UInt8(ascii: ":")
        func groups(_ part: ArraySlice<UInt8>) -> [ArraySlice<UInt8>]? {
            if part.isEmpty { return [] }
            let groups = part.split(separator: colon, omittingEmptySubsequences: false)
            return groups.contains(where: \.isEmpty) ? nil : groups
        }
        var compressed = false
        var all: [ArraySlice<UInt8>]
        if let at = address.indices.first(where: { $0 + 1 < address.endIndex && address[$0] == colon && address[$0 + 1] == colon }) {
            guard let left = groups(address[..<at]), let right = groups(address[(at + 2)...]) else { return false }
            all = left + right
            compressed = true
            // An IPv4 tail ends the address: never before a "::".
            if right.isEmpty, let last = left.last, last.contains(UInt8(ascii: ".")) { return false }
        } else {
            guard let only = groups(address) else { return false }
            all = only
        }
        var count = 0
        if let last = all.last, last.contains(UInt8(ascii: ".")) {
            guard isIPv4(last.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)) else { return false }
            all.removeLast()
            count = 2
        }
        guard all.allSatisfy({ (1...4).contains($0.count) && $0.allSatisfy(isHexDigit) }) else { return false }
        count += all.count
        return compressed ? count <= 7 : count == 8
    }
}
