import Foundation
import LiveRelayTestSupport
import LiveRelayWebhooks
import Testing

@Suite("WebhookSignature")
struct WebhookSignatureTests {
    static let secret = "whsec_5f2b8a0c9d1e4f3a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"

    /// HMAC-SHA256 by the `openssl` command, an implementation that shares nothing with ours
    /// but the library: the key is given as text on the command line, the message on stdin.
    static func opensslHMAC(key: String, message: [UInt8]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "dgst", "-sha256", "-hmac", key]
        process.standardError = FileHandle.nullDevice
        let pipes = try ChildProcesses.start(process, input: true, output: .stdout)
        let (input, output) = (pipes.input!, pipes.output!)
        try input.fileHandleForWriting.write(contentsOf: Data(message))
        try input.fileHandleForWriting.close()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // "HMAC-SHA2-256(stdin)= <hex>" (the label differs between OpenSSL releases).
        guard process.terminationStatus == 0, let hex = text.split(separator: " ").last else {
            throw TestFailure("openssl dgst failed: \(text)")
        }
        return hex.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(arguments: [
        (Int64(1_700_000_000), "{\"events\":[{\"id\":1}]}"),
        (Int64(0), ""),
        (Int64(1_234_567_890_123), "line one\nline two\r\n\u{0}binary\u{1}é"),
    ])
    func headerMatchesAnIndependentHMAC(timestamp: Int64, body: String) throws {
        let bytes = Array(body.utf8)
        let expected = try Self.opensslHMAC(key: Self.secret, message: Array("\(timestamp).".utf8) + bytes)
        #expect(expected.count == 64)
        #expect(WebhookSignature.header(secret: Self.secret, timestamp: timestamp, body: bytes) == "t=\(timestamp),v1=\(expected)")
    }

    @Test func aLargeBodyMatchesToo() throws {
        let body = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let expected = try Self.opensslHMAC(key: "k", message: Array("42.".utf8) + body)
        #expect(WebhookSignature.header(secret: "k", timestamp: 42, body: body) == "t=42,v1=\(expected)")
    }

    @Test func rotationSignsWithEverySecretInOrder() throws {
        let body = Array("{}".utf8)
        let header = WebhookSignature.header(secrets: ["whsec_new", "whsec_old"], timestamp: 10, body: body)
        let new = try Self.opensslHMAC(key: "whsec_new", message: Array("10.{}".utf8))
        let old = try Self.opensslHMAC(key: "whsec_old", message: Array("10.{}".utf8))
        #expect(header == "t=10,v1=\(new),v1=\(old)")
        #expect(WebhookSignature.verify(header: header, secret: "whsec_old", body: body, now: 10))
        #expect(WebhookSignature.verify(header: header, secret: "whsec_new", body: body, now: 10))
        #expect(!WebhookSignature.verify(header: header, secret: "whsec_other", body: body, now: 10))
    }

    @Test func verifyAcceptsItsOwnHeaderWithinTolerance() {
        let body = Array("{\"a\":1}".utf8)
        let header = WebhookSignature.header(secret: Self.secret, timestamp: 1_000, body: body)
        for now in [Int64(1_000), 1_300, 700] {
            #expect(WebhookSignature.verify(header: header, secret: Self.secret, body: body, now: now))
        }
        #expect(WebhookSignature.verify(header: header, secret: Self.secret, body: body, now: 1_010, tolerance: 10))
    }

    @Test func verifyRefusesWrongSecretAlteredBodyAndStaleOrFutureTimestamps() {
        let body = Array("{\"a\":1}".utf8)
        let header = WebhookSignature.header(secret: Self.secret, timestamp: 1_000, body: body)
        #expect(!WebhookSignature.verify(header: header, secret: Self.secret + "x", body: body, now: 1_000))
        #expect(!WebhookSignature.verify(header: header, secret: "", body: body, now: 1_000))
        #expect(!WebhookSignature.verify(header: header, secret: Self.secret, body: Array("{\"a\":2}".utf8), now: 1_000))
        #expect(!WebhookSignature.verify(header: header, secret: Self.secret, body: body + [0x20], now: 1_000))
        #expect(!WebhookSignature.verify(header: header, secret: Self.secret, body: [], now: 1_000))
        #expect(!WebhookSignature.verify(header: header, secret: Self.secret, body: body, now: 1_301))
        #expect(!WebhookSignature.verify(header: header, secret: Self.secret, body: body, now: 699))
        #expect(!WebhookSignature.verify(header: header, secret: Self.secret, body: body, now: Int64.min))
        #expect(!WebhookSignature.verify(header: header, secret: Self.secret, body: body, now: 1_011, tolerance: 10))
        // The timestamp is signed: moving it forward breaks the signature.
        let moved = header.replacingOccurrences(of: "t=1000", with: "t=1001")
        #expect(!WebhookSignature.verify(header: moved, secret: Self.secret, body: body, now: 1_000))
    }

    @Test func verifyRefusesMalformedHeaders() {
        let body = Array("{}".utf8)
        let good = WebhookSignature.header(secret: Self.secret, timestamp: 5, body: body)
        let hex = String(good.split(separator: "=").last!)
        for header in [
            "", "t=5", "v1=\(hex)", "t=,v1=\(hex)", "t=-5,v1=\(hex)", "t=5x,v1=\(hex)", "t=5,t=5,v1=\(hex)",
            "t=5,v1=", "t=5,v1=\(hex.dropLast())", "t=5,v1=\(hex)00", "t=5,v1=\(hex.dropLast())g", "t=5;v1=\(hex)",
            "t=5,v1", "t=99999999999999999999,v1=\(hex)", "t=5,v0=\(hex)",
        ] {
            #expect(!WebhookSignature.verify(header: header, secret: Self.secret, body: body, now: 5), "\(header)")
        }
        // Spaces around fields, upper-case hex and unknown keys are read as a receiver would.
        #expect(WebhookSignature.verify(header: "t=5, v1=\(hex.uppercased()), v9=zz", secret: Self.secret, body: body, now: 5))
        #expect(WebhookSignature.verify(header: "v1=\(hex),t=5", secret: Self.secret, body: body, now: 5))
    }

    @Test func mintedSecretsAreWhsecAnd64LowercaseHexDigitsAndDiffer() {
        let secrets = (0..<64).map { _ in WebhookSignature.mintSecret() }
        for secret in secrets {
            #expect(secret.hasPrefix("whsec_"))
            let digits = secret.dropFirst("whsec_".count)
            #expect(digits.count == 64)
            #expect(digits.allSatisfy { ("0"..."9").contains($0) || ("a"..."f").contains($0) })
        }
        #expect(Set(secrets).count == secrets.count)
    }

    @Test func theHeaderNameIsLiveRelaySignature() {
        #expect(WebhookSignature.headerName == "LiveRelay-Signature")
    }
}
