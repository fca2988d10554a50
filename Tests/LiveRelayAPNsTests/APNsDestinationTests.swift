import LiveRelayAPNs
import Testing

/// An endpoint is "apple" or a host and a port; what a connect and a certificate check need of it.
struct APNsDestinationTests {
    @Test func aHostAndPortParsesIntoWhatAConnectUses() throws {
        #expect(try APNsDestination(parsing: nil) == .apple)
        #expect(try APNsDestination(parsing: "apple") == .apple)
        #expect(try APNsDestination(parsing: "127.0.0.1:2197") == .custom(host: "127.0.0.1", port: 2197))
        #expect(try APNsDestination(parsing: "mock-apns.internal:65535") == .custom(host: "mock-apns.internal", port: 65535))
        // An IPv6 host loses its brackets (getaddrinfo and the certificate's IP check want none)
        // and gets them back wherever it is written next to a port.
        let v6 = try APNsDestination(parsing: "[::1]:8443")
        #expect(v6 == .custom(host: "::1", port: 8443))
        #expect(v6.description == "[::1]:8443")
        #expect(v6.endpoint(for: .production).authority == "[::1]:8443")
        #expect(APNsEndpoint.custom(host: "::1", port: 443).authority == "[::1]")
        #expect(APNsEndpoint.custom(host: "mock", port: 443).authority == "mock")
        #expect(APNsEndpoint.custom(host: "mock", port: 2197).authority == "mock:2197")
    }

    @Test(arguments: ["https://h:443", "h/x:443", "::1:8443", "[::1]", "h:+443", "h:0", "h:65536", "h..x:443", "300.0.0.1:443", "h", ""])
    func anythingElseIsRefused(_ text: String) {
        #expect(throws: APNsDestinationError.self) { try APNsDestination(parsing: text) }
    }
}
