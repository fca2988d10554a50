import LiveRelayEndpoint
import Testing

@Suite("WebhookURL")
struct WebhookURLTests {
    private func parsed(_ text: String) throws -> WebhookURL {
        try WebhookURL.parse(text).get()
    }

    private func refusal(_ text: String) -> String? {
        guard case .failure(let error) = WebhookURL.parse(text) else { return nil }
        return error.message
    }

    @Test func aPlainURLDefaultsToPort443AndKeepsItsPathAndQuery() throws {
        let url = try parsed("https://hooks.example.com/liverelay/in?app=42&x=%2F")
        #expect(url.host == "hooks.example.com")
        #expect(url.port == 443)
        #expect(url.pathAndQuery == "/liverelay/in?app=42&x=%2F")
        #expect(url.hostHeader == "hooks.example.com")
        #expect(!url.hostIsIPLiteral)
        #expect(url.text == "https://hooks.example.com/liverelay/in?app=42&x=%2F")
    }

    @Test func anEmptyPathIsTheRoot() throws {
        #expect(try parsed("https://example.com").pathAndQuery == "/")
        #expect(try parsed("https://example.com?a=1").pathAndQuery == "/?a=1")
        #expect(try parsed("https://example.com:8443").text == "https://example.com:8443/")
    }

    @Test func schemeAndHostAreCaseInsensitiveAndCanonicalisedPathIsNot() throws {
        let url = try parsed("HTTPS://Hooks.Example.COM:443/In?Q=A")
        #expect(url.host == "hooks.example.com")
        #expect(url.text == "https://hooks.example.com/In?Q=A")
        #expect(url == (try parsed("https://hooks.example.com/In?Q=A")))
        #expect(url != (try parsed("https://hooks.example.com/in?Q=A")))
    }

    @Test func anExplicitPortIsKeptAndNamedInTheHostHeader() throws {
        let url = try parsed("https://example.com:8443/x")
        #expect(url.port == 8443)
        #expect(url.hostHeader == "example.com:8443")
        #expect(try parsed("https://example.com:1/").port == 1)
        #expect(try parsed("https://example.com:65535/").port == 65535)
    }

    @Test func ipv4AndIPv6LiteralsAreHostsWithoutBrackets() throws {
        let v4 = try parsed("https://127.0.0.1:8443/hook")
        #expect(v4.host == "127.0.0.1")
        #expect(v4.hostIsIPLiteral)
        #expect(v4.hostHeader == "127.0.0.1:8443")
        let v6 = try parsed("https://[2001:DB8::1]:9000/hook")
        #expect(v6.host == "2001:db8::1")
        #expect(v6.port == 9000)
        #expect(v6.hostIsIPLiteral)
        #expect(v6.hostHeader == "[2001:db8::1]:9000")
        #expect(v6.text == "https://[2001:db8::1]:9000/hook")
        let v6Default = try parsed("https://[::1]/")
        #expect(v6Default.port == 443)
        #expect(v6Default.hostHeader == "[::1]")
        #expect(try parsed("https://[::ffff:10.0.0.1]/").host == "::ffff:10.0.0.1")
    }

    @Test func namesWithDigitsHyphensAndUnderscoresAreNames() throws {
        let url = try parsed("https://hook-1.svc_internal.example/")
        #expect(!url.hostIsIPLiteral)
        #expect(try parsed("https://localhost:8443/").host == "localhost")
    }

    @Test func onlyHTTPSIsAccepted() {
        #expect(refusal("http://example.com/") == "the url must start with https:// (plain http is not accepted)")
        #expect(refusal("HTTP://example.com/") == "the url must start with https:// (plain http is not accepted)")
        #expect(refusal("ftp://example.com/") == "the url must start with https://")
        #expect(refusal("example.com/hook") == "the url must start with https://")
        #expect(refusal("https:/example.com/") == "the url must start with https://")
        #expect(refusal("") == "the url is empty")
    }

    @Test func userInfoIsRefused() {
        #expect(refusal("https://user:pass@example.com/") == "the url must not carry a user name or password (@)")
        #expect(refusal("https://good.example@evil.example/") == "the url must not carry a user name or password (@)")
        // An @ in the path names no host and is allowed.
        #expect(refusal("https://example.com/users/@me") == nil)
    }

    @Test func fragmentsSpacesControlsAndNonASCIIAreRefused() {
        #expect(refusal("https://example.com/#top") == "the url must not have a fragment (#)")
        #expect(refusal("https://example.com/a b") == "the url must not contain spaces")
        #expect(refusal("https://example.com/a\tb") == "the url must not contain control characters")
        #expect(refusal("https://example.com/a\u{7F}") == "the url must not contain control characters")
        #expect(refusal("https://example.com/\r\nX-Injected: 1") == "the url must not contain control characters")
        #expect(refusal("https://exämple.com/") == "the url must be ASCII (percent-encode other characters)")
        #expect(refusal("https://example.com/caf\u{E9}") == "the url must be ASCII (percent-encode other characters)")
    }

    @Test func backslashesAndStrayPercentSignsAreRefused() {
        #expect(refusal("https://evil.example\\@good.example/") == "the url must not contain a backslash")
        #expect(refusal("https://example.com/a%2") == "the % at byte 22 must start a percent-encoded byte (%XX)")
        #expect(refusal("https://example.com/a%zz") == "the % at byte 22 must start a percent-encoded byte (%XX)")
        #expect(refusal("https://example.com/a%2f%2F") == nil)
    }

    @Test func hostsFollowTheEndpointSyntax() {
        let badHost = "is not a DNS name, an IPv4 address or an [IPv6] address"
        #expect(refusal("https:///path") == "the url must name a host after https://")
        #expect(refusal("https://?q") == "the url must name a host after https://")
        #expect(refusal("https://-bad.example/")?.hasSuffix(badHost) == true)
        #expect(refusal("https://example.com./")?.hasSuffix(badHost) == true)
        #expect(refusal("https://exa$mple.com/")?.hasSuffix(badHost) == true)
        #expect(refusal("https://256.0.0.1/")?.hasSuffix(badHost) == true)
        #expect(refusal("https://010.0.0.1/")?.hasSuffix(badHost) == true)
        #expect(refusal("https://1.2.3/")?.hasSuffix(badHost) == true)
        #expect(refusal("https://" + String(repeating: "a", count: 64) + ".com/")?.hasSuffix(badHost) == true)
        #expect(refusal("https://[1::2::3]/")?.hasSuffix(badHost) == true)
        #expect(refusal("https://[fe80::1%25eth0]/")?.hasSuffix(badHost) == true)
        #expect(refusal("https://[::1/") == "the url's IPv6 host must end with ]")
        #expect(refusal("https://[::1]x/") == "the url's IPv6 host must be followed by :port or a path")
        #expect(refusal("https://::1/") == "the url's IPv6 host must be in brackets, e.g. https://[2001:db8::1]/")
        #expect(refusal("https://2001:db8::1/") == "the url's IPv6 host must be in brackets, e.g. https://[2001:db8::1]/")
    }

    @Test func portsAreOneTo65535() {
        let message = "the url's port must be a number from 1 to 65535"
        #expect(refusal("https://example.com:0/") == message)
        #expect(refusal("https://example.com:65536/") == message)
        #expect(refusal("https://example.com:/") == message)
        #expect(refusal("https://example.com:44a/") == message)
        #expect(refusal("https://example.com:000443/") == message)
        #expect(refusal("https://[::1]:/") == message)
        #expect(refusal("https://[::1]:99999/") == message)
    }

    @Test func lengthIsCappedAt2048Bytes() throws {
        let prefix = "https://example.com/"
        let longest = prefix + String(repeating: "a", count: WebhookURL.maxLength - prefix.utf8.count)
        #expect(try parsed(longest).text == longest)
        #expect(refusal(longest + "a") == "the url must be at most 2048 bytes")
    }

    @Test func theFailableInitialiserAgreesWithParse() {
        #expect(WebhookURL("https://example.com/x")?.pathAndQuery == "/x")
        #expect(WebhookURL("http://example.com/x") == nil)
        guard case .failure(let error) = WebhookURL.parse("http://x") else {
            Issue.record("http://x was accepted")
            return
        }
        #expect("\(error)" == "the url must start with https:// (plain http is not accepted)")
    }
}
