import COpenSSL

/// An app's APNs auth key (the `.p8` file from Apple's developer portal) and
/// the ids APNs needs to find its public half: the key id (`kid`) and the team
/// id (`iss`).
///
/// The key lives in an OpenSSL `EVP_PKEY` shared by copies of this value, so
/// every connection of one key signs with the same object and no copy of the
/// private key sits in Swift memory. `description` names only the ids: a key
/// printed in a log line or an error is never the key itself.
public struct APNsSigningKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The 10-character key id Apple assigned; goes into the JWT header as `kid`.
    public let keyID: String
    /// The 10-character developer team id; goes into the claims as `iss`.
    public let teamID: String
    let key: EVPKey

    /// Loads a `.p8` key (PEM `PRIVATE KEY`, PKCS#8; SEC1 `EC PRIVATE KEY` is accepted too).
    /// Fails unless it is an EC P-256 private key, the only kind APNs accepts.
    public init(pkcs8PEM: String, keyID: String, teamID: String) throws(APNsKeyError) {
        let key = try EVPKey.read(pem: pkcs8PEM, step: "reading the private key") { bio in
            PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        try key.requireP256("reading the private key")
        self.init(key: key, keyID: keyID, teamID: teamID)
    }

    /// Loads the `.p8` file at `path`. The error names the path, not the contents.
    public init(contentsOfFile path: String, keyID: String, teamID: String) throws(APNsKeyError) {
        ERR_clear_error()
        guard let bio = BIO_new_file(path, "r") else {
            throw APNsKeyError.fromQueue("opening '\(path)'")
        }
        defer { BIO_free(bio) }
        guard let raw = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
            throw APNsKeyError.fromQueue("reading the private key from '\(path)'")
        }
        let key = EVPKey(taking: raw)
        try key.requireP256("reading the private key from '\(path)'")
        self.init(key: key, keyID: keyID, teamID: teamID)
    }

    init(key: EVPKey, keyID: String, teamID: String) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
    }

    /// A fresh P-256 key: the development setup writes it as a `.p8` next to the
    /// mock APNs, and tests sign with it. Production keys come from Apple.
    public static func generate(keyID: String, teamID: String) throws(APNsKeyError) -> APNsSigningKey {
        ERR_clear_error()
        guard let raw = lr_EVP_EC_gen("P-256") else { throw APNsKeyError.fromQueue("generating a P-256 key") }
        return APNsSigningKey(key: EVPKey(taking: raw), keyID: keyID, teamID: teamID)
    }

    /// The private key as an unencrypted PKCS#8 PEM, the format of Apple's `.p8`
    /// files. Handle with care: whoever holds it can push as this team.
    public var pkcs8PEM: String {
        get throws(APNsKeyError) {
            try key.pem("exporting the private key") { bio, key in
                PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil)
            }
        }
    }

    /// The public half (PEM `PUBLIC KEY`, SubjectPublicKeyInfo): what a
    /// ``ProviderTokenVerifier`` (the mock APNs) needs to check our tokens.
    public var publicKeyPEM: String {
        get throws(APNsKeyError) {
            try key.pem("exporting the public key") { bio, key in PEM_write_bio_PUBKEY(bio, key) }
        }
    }

    /// Lowercase hex SHA-256 of the public key's DER (SubjectPublicKeyInfo): admin replies
    /// show it so that an operator can tell two keys apart, or match one with its `.p8`
    /// (`openssl pkey -pubout -outform DER | sha256sum`), without the key being revealed.
    public var publicKeySHA256: String {
        get throws(APNsKeyError) {
            ERR_clear_error()
            let length = i2d_PUBKEY(key.pointer, nil)
            guard length > 0 else { throw APNsKeyError.fromQueue("encoding the public key") }
            var der = [UInt8](repeating: 0, count: Int(length))
            let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
                var cursor = buffer.baseAddress
                return i2d_PUBKEY(key.pointer, &cursor)
            }
            guard written == length else { throw APNsKeyError.fromQueue("encoding the public key") }
            var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
            var size: UInt32 = 0
            guard EVP_Digest(der, der.count, &digest, &size, EVP_sha256(), nil) == 1 else {
                throw APNsKeyError.fromQueue("hashing the public key")
            }
            let hex = Array("0123456789abcdef".utf8)
            var text = [UInt8]()
            text.reserveCapacity(Int(size) * 2)
            for byte in digest.prefix(Int(size)) {
                text.append(hex[Int(byte >> 4)])
                text.append(hex[Int(byte & 0x0f)])
            }
            return String(decoding: text, as: UTF8.self)
        }
    }

    /// A provider token (ES256 JWT) issued at `issuedAt` (UNIX seconds).
    ///
    /// Callers should not sign per request: APNs answers 429
    /// TooManyProviderTokenUpdates to a connection whose token changes more than
    /// once per 20 minutes. ``ProviderTokenSource`` decides when to call this.
    public func makeProviderToken(issuedAt: Int64) throws(APNsKeyError) -> String {
        let header = Base64URL.encode(Array("{\"alg\":\"ES256\",\"kid\":\(jsonQuoted(keyID))}".utf8))
        let claims = Base64URL.encode(Array("{\"iss\":\(jsonQuoted(teamID)),\"iat\":\(issuedAt)}".utf8))
        let signingInput = header + "." + claims
        let signature = try ES256.sign(Array(signingInput.utf8), with: key)
        return signingInput + "." + Base64URL.encode(signature)
    }

    public var description: String { "APNsSigningKey(keyID: \(keyID), teamID: \(teamID))" }
    public var debugDescription: String { description }
}
