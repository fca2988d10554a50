import Foundation
import Testing

@testable import LiveRelayAPNs

/// The public-key fingerprint admin replies show, checked against the openssl command, the way an
/// operator matches a `.p8` file with what the registry holds.
struct APNsSigningKeyTests {
    @Test func thePublicKeyFingerprintIsWhatOpenSSLComputesFromTheP8() throws {
        let key = try APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("fingerprint-\(UUID().uuidString).p8")
        try key.pkcs8PEM.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let openssl = try run("/bin/sh", ["-c", "openssl pkey -in '\(file.path)' -pubout -outform DER | openssl dgst -sha256 -r"])
        #expect(openssl.status == 0, "\(openssl.output)")
        let expected = try #require(openssl.output.split(separator: " ").first.map(String.init))
        #expect(expected.count == 64)
        #expect(try key.publicKeySHA256 == expected)

        let reloaded = try APNsSigningKey(contentsOfFile: file.path, keyID: "KEY1234567", teamID: "TEAM123456")
        #expect(try reloaded.publicKeySHA256 == expected, "the same key read back")
        let other = try APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")
        #expect(try other.publicKeySHA256 != expected, "another key")
    }
}
