import NIOCore

/// Which resolved addresses a webhook may be sent to.
///
/// A webhook URL is chosen by a tenant, and LiveRelay runs inside someone's
/// network: without this check a tenant could point its endpoint at the cloud
/// metadata service (169.254.169.254), an admin port on loopback, or a database
/// on the private network, and read the status codes back. The check runs on
/// every address a name resolves to, just before dialling that address, so a
/// name that resolves differently the second time (DNS rebinding) gains nothing.
///
/// `allowPrivateAddresses` is for deployments whose tenants are internal
/// services. Unspecified, broadcast and multicast addresses are refused even
/// then: no HTTP server listens on them, and 0.0.0.0 dials the local machine.
public struct WebhookAddressPolicy: Sendable, Hashable {
    public var allowPrivateAddresses: Bool

    public init(allowPrivateAddresses: Bool = false) {
        self.allowPrivateAddresses = allowPrivateAddresses
    }

    /// Nil when `address` may be dialled; otherwise why not, naming the address,
    /// e.g. "127.0.0.1 is a loopback address".
    public func refusal(for address: SocketAddress) -> String? {
        let kind: Kind?
        switch address {
        case .v4(let v4):
            kind = Self.classify(ipv4: UInt32(bigEndian: v4.address.sin_addr.s_addr))
        case .v6(let v6):
            kind = Self.classify(ipv6: withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) })
        case .unixDomainSocket:
            return "\(address) is not an IP address"
        }
        guard let kind, kind.alwaysRefused || !allowPrivateAddresses else { return nil }
        let text = address.ipAddress ?? "\(address)"
        guard let carried = kind.carried else { return "\(text) is \(kind.article) \(kind.name) address" }
        return "\(text) carries \(carried), \(kind.article) \(kind.name) address"
    }

    // MARK: - Address kinds

    /// What is special about an address, if anything.
    struct Kind: Hashable {
        var name: String
        var alwaysRefused: Bool
        /// The IPv4 address, when the kind is that of one carried inside an IPv6 address.
        var carried: String? = nil

        var article: String { name.first.map { "aeiou".contains($0) } == true ? "an" : "a" }

        static let unspecified = Kind(name: "unspecified", alwaysRefused: true)
        static let broadcast = Kind(name: "broadcast", alwaysRefused: true)
        static let multicast = Kind(name: "multicast", alwaysRefused: true)
        static let loopback = Kind(name: "loopback", alwaysRefused: false)
        static let privateUse = Kind(name: "private", alwaysRefused: false)
        static let sharedCGNAT = Kind(name: "shared (carrier-grade NAT)", alwaysRefused: false)
        static let linkLocal = Kind(name: "link-local", alwaysRefused: false)
        static let siteLocal = Kind(name: "site-local", alwaysRefused: false)
        static let reserved = Kind(name: "reserved", alwaysRefused: false)
        static let benchmarking = Kind(name: "benchmarking", alwaysRefused: false)
    }

    /// An IPv4 address (host byte order) by its ranges.
    static func classify(ipv4 a: UInt32) -> Kind? {
        func within(_ network: UInt32, _ prefix: UInt32) -> Bool {
            let mask: UInt32 = prefix == 0 ? 0 : ~UInt32(0) << (32 - prefix)
            return a & mask == network
        }
        // 0.0.0.0/8 as a whole: "this network", which Linux dials as the local machine.
        if within(0x0000_0000, 8) { return .unspecified }
        if a == 0xFFFF_FFFF { return .broadcast }
        if within(0xE000_0000, 4) { return .multicast }  // 224.0.0.0/4
        if within(0x7F00_0000, 8) { return .loopback }  // 127.0.0.0/8
        if within(0x0A00_0000, 8) || within(0xAC10_0000, 12) || within(0xC0A8_0000, 16) { return .privateUse }
        if within(0x6440_0000, 10) { return .sharedCGNAT }  // 100.64.0.0/10
        if within(0xA9FE_0000, 16) { return .linkLocal }  // 169.254.0.0/16, cloud metadata services
        if within(0xC000_0000, 24) { return .reserved }  // 192.0.0.0/24, IETF protocol assignments
        if within(0xC612_0000, 15) { return .benchmarking }  // 198.18.0.0/15
        if within(0xF000_0000, 4) { return .reserved }  // 240.0.0.0/4
        return nil
    }

    /// An IPv6 address (16 bytes, network order) by its ranges; IPv4-mapped and
    /// NAT64 addresses by the IPv4 address they carry, because that is where
    /// the connection goes.
    static func classify(ipv6 b: [UInt8]) -> Kind? {
        precondition(b.count == 16)
        let embedded = UInt32(b[12]) << 24 | UInt32(b[13]) << 16 | UInt32(b[14]) << 8 | UInt32(b[15])
        let firstTen = b[0..<10].allSatisfy { $0 == 0 }
        let isMapped = firstTen && b[10] == 0xFF && b[11] == 0xFF  // ::ffff:a.b.c.d
        let isNAT64 = b[0..<12].elementsEqual([0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0])  // 64:ff9b::/96
        if isMapped || isNAT64 {
            guard var kind = classify(ipv4: embedded) else { return nil }
            kind.carried = b[12...].map(String.init).joined(separator: ".")
            return kind
        }
        if firstTen && b[10] == 0 && b[11] == 0 {
            if embedded == 0 { return .unspecified }  // ::
            if embedded == 1 { return .loopback }  // ::1
            return .reserved  // ::a.b.c.d, the deprecated IPv4-compatible form
        }
        if b[0] == 0xFF { return .multicast }  // ff00::/8
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return .linkLocal }  // fe80::/10
        if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return .siteLocal }  // fec0::/10, deprecated but still routed inside some networks
        if b[0] & 0xFE == 0xFC { return .privateUse }  // fc00::/7, unique local
        if b[0..<6].elementsEqual([0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01]) { return .privateUse }  // 64:ff9b:1::/48, local-use NAT64
        return nil
    }
}
