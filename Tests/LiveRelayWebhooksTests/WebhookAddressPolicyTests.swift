import LiveRelayWebhooks
import NIOCore
import Testing

@Suite("WebhookAddressPolicy")
struct WebhookAddressPolicyTests {
    static let strict = WebhookAddressPolicy()
    static let permissive = WebhookAddressPolicy(allowPrivateAddresses: true)

    static func address(_ text: String) throws -> SocketAddress {
        try SocketAddress(ipAddress: text, port: 443)
    }

    /// Addresses refused unless private addresses are allowed, with the kind named in the reason.
    static let privateKinds: [(String, String)] = [
        ("10.0.0.1", "private"), ("10.255.255.255", "private"),
        ("172.16.0.1", "private"), ("172.31.255.254", "private"),
        ("192.168.0.1", "private"), ("192.168.255.255", "private"),
        ("100.64.0.1", "shared (carrier-grade NAT)"), ("100.127.255.255", "shared (carrier-grade NAT)"),
        ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"),
        ("169.254.169.254", "link-local"), ("169.254.0.1", "link-local"),
        ("192.0.0.1", "reserved"), ("192.0.0.255", "reserved"),
        ("198.18.0.1", "benchmarking"), ("198.19.255.255", "benchmarking"),
        ("240.0.0.1", "reserved"), ("255.255.255.254", "reserved"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"), ("febf:ffff::1", "link-local"),
        ("fc00::1", "private"), ("fd12:3456:789a::1", "private"),
        ("fec0::1", "site-local"), ("feff::1", "site-local"),
        ("64:ff9b:1::a00:1", "private"),
        ("::7f00:1", "reserved"),
    ]

    /// Addresses refused whatever the setting.
    static let alwaysRefused: [(String, String)] = [
        ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"),
        ("255.255.255.255", "broadcast"),
        ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"),
        ("::", "unspecified"),
        ("ff02::1", "multicast"), ("ff0e::101", "multicast"),
    ]

    /// Public addresses, including the neighbours of every refused range.
    static let publicAddresses = [
        "1.1.1.1", "8.8.8.8", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0",
        "126.255.255.255", "128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0",
        "192.0.1.0", "192.0.2.1", "192.167.255.255", "192.169.0.0", "198.17.255.255", "198.20.0.0",
        "223.255.255.255", "1.0.0.0",
        "2001:4860:4860::8888", "2606:4700::1111", "fe7f::1", "fb00::1", "fe00::1",
        "::ffff:8.8.8.8", "64:ff9b::808:808", "64:ff9b:2::1",
    ]

    static func article(_ kind: String) -> String {
        kind.first.map { "aeiou".contains($0) } == true ? "an" : "a"
    }

    @Test(arguments: privateKinds)
    func privateRangesAreRefusedByDefaultAndAllowedOnRequest(text: String, kind: String) throws {
        let address = try Self.address(text)
        let reason = "\(address.ipAddress ?? text) is \(Self.article(kind)) \(kind) address"
        #expect(Self.strict.refusal(for: address) == reason)
        #expect(Self.permissive.refusal(for: address) == nil)
    }

    @Test(arguments: alwaysRefused)
    func unspecifiedBroadcastAndMulticastAreAlwaysRefused(text: String, kind: String) throws {
        let address = try Self.address(text)
        let reason = "\(address.ipAddress ?? text) is \(Self.article(kind)) \(kind) address"
        #expect(Self.strict.refusal(for: address) == reason)
        #expect(Self.permissive.refusal(for: address) == reason)
    }

    @Test(arguments: publicAddresses)
    func publicAddressesAreAllowed(text: String) throws {
        let address = try Self.address(text)
        #expect(Self.strict.refusal(for: address) == nil)
        #expect(Self.permissive.refusal(for: address) == nil)
    }

    @Test func theExamplesReadAsAnOperatorWouldWant() throws {
        #expect(Self.strict.refusal(for: try Self.address("127.0.0.1")) == "127.0.0.1 is a loopback address")
        #expect(Self.strict.refusal(for: try Self.address("10.0.0.1")) == "10.0.0.1 is a private address")
        #expect(Self.strict.refusal(for: try Self.address("169.254.169.254")) == "169.254.169.254 is a link-local address")
    }

    @Test func ipv4MappedAndNAT64AddressesAreJudgedByTheIPv4AddressTheyCarry() throws {
        let cases: [(String, String?, String?)] = [
            ("::ffff:127.0.0.1", "carries 127.0.0.1, a loopback address", nil),
            ("::ffff:10.1.2.3", "carries 10.1.2.3, a private address", nil),
            ("::ffff:169.254.169.254", "carries 169.254.169.254, a link-local address", nil),
            ("::ffff:0.0.0.0", "carries 0.0.0.0, an unspecified address", "carries 0.0.0.0, an unspecified address"),
            ("::ffff:224.0.0.1", "carries 224.0.0.1, a multicast address", "carries 224.0.0.1, a multicast address"),
            ("64:ff9b::7f00:1", "carries 127.0.0.1, a loopback address", nil),
            ("64:ff9b::c0a8:101", "carries 192.168.1.1, a private address", nil),
            ("64:ff9b::ffff:ffff", "carries 255.255.255.255, a broadcast address", "carries 255.255.255.255, a broadcast address"),
        ]
        for (text, strict, permissive) in cases {
            let address = try Self.address(text)
            let shown = address.ipAddress ?? text
            #expect(Self.strict.refusal(for: address) == strict.map { "\(shown) \($0)" }, "\(text)")
            #expect(Self.permissive.refusal(for: address) == permissive.map { "\(shown) \($0)" }, "\(text)")
        }
    }

    @Test func unixDomainSocketsAreNeverDialled() throws {
        let address = try SocketAddress(unixDomainSocketPath: "/tmp/webhook.sock")
        #expect(Self.strict.refusal(for: address)?.hasSuffix("is not an IP address") == true)
        #expect(Self.permissive.refusal(for: address)?.hasSuffix("is not an IP address") == true)
    }

    @Test func thePortDoesNotMatter() throws {
        for port in [1, 80, 443, 8443, 65535] {
            #expect(Self.strict.refusal(for: try SocketAddress(ipAddress: "127.0.0.1", port: port)) != nil)
            #expect(Self.strict.refusal(for: try SocketAddress(ipAddress: "8.8.8.8", port: port)) == nil)
        }
    }

    @Test func theDefaultRefusesPrivateAddresses() {
        #expect(!WebhookAddressPolicy().allowPrivateAddresses)
    }
}
