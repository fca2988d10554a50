import Testing

@testable import LiveRelayAPNs

@Suite("ES256 provider tokens: every rejection")
struct ProviderTokenRejectionTests {
    let header = #"{"alg":"ES256","kid":"KEY1234567"}"#
    let claims = #"{"iss":"TEAM123456","iat":1700000000}"#

    func check(
        _ jwt: String?, _ expected: ProviderTokenRejection, now: Int64 = testNow,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(try verifier().verify(jwt, nowSeconds: now) == .failure(expected), sourceLocation: sourceLocation)
    }

    @Test func missing() throws {
        try check(nil, .missing)
        try check("", .missing)
        let v = try verifier()
        #expect(v.verify(authorization: nil, nowSeconds: testNow) == .failure(.missing))
        #expect(v.verify(authorization: "Basic abc", nowSeconds: testNow) == .failure(.missing))
        #expect(v.verify(authorization: "bearer ", nowSeconds: testNow) == .failure(.missing))
        let jwt = try testKey.makeProviderToken(issuedAt: testNow)
        #expect(v.verify(authorization: "bearer " + jwt, nowSeconds: testNow).isSuccess)
        #expect(v.verify(authorization: "Bearer " + jwt, nowSeconds: testNow).isSuccess)
        #expect(ProviderTokenRejection.missing.apnsReason == "MissingProviderToken")
    }

    @Test func malformed() throws {
        let good = parts(try testKey.makeProviderToken(issuedAt: testNow))
        for jwt in [
            "abc", "a.b", good.joined(separator: ".") + ".x", "." + good[1] + "." + good[2],
            good[0] + ".." + good[2],
            good[0] + "=." + good[1] + "." + good[2],  // padding
            good[0] + "." + good[1] + "." + good[2] + "==",
            good[0].replacingOccurrences(of: "e", with: "+") + "." + good[1] + "." + good[2],
            b64("not json") + "." + good[1] + "." + good[2],
            b64(#"{"alg":"ES256","kid":"KEY1234567","alg":"ES256"}"#) + "." + good[1] + "." + good[2],  // duplicate
            b64(#"{"kid":"KEY1234567"}"#) + "." + good[1] + "." + good[2],  // no alg
            b64(#"{"alg":"ES256"}"#) + "." + good[1] + "." + good[2],  // no kid
        ] {
            try check(jwt, .malformed)
        }
        // Signed, but claims APNs cannot use.
        for badClaims in [
            #"{"iss":"TEAM123456"}"#, #"{"iat":1700000000}"#, #"{"iss":"TEAM123456","iat":1700000000.5}"#,
            #"{"iss":"TEAM123456","iat":"1700000000"}"#, #"{"iss":"TEAM123456","iat":1700000000} x"#,
        ] {
            try check(try craftedToken(header: header, claims: badClaims), .malformed)
        }
        #expect(ProviderTokenRejection.malformed.apnsReason == "InvalidProviderToken")
    }

    @Test func wrongAlgorithm() throws {
        let claimsPart = b64(claims)
        try check(b64(#"{"alg":"none","kid":"KEY1234567"}"#) + "." + claimsPart + ".", .wrongAlgorithm)
        try check(b64(#"{"alg":"HS256","kid":"KEY1234567"}"#) + "." + claimsPart + "." + b64("mac"), .wrongAlgorithm)
        // Properly signed with our key, but labelled as another algorithm.
        try check(try craftedToken(header: #"{"alg":"ES384","kid":"KEY1234567"}"#, claims: claims), .wrongAlgorithm)
        #expect(ProviderTokenRejection.wrongAlgorithm.apnsReason == "InvalidProviderToken")
    }

    @Test func badSignatureShapes() throws {
        let good = parts(try testKey.makeProviderToken(issuedAt: testNow))
        let raw = try #require(Base64URL.decode(Array(good[2].utf8)))
        let input = good[0] + "." + good[1] + "."
        let der = try #require(ES256.derSignature(fromRaw: raw))
        let order = ES256.groupOrder
        let zero = [UInt8](repeating: 0, count: 32)
        let allOnes = [UInt8](repeating: 0xFF, count: 32)
        for signature in [
            der,  // DER, as OpenSSL produces it
            Array(raw.dropLast()),  // 63 bytes
            raw + [0],  // 65 bytes
            [],  // empty
            zero + Array(raw[32...]),  // r = 0
            Array(raw[..<32]) + zero,  // s = 0
            order + Array(raw[32...]),  // r = n
            Array(raw[..<32]) + order,  // s = n
            allOnes + Array(raw[32...]),  // r > n
            Array(raw[..<32]) + allOnes,  // s > n
        ] {
            try check(input + Base64URL.encode(signature), .badSignature)
        }
        // The untouched signature passes, so the cases above fail for their own reason.
        try #require(try verifier().verify(input + Base64URL.encode(raw), nowSeconds: testNow).isSuccess)
    }

    @Test func tamperedTokensAndForeignKeys() throws {
        let good = parts(try testKey.makeProviderToken(issuedAt: testNow))
        // Claims changed after signing: a later iat, another team.
        try check(good[0] + "." + b64(#"{"iss":"TEAM123456","iat":1700000100}"#) + "." + good[2], .badSignature)
        try check(good[0] + "." + b64(#"{"iss":"EVILTEAM00","iat":1700000000}"#) + "." + good[2], .badSignature)
        // Header changed after signing (same kid and alg, extra field).
        try check(b64(#"{"alg":"ES256","kid":"KEY1234567","typ":"JWT"}"#) + "." + good[1] + "." + good[2], .badSignature)
        // One flipped bit in the signature.
        var raw = try #require(Base64URL.decode(Array(good[2].utf8)))
        raw[40] ^= 0x01
        try check(good[0] + "." + good[1] + "." + Base64URL.encode(raw), .badSignature)
        // Signed by another key that claims our kid.
        let other = try APNsSigningKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")
        try check(try other.makeProviderToken(issuedAt: testNow), .badSignature)
        #expect(ProviderTokenRejection.badSignature.apnsReason == "InvalidProviderToken")
    }

    @Test func unknownKeyIDAndWrongTeam() throws {
        let stranger = try APNsSigningKey.generate(keyID: "OTHERKEY00", teamID: "TEAM123456")
        try check(try stranger.makeProviderToken(issuedAt: testNow), .unknownKeyID)
        // Our key, signed in the name of another team.
        let sameKeyOtherTeam = try APNsSigningKey(pkcs8PEM: try testKey.pkcs8PEM, keyID: "KEY1234567", teamID: "EVILTEAM00")
        try check(try sameKeyOtherTeam.makeProviderToken(issuedAt: testNow), .wrongTeam)
        #expect(ProviderTokenRejection.unknownKeyID.apnsReason == "InvalidProviderToken")
        #expect(ProviderTokenRejection.wrongTeam.apnsReason == "InvalidProviderToken")
    }

    @Test func ageLimitsAtTheirBoundaries() throws {
        let jwt = try testKey.makeProviderToken(issuedAt: testNow)
        let v = try verifier()
        #expect(v.verify(jwt, nowSeconds: testNow + 3600).isSuccess)
        try check(jwt, .expired, now: testNow + 3601)
        #expect(v.verify(jwt, nowSeconds: testNow - 60).isSuccess)
        try check(jwt, .issuedInFuture, now: testNow - 61)
        #expect(ProviderTokenRejection.expired.apnsReason == "ExpiredProviderToken")
        #expect(ProviderTokenRejection.issuedInFuture.apnsReason == "InvalidProviderToken")
        #expect(v.checkAge(issuedAt: testNow, nowSeconds: testNow + 3601) == .expired)
    }

    @Test func severalKeysAreChosenByKid() throws {
        let second = try APNsSigningKey.generate(keyID: "SECONDKEY0", teamID: "TEAM999999")
        let v = ProviderTokenVerifier(keys: [
            try .init(publicKeyPEM: try testKey.publicKeyPEM, keyID: testKey.keyID, teamID: testKey.teamID),
            try .init(publicKeyPEM: try second.publicKeyPEM, keyID: second.keyID, teamID: second.teamID),
        ])
        let secondToken = try second.makeProviderToken(issuedAt: testNow)
        #expect(v.verify(secondToken, nowSeconds: testNow) == .success(.init(keyID: "SECONDKEY0", teamID: "TEAM999999", issuedAt: testNow)))
        #expect(v.verify(try testKey.makeProviderToken(issuedAt: testNow), nowSeconds: testNow).isSuccess)
        #expect(ProviderTokenVerifier.unverifiedKeyID(of: secondToken) == "SECONDKEY0")
        #expect(ProviderTokenVerifier.unverifiedKeyID(of: "garbage") == nil)
    }

    @Test func base64urlIsStrict() {
        for length in 0..<8 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 251) }
            let text = Base64URL.encode(bytes)
            #expect(Base64URL.decode(Array(text.utf8)) == bytes)
        }
        #expect(Base64URL.decode(Array("QQ".utf8)) == [0x41])
        #expect(Base64URL.decode(Array("QR".utf8)) == nil)  // non-zero leftover bits
        #expect(Base64URL.decode(Array("Q".utf8)) == nil)
        #expect(Base64URL.decode(Array("QQ==".utf8)) == nil)
        #expect(Base64URL.decode(Array("a+b/".utf8)) == nil)
    }
}
