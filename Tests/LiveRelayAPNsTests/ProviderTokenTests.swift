import COpenSSL
import Foundation
import LiveRelayTestSupport
import Testing

@testable import LiveRelayAPNs

@Suite("ES256 provider tokens: signing")
struct ProviderTokenSigningTests {
    @Test func signThenVerifyRoundTrips() throws {
        let jwt = try testKey.makeProviderToken(issuedAt: testNow)
        let result = try verifier().verify(jwt, nowSeconds: testNow + 10)
        #expect(result == .success(ProviderTokenClaims(keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: testNow)))
    }

    @Test func tokenHasTheExactHeaderClaimsAndA64ByteSignature() throws {
        let p = parts(try testKey.makeProviderToken(issuedAt: testNow))
        #expect(p.count == 3)
        #expect(Base64URL.decode(Array(p[0].utf8)).map { String(decoding: $0, as: UTF8.self) } == #"{"alg":"ES256","kid":"KEY1234567"}"#)
        #expect(Base64URL.decode(Array(p[1].utf8)).map { String(decoding: $0, as: UTF8.self) } == #"{"iss":"TEAM123456","iat":1700000000}"#)
        #expect(Base64URL.decode(Array(p[2].utf8))?.count == 64)
        #expect(!p.joined().contains("=") && !p.joined().contains("+") && !p.joined().contains("/"))
    }

    @Test func pkcs8ExportReloadsToTheSameKey() throws {
        let pem = try testKey.pkcs8PEM
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reloaded = try APNsSigningKey(pkcs8PEM: pem, keyID: "KEY1234567", teamID: "TEAM123456")
        #expect(try reloaded.publicKeyPEM == testKey.publicKeyPEM)
        let jwt = try reloaded.makeProviderToken(issuedAt: testNow)
        #expect(try verifier().verify(jwt, nowSeconds: testNow).isSuccess)
    }

    @Test func loadsFromAFileAndNamesOnlyThePathInErrors() throws {
        let dir = try temporaryDirectory()
        let file = dir.appendingPathComponent("AuthKey_KEY1234567.p8")
        try testKey.pkcs8PEM.write(to: file, atomically: true, encoding: .utf8)
        let loaded = try APNsSigningKey(contentsOfFile: file.path, keyID: "KEY1234567", teamID: "TEAM123456")
        #expect(try loaded.publicKeyPEM == testKey.publicKeyPEM)

        let missing = dir.appendingPathComponent("nope.p8").path
        #expect(throws: APNsKeyError.self) { try APNsSigningKey(contentsOfFile: missing, keyID: "K", teamID: "T") }
    }

    @Test func descriptionAndErrorsNeverContainKeyMaterial() throws {
        let pem = try testKey.pkcs8PEM
        let body = pem.split(separator: "\n").dropFirst().first.map(String.init) ?? ""
        #expect(body.count > 20)
        for text in [testKey.description, testKey.debugDescription, "\(testKey)", String(reflecting: testKey)] {
            #expect(!text.contains(body) && !text.contains("PRIVATE"))
            #expect(text.contains("KEY1234567"))
        }
        // A corrupted key: the error must not echo the PEM it was given.
        let corrupted = pem.replacingOccurrences(of: body, with: String(body.reversed()))
        do {
            _ = try APNsSigningKey(pkcs8PEM: corrupted, keyID: "K", teamID: "T")
            Issue.record("a corrupted key loaded")
        } catch {
            #expect(!error.description.contains(String(body.reversed())))
        }
    }

    @Test func refusesKeysThatAreNotP256() throws {
        let dir = try temporaryDirectory()
        let file = dir.appendingPathComponent("p384.pem")
        let generated = try run(
            "/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", file.path])
        #expect(generated.status == 0)
        #expect(throws: APNsKeyError.self) { try APNsSigningKey(contentsOfFile: file.path, keyID: "K", teamID: "T") }
        #expect(throws: APNsKeyError.self) { try APNsSigningKey(pkcs8PEM: "not a key", keyID: "K", teamID: "T") }
    }

    /// The error carries OpenSSL's own text (from the drain shared with
    /// LiveRelayTLS), and the queue is left empty for the thread's next call.
    @Test func keyErrorsCarryOpenSSLsMessageAndLeaveTheQueueEmpty() {
        do {
            _ = try APNsSigningKey(pkcs8PEM: "not a key", keyID: "K", teamID: "T")
            Issue.record("a key was read from text that is not PEM")
        } catch {
            #expect(error.step == "reading the private key")
            // OpenSSL's own line ("error:<code>:<library> routines::<reason>"), whatever its wording.
            #expect(error.openSSLError.hasPrefix("error:"), "openSSLError: \(error.openSSLError)")
            #expect(error.openSSLError.contains(" routines::"), "openSSLError: \(error.openSSLError)")
        }
        #expect(ERR_peek_error() == 0)
    }

    @Test func derAndRawSignaturesConvertBothWays() throws {
        let raw = try ES256.sign(Array("hello".utf8), with: testKey.key)
        let der = try #require(ES256.derSignature(fromRaw: raw))
        #expect(der.first == 0x30 && der.count >= 8 && der.count <= 72)
        #expect(ES256.rawSignature(fromDER: der) == raw)
        #expect(ES256.rawSignature(fromDER: [0x30, 0x00]) == nil)
    }
}

/// Independent checks: tools that share no code with us accept our tokens, and we accept theirs.
@Suite("ES256 provider tokens: independent verifiers")
struct ProviderTokenInteropTests {
    @Test func opensslCommandLineVerifiesOurSignature() throws {
        let p = parts(try testKey.makeProviderToken(issuedAt: testNow))
        let raw = try #require(Base64URL.decode(Array(p[2].utf8)))
        let der = try #require(ES256.derSignature(fromRaw: raw))
        let dir = try temporaryDirectory()
        try testKey.publicKeyPEM.write(to: dir.appendingPathComponent("pub.pem"), atomically: true, encoding: .utf8)
        try Data((p[0] + "." + p[1]).utf8).write(to: dir.appendingPathComponent("input"))
        try Data(der).write(to: dir.appendingPathComponent("sig.der"))
        let args = [
            "dgst", "-sha256", "-verify", dir.appendingPathComponent("pub.pem").path,
            "-signature", dir.appendingPathComponent("sig.der").path, dir.appendingPathComponent("input").path,
        ]
        let ok = try run("/usr/bin/openssl", args)
        #expect(ok.status == 0 && ok.output.contains("Verified OK"), "\(ok.output)")

        // The same check fails for a different input, so the check itself can fail.
        try Data((p[0] + "." + p[1] + "x").utf8).write(to: dir.appendingPathComponent("input"))
        let bad = try run("/usr/bin/openssl", args)
        #expect(bad.status != 0)
    }

    /// Python's `cryptography` (its own OpenSSL build, its own JWS handling):
    /// verifies our token, then signs one with its own key for us to verify.
    @Test(.enabled(if: pythonCryptographyAvailable())) func pythonCryptographyAgreesBothWays() throws {
        let jwt = try testKey.makeProviderToken(issuedAt: testNow)
        let dir = try temporaryDirectory()
        let script = dir.appendingPathComponent("check.py")
        try pythonScript.write(to: script, atomically: true, encoding: .utf8)
        let result = try run("/usr/bin/python3", [script.path, try testKey.publicKeyPEM, jwt])
        #expect(result.status == 0, "\(result.output)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "verified")
        let pythonPublicKey = lines.dropFirst().prefix { $0 != "JWT" }.joined(separator: "\n") + "\n"
        let pythonJWT = try #require(lines.last)
        let theirs = try ProviderTokenVerifier(publicKeyPEM: pythonPublicKey, keyID: "PYKEY00001", teamID: "PYTEAM0001")
        #expect(
            theirs.verify(pythonJWT, nowSeconds: testNow)
                == .success(ProviderTokenClaims(keyID: "PYKEY00001", teamID: "PYTEAM0001", issuedAt: testNow)))
        // And our verifier refuses the Python token under our key: the check is real.
        #expect(try verifier().verify(pythonJWT, nowSeconds: testNow) == .failure(.unknownKeyID))
    }
}

func pythonCryptographyAvailable() -> Bool {
    (try? run("/usr/bin/python3", ["-c", "import cryptography"]).status) == 0
}

private let pythonScript = #"""
    import base64, json, sys
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature, decode_dss_signature

    def unb64(s):
        return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))

    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    public = serialization.load_pem_public_key(sys.argv[1].encode())
    header, claims, sig = sys.argv[2].split(".")
    assert json.loads(unb64(header)) == {"alg": "ES256", "kid": "KEY1234567"}
    assert json.loads(unb64(claims)) == {"iss": "TEAM123456", "iat": 1700000000}
    raw = unb64(sig)
    assert len(raw) == 64
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, (header + "." + claims).encode(), ec.ECDSA(hashes.SHA256()))
    print("verified")

    key = ec.generate_private_key(ec.SECP256R1())
    print(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode().strip())
    print("JWT")
    h = b64(json.dumps({"alg": "ES256", "kid": "PYKEY00001"}).encode())
    c = b64(json.dumps({"iss": "PYTEAM0001", "iat": 1700000000}).encode())
    r, s = decode_dss_signature(key.sign((h + "." + c).encode(), ec.ECDSA(hashes.SHA256())))
    print(h + "." + c + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
    """#

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
