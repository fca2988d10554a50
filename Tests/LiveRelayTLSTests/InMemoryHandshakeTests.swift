import LiveRelayTLS
import NIOCore
import NIOEmbedded
import Testing

/// A client and a server `OpenSSLHandler` driven against each other on EmbeddedChannels.
@Suite("TLS handler in memory", .timeLimit(.minutes(2)))
struct InMemoryHandshakeTests {
    @Test func handshakeNegotiatesTLS13AndServerPreferredALPN() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(
            server: fixtures.serverConfiguration(alpn: ["h2", "http/1.1"]),
            client: fixtures.clientConfiguration(alpn: ["http/1.1", "h2"]))
        #expect(pair.clientHandler.state == .idle)
        try pair.handshake()

        #expect(pair.clientHandler.state == .active)
        #expect(pair.serverHandler.state == .active)
        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.serverRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.clientHandler.negotiatedTLSVersion == "TLSv1.3")
        #expect(pair.clientHandler.peerCertificate?.subject.contains("CN=localhost") == true)
        #expect(pair.serverHandler.peerCertificate == nil)
        #expect(pair.serverHandler.serverName == "localhost")  // SNI
        #expect(pair.clientRecorder.errors.isEmpty && pair.serverRecorder.errors.isEmpty)
    }

    @Test func tls12UsesAnECDHEAEADSuite() throws {
        let fixtures = try TLSFixtures.get()
        var client = fixtures.clientConfiguration(alpn: ["h2"])
        client.maximumTLSVersion = .tlsv12
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(alpn: ["h2"]), client: client)
        try pair.handshake()
        #expect(pair.serverHandler.negotiatedTLSVersion == "TLSv1.2")
        let cipher = try #require(pair.serverHandler.negotiatedCipher)
        #expect(cipher.hasPrefix("ECDHE-") && (cipher.contains("GCM") || cipher.contains("CHACHA20")))
        #expect(pair.serverHandler.negotiatedProtocol == "h2")
    }

    @Test func dataFlowsBothWaysIncludingOneMegabyte() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.handshake()

        let big = ByteBuffer.pattern(size: 1 << 20)
        let written = pair.client.writeAndFlush(big)
        try pair.interact()
        try written.wait()
        #expect(pair.serverRecorder.received == big)

        try pair.server.writeAndFlush(ByteBuffer(string: "pong")).wait()
        try pair.interact()
        #expect(pair.clientRecorder.received == ByteBuffer(string: "pong"))
        #expect(pair.clientRecorder.errors.isEmpty && pair.serverRecorder.errors.isEmpty)
    }

    @Test func writesBeforeTheHandshakeAreDeliveredAfterIt() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        // Written and flushed before the channel is even active.
        let first = pair.client.write(ByteBuffer(string: "early "))
        let second = pair.client.writeAndFlush(ByteBuffer(string: "bird"))
        try pair.handshake()
        try first.wait()
        try second.wait()
        #expect(pair.serverRecorder.received == ByteBuffer(string: "early bird"))
    }

    @Test func aFlushOfManyWritesBecomesOneNetworkWrite() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.handshake()
        var futures: [EventLoopFuture<Void>] = []
        for index in 0..<10 {
            futures.append(pair.client.write(ByteBuffer(string: "message \(index);")))
        }
        pair.client.flush()
        let counts = try pair.interact()
        #expect(counts.clientToServer == 1)
        for future in futures { try future.wait() }
        #expect(pair.serverRecorder.received.readableBytes == (0..<10).map { "message \($0);" }.joined().utf8.count)
    }

    /// Small writes of one flush are sealed a full record at a time, not a record
    /// each (an HTTP/2 stream is two or three small writes); a write of a record or
    /// more goes on its own, between them, in order.
    @Test func smallWritesOfOneFlushAreSealedInFullRecords() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.handshake()
        let pattern = ByteBuffer.pattern(size: 80_000)
        // 200 writes of 100 bytes, one of 40,000, 10 of 100: 20,000 + 40,000 + 1,000 bytes.
        let sizes = Array(repeating: 100, count: 200) + [40_000] + Array(repeating: 100, count: 10)
        var offset = 0
        var futures: [EventLoopFuture<Void>] = []
        for size in sizes {
            futures.append(pair.client.write(pattern.getSlice(at: offset, length: size)!))
            offset += size
        }
        pair.client.flush()
        var ciphertext = ByteBuffer()
        while var bytes = try pair.client.readOutbound(as: ByteBuffer.self) { ciphertext.writeBuffer(&bytes) }
        var records: [Int] = []
        var reader = ciphertext
        while let header = reader.readBytes(length: 5) {
            #expect(header[0] == 23)  // application data
            let length = Int(header[3]) << 8 | Int(header[4])
            records.append(length)
            reader.moveReaderIndex(forwardBy: length)
        }
        // 163 small writes fill the first record (16,300 bytes), 37 the second; the
        // big write is three records of its own; the last 10 small writes one more.
        #expect(records.count == 6)
        #expect(records.allSatisfy { $0 <= 16_384 + 256 })
        try pair.server.writeInbound(ciphertext)
        try pair.interact()
        for future in futures { try future.wait() }
        #expect(pair.serverRecorder.received == pattern.getSlice(at: 0, length: offset))
    }

    @Test(arguments: [true, false])
    func closeNotifyIsSentAndAnswered(clientInitiates: Bool) throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.handshake()
        let (closer, closerHandler, peer, peerHandler) =
            clientInitiates
            ? (pair.client, pair.clientHandler, pair.server, pair.serverHandler)
            : (pair.server, pair.serverHandler, pair.client, pair.clientHandler)

        let closed = closer.close()
        #expect(closerHandler.state == .closing)
        #expect(closer.isActive)  // waiting for the peer's close_notify
        try pair.interact()
        try closed.wait()
        #expect(!closer.isActive && !peer.isActive)
        #expect(closerHandler.state == .closed && peerHandler.state == .closed)
        #expect(pair.clientRecorder.errors.isEmpty && pair.serverRecorder.errors.isEmpty)
    }

    @Test func eofWithoutCloseNotifyIsReportedAsUncleanShutdown() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.handshake()
        // The TCP connection ends with no close_notify.
        pair.server.pipeline.fireChannelInactive()
        #expect(pair.serverRecorder.tlsErrors == [.uncleanShutdown])
        #expect(pair.serverHandler.state == .closed)
    }

    @Test func halfClosedEOFGoesThroughOpenSSLAsUnexpectedEOF() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.handshake()
        try pair.client.writeAndFlush(ByteBuffer(string: "partial")).wait()
        try pair.interact()
        // With half-closure on, NIO reports the FIN as inputClosed; OpenSSL 3 then
        // answers SSL_read with SSL_R_UNEXPECTED_EOF_WHILE_READING.
        pair.server.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(pair.serverRecorder.received == ByteBuffer(string: "partial"))
        #expect(pair.serverRecorder.tlsErrors == [.uncleanShutdown])
        #expect(!pair.server.isActive)
    }

    @Test func mismatchedALPNFailsTheHandshakeOnBothSides() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(
            server: fixtures.serverConfiguration(alpn: ["h2"]), client: fixtures.clientConfiguration(alpn: ["http/1.1"]))
        try pair.handshake()
        let serverError = try #require(pair.serverRecorder.tlsErrors.first)
        let clientError = try #require(pair.clientRecorder.tlsErrors.first)
        guard case .handshakeFailed(let serverReason) = serverError, case .handshakeFailed(let clientReason) = clientError else {
            Issue.record("expected handshake failures, got \(serverError) / \(clientError)")
            return
        }
        #expect(serverReason.contains("application protocol"))
        #expect(clientReason.contains("no application protocol"))
        #expect(!pair.client.isActive && !pair.server.isActive)
        #expect(pair.clientRecorder.events.isEmpty)
    }

    @Test func aCertificateFromAnUntrustedCAFailsVerification() throws {
        let fixtures = try TLSFixtures.get()
        let rogue = TLSConfiguration.makeServerConfiguration(
            certificateChain: .file(fixtures.rogueServerCertificate), privateKey: .file(fixtures.rogueServerKey))
        let pair = try InMemoryPair(server: rogue, client: fixtures.clientConfiguration())
        try pair.handshake()
        guard case .handshakeFailed(let reason) = try #require(pair.clientRecorder.tlsErrors.first) else {
            Issue.record("expected a handshake failure")
            return
        }
        #expect(reason.contains("certificate verify failed"))
        #expect(reason.contains("unable to get local issuer certificate"))
        #expect(pair.serverRecorder.tlsErrors.count == 1)
        #expect(!pair.client.isActive && !pair.server.isActive)
    }

    @Test func aHostnameTheCertificateDoesNotNameFailsVerification() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(
            server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration(hostname: "api.example.com"))
        try pair.handshake()
        guard case .handshakeFailed(let reason) = try #require(pair.clientRecorder.tlsErrors.first) else {
            Issue.record("expected a handshake failure")
            return
        }
        #expect(reason.contains("hostname mismatch"))
    }

    @Test func theCertificateVerifiesForItsIPAddressSAN() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(
            server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration(hostname: "127.0.0.1"))
        try pair.handshake()
        #expect(pair.clientHandler.state == .active)
        #expect(pair.clientRecorder.errors.isEmpty)
        #expect(pair.serverHandler.serverName == nil)  // RFC 6066: no SNI for IP literals
    }

    @Test func mutualTLSAcceptsAClientCertificateFromTheCA() throws {
        let fixtures = try TLSFixtures.get()
        var server = fixtures.serverConfiguration()
        server.certificateVerification = .fullVerification
        server.trustRoots = .pem(.file(fixtures.caCertificate))
        var client = fixtures.clientConfiguration()
        client.certificateChain = .file(fixtures.clientCertificate)
        client.privateKey = .file(fixtures.clientKey)
        let pair = try InMemoryPair(server: server, client: client)
        try pair.handshake()
        try pair.client.writeAndFlush(ByteBuffer(string: "hello")).wait()
        try pair.interact()
        #expect(pair.serverRecorder.received == ByteBuffer(string: "hello"))
        #expect(pair.serverHandler.peerCertificate?.subject.contains("CN=client-1") == true)
        #expect(pair.serverRecorder.errors.isEmpty)
    }

    @Test func mutualTLSRejectsAClientWithoutACertificate() throws {
        let fixtures = try TLSFixtures.get()
        var server = fixtures.serverConfiguration()
        server.certificateVerification = .fullVerification
        server.trustRoots = .pem(.file(fixtures.caCertificate))
        let pair = try InMemoryPair(server: server, client: fixtures.clientConfiguration())
        try pair.connect()
        // TLS 1.3: the client finishes its side before the server checks it, so this
        // write is encrypted and sent; the server must still never deliver it.
        pair.client.writeAndFlush(ByteBuffer(string: "should not arrive"), promise: nil)
        try pair.interact()
        guard case .handshakeFailed(let reason) = try #require(pair.serverRecorder.tlsErrors.first) else {
            Issue.record("expected a handshake failure")
            return
        }
        #expect(reason.contains("peer did not return a certificate"))
        #expect(pair.serverRecorder.received.readableBytes == 0)
        #expect(!pair.server.isActive)
        // TLS 1.3: the client finished its side and learns of the rejection from the alert.
        #expect(pair.clientRecorder.tlsErrors.count == 1)
        #expect(!pair.client.isActive)
    }

    @Test func optionalClientVerificationAcceptsAClientWithoutACertificate() throws {
        let fixtures = try TLSFixtures.get()
        var server = fixtures.serverConfiguration()
        server.certificateVerification = .optional
        server.trustRoots = .pem(.file(fixtures.caCertificate))
        let pair = try InMemoryPair(server: server, client: fixtures.clientConfiguration())
        try pair.handshake()
        #expect(pair.serverHandler.state == .active)
        #expect(pair.serverHandler.peerCertificate == nil)
    }

    @Test func handshakeTimeoutClosesAServerWhoseClientNeverSpeaks() throws {
        let fixtures = try TLSFixtures.get()
        var configuration = fixtures.serverConfiguration()
        configuration.handshakeTimeout = .seconds(3)
        let pair = try InMemoryPair(server: configuration, client: fixtures.clientConfiguration())
        try pair.server.connect(to: InMemoryPair.address).wait()
        #expect(pair.serverHandler.state == .handshaking)
        pair.server.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(pair.server.isActive)
        pair.server.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(pair.serverRecorder.tlsErrors == [.handshakeTimeout])
        #expect(!pair.server.isActive)
    }

    @Test func handshakeTimeoutIsCancelledByACompletedHandshake() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.handshake()
        pair.server.embeddedEventLoop.advanceTime(by: .seconds(60))
        pair.client.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(pair.server.isActive && pair.client.isActive)
        #expect(pair.serverRecorder.errors.isEmpty && pair.clientRecorder.errors.isEmpty)
    }

    @Test func aCloseThatIsNeverAnsweredCompletesAfterTheShutdownTimeout() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.handshake()
        let closed = pair.client.close()
        pair.client.embeddedEventLoop.advanceTime(by: .seconds(5))
        try closed.wait()
        #expect(!pair.client.isActive)
        let late = pair.client.writeAndFlush(ByteBuffer(string: "late"))
        #expect(throws: ChannelError.ioOnClosedChannel) { try late.wait() }
    }

    @Test func plaintextFromThePeerFailsTheHandshakeAndCloses() throws {
        let fixtures = try TLSFixtures.get()
        let pair = try InMemoryPair(server: fixtures.serverConfiguration(), client: fixtures.clientConfiguration())
        try pair.server.connect(to: InMemoryPair.address).wait()
        try pair.server.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"))
        // OpenSSL sends no alert to something that is not TLS at all; it just fails.
        guard case .handshakeFailed(let reason) = try #require(pair.serverRecorder.tlsErrors.first) else {
            Issue.record("expected a handshake failure")
            return
        }
        #expect(reason.contains("http request"))
        #expect(!pair.server.isActive)
    }
}
