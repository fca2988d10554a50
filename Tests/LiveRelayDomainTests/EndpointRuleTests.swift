import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import Testing

/// An app's APNs endpoint is "apple" or a host (DNS name, IPv4, bracketed IPv6)
/// and a port: the registry refuses anything else, whichever way it comes (the
/// admin API, the config file's seed), and the admin request's own validation
/// (LiveRelayMessages) draws the line where the registry's (LiveRelayAPNs) does.
@Suite struct EndpointRuleTests {
    static let accepted = [
        "apple", "127.0.0.1:2197", "localhost:8443", "mock-apns:2197", "mock_apns:2197", "mock-apns.internal:65535",
        "api.push.apple.com:443", "API.Push.Apple.COM:443", "[::1]:8443", "[2001:db8::1]:443", "[::]:1",
        "[::ffff:10.0.0.1]:2197", "[1:2:3:4:5:6:7:8]:443", "0.0.0.0:1", "255.255.255.255:65535",
    ]
    static let refused = [
        "https://h:443", "h/x:443", "http://mock-apns:2197", "h:443/", "user@h:443", "h?x:443", "h#x:443", "h x:443",
        "::1:8443", "[::1]", "[::1:8443", "::1]:8443", "[]:443", "[fe80::1%eth0]:443", "[1:2:3:4:5:6:7:8:9]:443",
        "[1::2::3]:443", "[:::1]:443", "[1.2.3.4::]:443", "[12345::1]:443", "[g::1]:443", "h..x:443", ".h:443", "h.:443",
        "-h:443", "h-:443", "256.1.1.1:443", "10.0.0.01:443", "1.2.3:443", "1.2.3.4.5:443", "x.123:443",
        String(repeating: "a", count: 64) + ".com:443", "h:0", "h:65536", "h:+443", "h:", ":443", "", "Apple",
    ]

    static func app(endpoint: String) -> RegisteredApp {
        RegisteredApp(
            id: "orders", bundleID: "com.example.orders",
            credentials: RegisteredCredentials(
                teamID: "TEAM123456", keyID: "KEY1234567", endpoint: endpoint, keySource: .file(path: "/k.p8")),
            source: .seed)
    }

    static func refusal(_ change: RegistryChange) -> RegistryError? {
        do {
            _ = try RegistryRules.plan(change, on: RegistrySnapshot(), now: t0)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: refused)
    func theRegistryRefusesAnEndpointThatIsNotAHostAndPort(_ endpoint: String) {
        for change in [
            RegistryChange.createApp(Self.app(endpoint: endpoint)), .seed(apps: [Self.app(endpoint: endpoint)], keys: []),
        ] {
            guard case .invalid(field: "endpoint", _)? = Self.refusal(change) else {
                Issue.record("\(endpoint.debugDescription) was not refused naming endpoint: \(String(describing: Self.refusal(change)))")
                continue
            }
        }
    }

    /// What the config file's `apps[].apns.endpoint`, `serve --apns-endpoint` and the
    /// development setup name ("apple", "127.0.0.1:PORT", "mock-apns:2197") still seeds.
    @Test(arguments: accepted)
    func theRegistryAcceptsAppleAndHostPort(_ endpoint: String) {
        #expect(Self.refusal(.createApp(Self.app(endpoint: endpoint))) == nil, "\(endpoint)")
        #expect(Self.refusal(.seed(apps: [Self.app(endpoint: endpoint)], keys: [])) == nil, "\(endpoint)")
    }

    @Test(arguments: accepted + refused)
    func theAdminRequestAndTheRegistryDrawTheSameLine(_ endpoint: String) {
        let request = Admin.PutAPNsCredentialsRequest(
            appID: "orders", teamID: "ABCDE12345", keyID: "KEY1234567", privateKeyEnv: "APNS_KEY", endpoint: endpoint)
        let requestAccepts: Bool
        do {
            try request.validate()
            requestAccepts = true
        } catch {
            #expect(error.field == "endpoint", "\(endpoint): \(error)")
            requestAccepts = false
        }
        let destinationAccepts = (try? APNsDestination(parsing: endpoint)) != nil
        #expect(
            requestAccepts == destinationAccepts, "\(endpoint.debugDescription): request \(requestAccepts), registry \(destinationAccepts)")
    }
}
