import Foundation
import NIOCore
import Testing

@testable import LiveRelayTLS

@Suite("TLS connection state machine")
struct TLSConnectionStateMachineTests {
    @Test func happyPathWithLocalClose() {
        var machine = TLSConnectionStateMachine()
        #expect(machine.state == .idle)
        #expect(machine.writeRequested() == .buffer)
        #expect(machine.channelActive() == .startHandshake)
        #expect(machine.state == .handshaking)
        #expect(machine.channelActive() == .none)
        #expect(!machine.canEncrypt)
        #expect(machine.bytesReceived() == .handshake)
        #expect(machine.handshakeCompleted() == true)
        #expect(machine.state == .active && machine.canEncrypt)
        #expect(machine.bytesReceived() == .read)
        #expect(machine.closeRequested() == .sendCloseNotify)
        #expect(machine.state == .closing)
        #expect(machine.writeRequested() == .fail)
        #expect(machine.bytesReceived() == .read)  // still reading for the peer's close_notify
        #expect(machine.closeRequested() == .joinPendingClose)
        #expect(machine.closeNotifyReceived() == .completeClose)
        #expect(machine.state == .closed)
        #expect(machine.bytesReceived() == .discard)
        #expect(machine.closeRequested() == .alreadyClosed)
        #expect(machine.channelInactive() == .none)
    }

    @Test func serverStartsItsHandshakeOnFirstBytes() {
        var machine = TLSConnectionStateMachine()
        #expect(machine.bytesReceived() == .handshake)
        #expect(machine.state == .handshaking)
    }

    @Test func peerInitiatedClose() {
        var machine = TLSConnectionStateMachine()
        _ = machine.channelActive()
        _ = machine.handshakeCompleted()
        #expect(machine.closeNotifyReceived() == .replyAndClose)
        #expect(machine.state == .closed)
        #expect(machine.closeNotifyReceived() == .ignore)
    }

    @Test func closeBeforeTheHandshakeClosesAtOnce() {
        var machine = TLSConnectionStateMachine()
        _ = machine.channelActive()
        #expect(machine.closeRequested() == .closeNow)
        #expect(machine.state == .closed)
        #expect(machine.handshakeCompleted() == false)
        #expect(machine.handshakeTimedOut() == false)
    }

    @Test func inactiveReportsWhatWasCutShort() {
        var handshaking = TLSConnectionStateMachine()
        _ = handshaking.channelActive()
        #expect(handshaking.channelInactive() == .reportHandshakeAborted)

        var active = TLSConnectionStateMachine()
        _ = active.channelActive()
        _ = active.handshakeCompleted()
        #expect(active.channelInactive() == .reportUncleanShutdown)
        #expect(active.state == .closed)

        var closing = TLSConnectionStateMachine()
        _ = closing.channelActive()
        _ = closing.handshakeCompleted()
        _ = closing.closeRequested()
        #expect(closing.channelInactive() == .completeClose)

        var idle = TLSConnectionStateMachine()
        #expect(idle.channelInactive() == .none)
    }

    @Test func onlyTheFirstFailureIsReported() {
        var machine = TLSConnectionStateMachine()
        _ = machine.channelActive()
        #expect(machine.failed() == true)
        #expect(machine.failed() == false)
        #expect(machine.channelInactive() == .none)
    }

    @Test func timeoutsApplyOnlyInTheirStates() {
        var machine = TLSConnectionStateMachine()
        _ = machine.channelActive()
        _ = machine.handshakeCompleted()
        #expect(machine.handshakeTimedOut() == false)
        #expect(machine.shutdownTimedOut() == false)
        _ = machine.closeRequested()
        #expect(machine.shutdownTimedOut() == true)
        #expect(machine.state == .closed)

        var slow = TLSConnectionStateMachine()
        _ = slow.channelActive()
        #expect(slow.handshakeTimedOut() == true)
        #expect(slow.state == .closed)
    }
}

@Suite("TLS context and certificates", .timeLimit(.minutes(1)))
struct TLSContextTests {
    @Test func aMissingCertificateFileNamesTheSettingAndTheFile() throws {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: .file("/nonexistent/server.pem"), privateKey: .file("/nonexistent/server.key"))
        let error = #expect(throws: TLSContextError.self) { try TLSContext(configuration: configuration) }
        #expect(error?.setting == "certificate chain")
        #expect(error?.source?.contains("/nonexistent/server.pem") == true)
        #expect(error?.openSSLError.contains("No such file") == true)
    }

    @Test func aKeyThatDoesNotMatchTheCertificateIsRejected() throws {
        let fixtures = try TLSFixtures.get()
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: .file(fixtures.serverCertificate), privateKey: .file(fixtures.clientKey))
        let error = #expect(throws: TLSContextError.self) { try TLSContext(configuration: configuration) }
        #expect(error?.setting == "private key")
        #expect(error?.description.contains("key values mismatch") == true)
    }

    @Test func badPEMBytesAreRejectedWithoutEchoingThem() throws {
        let secret = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n"
        let (certificate, _) = try SelfSignedCertificate.generate()
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: .string(certificate), privateKey: .string(secret))
        let error = #expect(throws: TLSContextError.self) { try TLSContext(configuration: configuration) }
        #expect(error?.setting == "private key")
        #expect(error?.description.contains("c2VjcmV0") == false)
    }

    @Test func anUnknownCipherIsRejected() {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.cipherList = "NOT-A-CIPHER"
        let error = #expect(throws: TLSContextError.self) { try TLSContext(configuration: configuration) }
        #expect(error?.setting == "cipher list (TLS 1.2)")
    }

    @Test func anEmptyALPNNameIsRejected() {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = ["h2", ""]
        let error = #expect(throws: TLSContextError.self) { try TLSContext(configuration: configuration) }
        #expect(error?.setting == "application protocols (ALPN)")
    }

    @Test func fullVerificationWithoutAHostnameIsRefused() throws {
        let context = try TLSContext(configuration: .makeClientConfiguration())
        let error = #expect(throws: TLSContextError.self) { try OpenSSLHandler(context: context, role: .client) }
        #expect(error?.setting == "server hostname")
    }

    @Test func aSelfSignedCertificateServesAndVerifiesForLocalhostAndLoopback() throws {
        let (certificate, key) = try SelfSignedCertificate.generate(commonName: "liverelay-dev")
        #expect(certificate.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(key.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let server = TLSConfiguration.makeServerConfiguration(certificateChain: .string(certificate), privateKey: .string(key))
        for hostname in ["localhost", "127.0.0.1"] {
            var client = TLSConfiguration.makeClientConfiguration()
            client.trustRoots = .pem(.string(certificate))
            client.serverHostname = hostname
            let pair = try InMemoryPair(server: server, client: client)
            try pair.handshake()
            #expect(pair.clientHandler.state == .active, "\(hostname): \(pair.clientRecorder.errors)")
            #expect(pair.clientHandler.peerCertificate?.subject.contains("CN=liverelay-dev") == true)
        }
    }

    @Test func aSelfSignedCertificateIsAnECP256CertificateWithTheRequestedSANs() throws {
        let (certificate, _) = try SelfSignedCertificate.generate(
            commonName: "dev", subjectAltNames: ["localhost", "127.0.0.1", "relay.internal"], validity: .seconds(86_400))
        let path = NSTemporaryDirectory() + "lr-selfsigned-\(UUID().uuidString).pem"
        try certificate.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let text = try runProcess(["openssl", "x509", "-in", path, "-noout", "-text"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("prime256v1"))
        #expect(text.stdout.contains("DNS:localhost, IP Address:127.0.0.1, DNS:relay.internal"))
        #expect(text.stdout.contains("ecdsa-with-SHA256"))
    }
}
