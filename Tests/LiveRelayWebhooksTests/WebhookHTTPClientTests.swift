import Foundation
import LiveRelayEndpoint
import LiveRelayTLS
import LiveRelayTestSupport
import LiveRelayWebhooks
import NIOCore
import NIOPosix
import Testing

/// The client against Tests/Support/webhook_receiver.py: Python's TLS, HTTP
/// server and HMAC, sharing no code with LiveRelay. Everything stays on
/// loopback, so these clients allow private addresses, except where the
/// refusal is the point.
@Suite("WebhookHTTPClient", .serialized)
struct WebhookHTTPClientTests {
    static let secret = "whsec_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
    /// SANs localhost and 127.0.0.1.
    static let certificate = Result { try SelfSignedCertificate.generate() }

    /// A receiver presenting `certificate`, and a client that trusts it.
    private func receiverAndClient(
        script: [WebhookReceiver.Action] = [], policy: WebhookAddressPolicy = WebhookAddressPolicy(allowPrivateAddresses: true)
    ) async throws -> (WebhookReceiver, WebhookHTTPClient) {
        let (certificatePEM, keyPEM) = try Self.certificate.get()
        let receiver = try await WebhookReceiver.start(
            secret: Self.secret, script: script, certificatePEM: certificatePEM, privateKeyPEM: keyPEM)
        let client = try WebhookHTTPClient(
            group: MultiThreadedEventLoopGroup.singleton, trustRoots: .pem(.string(certificatePEM)), addressPolicy: policy)
        return (receiver, client)
    }

    private func url(_ text: String) throws -> WebhookURL {
        try WebhookURL.parse(text).get()
    }

    private func signed(_ body: [UInt8]) -> [(String, String)] {
        let now = Int64(Date().timeIntervalSince1970)
        return [(WebhookSignature.headerName, WebhookSignature.header(secret: Self.secret, timestamp: now, body: body))]
    }

    @Test func aPostArrivesSignedWithItsHeadersAndBodyIntact() async throws {
        let (receiver, client) = try await receiverAndClient()
        defer { receiver.stop() }
        let body = Array("{\"events\":[{\"seq\":1,\"kind\":\"activity.ended\",\"note\":\"caf\u{E9}\"}]}".utf8)
        let target = try url("https://127.0.0.1:\(receiver.port)/hooks/in?app=7")
        let result = await client.post(target, headers: signed(body) + [("X-Batch", "b-1")], body: body, timeout: .seconds(10))
        #expect(result == .response(status: 200))

        let requests = try receiver.requests()
        try #require(requests.count == 1)
        let request = requests[0]
        #expect(request.method == "POST")
        #expect(request.path == "/hooks/in?app=7")
        #expect(request.signatureOK)
        #expect(request.statusSent == 200)
        #expect(request.body == body)
        #expect(request.header("Host") == "127.0.0.1:\(receiver.port)")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("Content-Length") == "\(body.count)")
        #expect(request.header("User-Agent") == "LiveRelay-Webhook/1")
        #expect(request.header("Connection") == "close")
        #expect(request.header("X-Batch") == "b-1")
    }

    @Test func aWrongSecretIsCaughtByTheReceiver() async throws {
        let (receiver, client) = try await receiverAndClient()
        defer { receiver.stop() }
        let body = Array("{}".utf8)
        let header = WebhookSignature.header(secret: "whsec_wrong", timestamp: Int64(Date().timeIntervalSince1970), body: body)
        let result = await client.post(
            try url("https://127.0.0.1:\(receiver.port)/"), headers: [(WebhookSignature.headerName, header)], body: body,
            timeout: .seconds(10))
        #expect(result == .response(status: 200))
        #expect(try receiver.requests().map(\.signatureOK) == [false])
    }

    @Test func theServersStatusIsReportedWhateverItIs() async throws {
        let (receiver, client) = try await receiverAndClient(script: [.status(500), .status(410), .status(302)])
        defer { receiver.stop() }
        let body = Array("{\"n\":1}".utf8)
        let target = try url("https://127.0.0.1:\(receiver.port)/in")
        var statuses: [WebhookHTTPResult] = []
        for _ in 0..<4 {
            statuses.append(await client.post(target, headers: signed(body), body: body, timeout: .seconds(10)))
        }
        #expect(statuses == [500, 410, 302, 200].map { .response(status: $0) })
        #expect(try receiver.requests().map(\.statusSent) == [500, 410, 302, 200])
    }

    @Test func aServerThatAnswersTooLateIsATimeout() async throws {
        let (receiver, client) = try await receiverAndClient(script: [.delayed(seconds: 5, status: 200)])
        defer { receiver.stop() }
        let body = Array("{}".utf8)
        let result = await client.post(
            try url("https://127.0.0.1:\(receiver.port)/slow"), headers: signed(body), body: body, timeout: .seconds(1))
        #expect(result == .failure(.timeout(.seconds(1))))
        #expect(WebhookHTTPFailure.timeout(.seconds(1)).description == "timeout after 1 s")
    }

    @Test func aConnectionDroppedWithoutAnAnswerIsAProtocolFailure() async throws {
        let (receiver, client) = try await receiverAndClient(script: [.close])
        defer { receiver.stop() }
        let body = Array("{}".utf8)
        let result = await client.post(
            try url("https://127.0.0.1:\(receiver.port)/"), headers: signed(body), body: body, timeout: .seconds(10))
        guard case .failure(.protocolError(let reason)) = result else {
            Issue.record("expected a protocol failure, got \(result)")
            return
        }
        #expect(reason == "the server closed the connection without answering")
        #expect(try receiver.requests().map(\.statusSent) == [nil])
    }

    @Test func aCertificateFromAnotherCAFailsTheHandshake() async throws {
        let (receiver, _) = try await receiverAndClient()
        defer { receiver.stop() }
        let other = try SelfSignedCertificate.generate()
        let client = try WebhookHTTPClient(
            group: MultiThreadedEventLoopGroup.singleton, trustRoots: .pem(.string(other.certificatePEM)),
            addressPolicy: WebhookAddressPolicy(allowPrivateAddresses: true))
        let body = Array("{}".utf8)
        let result = await client.post(
            try url("https://127.0.0.1:\(receiver.port)/"), headers: signed(body), body: body, timeout: .seconds(10))
        guard case .failure(.tls(let reason)) = result else {
            Issue.record("expected a TLS failure, got \(result)")
            return
        }
        #expect(WebhookHTTPFailure.tls(reason).description.hasPrefix("TLS: certificate verify failed"))
        #expect(try receiver.requests().isEmpty)
    }

    @Test func aCertificateForAnotherNameFailsTheHandshake() async throws {
        let (certificatePEM, keyPEM) = try SelfSignedCertificate.generate(commonName: "hooks.example", subjectAltNames: ["hooks.example"])
        let receiver = try await WebhookReceiver.start(secret: Self.secret, certificatePEM: certificatePEM, privateKeyPEM: keyPEM)
        defer { receiver.stop() }
        let client = try WebhookHTTPClient(
            group: MultiThreadedEventLoopGroup.singleton, trustRoots: .pem(.string(certificatePEM)),
            addressPolicy: WebhookAddressPolicy(allowPrivateAddresses: true))
        let body = Array("{}".utf8)
        let result = await client.post(
            try url("https://127.0.0.1:\(receiver.port)/"), headers: signed(body), body: body, timeout: .seconds(10))
        guard case .failure(.tls) = result else {
            Issue.record("expected a TLS failure, got \(result)")
            return
        }
        #expect(try receiver.requests().isEmpty)
    }

    @Test func loopbackIsRefusedByTheDefaultPolicyBeforeAnyConnection() async throws {
        let (receiver, client) = try await receiverAndClient(policy: WebhookAddressPolicy())
        defer { receiver.stop() }
        let body = Array("{}".utf8)
        let result = await client.post(
            try url("https://127.0.0.1:\(receiver.port)/"), headers: signed(body), body: body, timeout: .seconds(10))
        #expect(result == .failure(.addressRefused("127.0.0.1 is a loopback address")))
        #expect(
            WebhookHTTPFailure.addressRefused("127.0.0.1 is a loopback address").description
                == "address refused: 127.0.0.1 is a loopback address")
        #expect(try receiver.requests().isEmpty)
    }

    @Test func aNameResolvingToLoopbackIsRefusedToo() async throws {
        let (receiver, client) = try await receiverAndClient(policy: WebhookAddressPolicy())
        defer { receiver.stop() }
        let body = Array("{}".utf8)
        let result = await client.post(
            try url("https://localhost:\(receiver.port)/"), headers: signed(body), body: body, timeout: .seconds(10))
        guard case .failure(.addressRefused(let reason)) = result else {
            Issue.record("expected an address refusal, got \(result)")
            return
        }
        #expect(reason.hasSuffix("is a loopback address"))
        #expect(try receiver.requests().isEmpty)
    }

    @Test func aResolvedNameIsDialledAddressByAddressAndVerifiedByName() async throws {
        // localhost may resolve to ::1 first, where nothing listens: the client moves on to 127.0.0.1.
        let (receiver, client) = try await receiverAndClient()
        defer { receiver.stop() }
        let body = Array("{\"via\":\"name\"}".utf8)
        let result = await client.post(
            try url("https://LOCALHOST:\(receiver.port)/named"), headers: signed(body), body: body, timeout: .seconds(10))
        #expect(result == .response(status: 200))
        let requests = try receiver.requests()
        #expect(requests.map(\.signatureOK) == [true])
        #expect(requests.first?.header("Host") == "localhost:\(receiver.port)")
    }

    @Test func aResolverThatCannotRunIsADNSFailure() async throws {
        // A pool never started refuses work, as one shut down does; no name is looked up.
        let pool = NIOThreadPool(numberOfThreads: 1)
        let client = try WebhookHTTPClient(
            group: MultiThreadedEventLoopGroup.singleton, trustRoots: .pem(.string(try Self.certificate.get().certificatePEM)),
            addressPolicy: WebhookAddressPolicy(allowPrivateAddresses: true), threadPool: pool)
        let result = await client.post(try url("https://localhost:1/"), headers: [], body: [], timeout: .seconds(10))
        #expect(result == .failure(.dns("the resolver is shut down")))
    }

    @Test func nothingListeningIsAConnectFailure() async throws {
        let (receiver, client) = try await receiverAndClient()
        let port = receiver.port
        receiver.stop()
        let body = Array("{}".utf8)
        let result = await client.post(try url("https://127.0.0.1:\(port)/"), headers: signed(body), body: body, timeout: .seconds(10))
        #expect(result == .failure(.connect("connection refused")))
        #expect(WebhookHTTPFailure.connect("connection refused").description == "connect: connection refused")
    }

    @Test func theCallersContentTypeReplacesOursButFramingStaysTheClients() async throws {
        let (receiver, client) = try await receiverAndClient()
        defer { receiver.stop() }
        let body = Array("{\"specversion\":\"1.0\"}".utf8)
        let headers =
            signed(body) + [
                ("content-type", "application/cloudevents+json"), ("Content-Length", "999"), ("Host", "evil.example"),
                ("Connection", "keep-alive"), ("Transfer-Encoding", "chunked"),
            ]
        let result = await client.post(
            try url("https://127.0.0.1:\(receiver.port)/"), headers: headers, body: body, timeout: .seconds(10))
        #expect(result == .response(status: 200))
        let request = try #require(try receiver.requests().first)
        #expect(request.signatureOK)
        #expect(request.body == body)
        #expect(request.header("Content-Type") == "application/cloudevents+json")
        #expect(request.header("Content-Length") == "\(body.count)")
        #expect(request.header("Host") == "127.0.0.1:\(receiver.port)")
        #expect(request.header("Connection") == "close")
        #expect(request.header("Transfer-Encoding") == nil)
    }

    @Test func anUnsendableHeaderIsRefusedBeforeDialling() async throws {
        let (receiver, client) = try await receiverAndClient()
        defer { receiver.stop() }
        let target = try url("https://127.0.0.1:\(receiver.port)/")
        let injected = await client.post(target, headers: [("X-Note", "a\r\nX-Injected: 1")], body: [], timeout: .seconds(10))
        #expect(injected == .failure(.invalidRequest("the value of header 'X-Note' has a control character")))
        let badName = await client.post(target, headers: [("X Note", "a")], body: [], timeout: .seconds(10))
        #expect(badName == .failure(.invalidRequest("the header name 'X Note' is not an HTTP token")))
        #expect(try receiver.requests().isEmpty)
    }

    @Test func failuresDescribeThemselvesBriefly() {
        #expect(
            WebhookHTTPFailure.dns("hooks.example: Name or service not known").description
                == "DNS: hooks.example: Name or service not known")
        #expect(WebhookHTTPFailure.tls("certificate verify failed").description == "TLS: certificate verify failed")
        #expect(WebhookHTTPFailure.timeout(.seconds(10)).description == "timeout after 10 s")
        #expect(WebhookHTTPFailure.timeout(.milliseconds(1500)).description == "timeout after 1500 ms")
        #expect(WebhookHTTPFailure.protocolError("malformed response").description == "HTTP: malformed response")
        #expect(WebhookHTTPFailure.cancelled.description == "cancelled")
    }

    @Test func cancellingTheCallingTaskEndsTheCall() async throws {
        let (receiver, client) = try await receiverAndClient(script: [.delayed(seconds: 5, status: 200)])
        defer { receiver.stop() }
        let body = Array("{}".utf8)
        let target = try url("https://127.0.0.1:\(receiver.port)/")
        let headers = signed(body)
        let task = Task { await client.post(target, headers: headers, body: body, timeout: .seconds(30)) }
        try await eventually("the request reaches the receiver", timeout: .seconds(60)) { ((try? receiver.requests().count) ?? 0) == 1 }
        task.cancel()
        #expect(await task.value == .failure(.cancelled))
    }
}
