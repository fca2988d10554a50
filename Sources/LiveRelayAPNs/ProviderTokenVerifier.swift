import COpenSSL

/// What a valid provider token says.
public struct ProviderTokenClaims: Hashable, Sendable {
    /// The `kid` header: which key signed it.
    public var keyID: String
    /// The `iss` claim: the team.
    public var teamID: String
    /// The `iat` claim, UNIX seconds.
    public var issuedAt: Int64

    public init(keyID: String, teamID: String, issuedAt: Int64) {
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
    }
}

/// Why a provider token was refused, precise enough for tests and logs, with
/// the reason APNs would put in its 403 body (``apnsReason``).
public enum ProviderTokenRejection: Error, Hashable, Sendable, CustomStringConvertible {
    /// No `authorization` header, or not `bearer <token>`.
    case missing
    /// Not three base64url parts of flat JSON with the fields APNs needs.
    case malformed
    /// `alg` is not ES256 (`none` included).
    case wrongAlgorithm
    /// Not a 64-byte r||s that verifies over header.claims with the key named by `kid`.
    case badSignature
    /// The `kid` names no key this verifier knows.
    case unknownKeyID
    /// The `iss` is not the team of the key named by `kid`.
    case wrongTeam
    /// `iat` more than an hour ago.
    case expired
    /// `iat` later than now plus the allowed clock skew.
    case issuedInFuture

    /// The `reason` APNs answers with (status 403 for all of them).
    ///
    /// An unknown `kid` maps to InvalidProviderToken: APNs's
    /// UnrelatedKeyIdInToken is about a connection switching keys, which is the
    /// connection's business (the mock's), not a property of one token.
    public var apnsReason: String {
        switch self {
        case .missing: "MissingProviderToken"
        case .expired: "ExpiredProviderToken"
        case .malformed, .wrongAlgorithm, .badSignature, .unknownKeyID, .wrongTeam, .issuedInFuture:
            "InvalidProviderToken"
        }
    }

    /// APNs answers every provider-token problem with 403.
    public var httpStatus: Int { 403 }

    public var description: String { "provider token rejected (\(self.caseName)): \(apnsReason)" }

    private var caseName: String {
        switch self {
        case .missing: "missing"
        case .malformed: "malformed"
        case .wrongAlgorithm: "wrong algorithm"
        case .badSignature: "bad signature"
        case .unknownKeyID: "unknown key id"
        case .wrongTeam: "wrong team"
        case .expired: "expired"
        case .issuedInFuture: "issued in the future"
        }
    }
}

/// Checks provider tokens the way APNs does: the mock APNs's gate, and our
/// tests' independent check of what ``APNsSigningKey`` signs.
///
/// Verification costs an ECDSA operation (tens of microseconds). A server that
/// sees the same token on every stream of a connection should remember the
/// token string it accepted and only re-run ``checkAge(issuedAt:nowSeconds:)``.
public struct ProviderTokenVerifier: Sendable {
    /// One public key APNs (or the mock) knows.
    public struct Key: Sendable {
        public var keyID: String
        public var teamID: String
        let publicKey: EVPKey

        /// Fails unless `publicKeyPEM` is a P-256 `PUBLIC KEY`.
        public init(publicKeyPEM: String, keyID: String, teamID: String) throws(APNsKeyError) {
            let key = try EVPKey.read(pem: publicKeyPEM, step: "reading the public key") { bio in
                PEM_read_bio_PUBKEY(bio, nil, nil, nil)
            }
            try key.requireP256("reading the public key")
            self.publicKey = key
            self.keyID = keyID
            self.teamID = teamID
        }
    }

    /// APNs refuses tokens older than this (ExpiredProviderToken).
    public static let maximumAgeSeconds: Int64 = 3600

    private let keys: [String: Key]
    /// How far in the future `iat` may be before the token is invalid: clocks of
    /// provider and APNs are never exactly in step.
    public var allowedClockSkewSeconds: Int64

    public init(publicKeyPEM: String, keyID: String, teamID: String, allowedClockSkewSeconds: Int64 = 60) throws(APNsKeyError) {
        try self.init(
            keys: [Key(publicKeyPEM: publicKeyPEM, keyID: keyID, teamID: teamID)],
            allowedClockSkewSeconds: allowedClockSkewSeconds)
    }

    /// Several keys (several apps or teams), chosen by the token's `kid`. A later duplicate `kid` wins.
    public init(keys: [Key], allowedClockSkewSeconds: Int64 = 60) {
        var byID: [String: Key] = [:]
        for key in keys { byID[key.keyID] = key }
        self.keys = byID
        self.allowedClockSkewSeconds = allowedClockSkewSeconds
    }

    /// Verifies the value of an `authorization` header (`bearer <jwt>`; nil when absent).
    public func verify(authorization: String?, nowSeconds: Int64) -> Result<ProviderTokenClaims, ProviderTokenRejection> {
        guard let authorization, !authorization.isEmpty else { return .failure(.missing) }
        let utf8 = Array(authorization.utf8)
        let prefix = Array("bearer ".utf8)
        guard utf8.count > prefix.count,
            zip(utf8, prefix).allSatisfy({ $0 | 0x20 == $1 | 0x20 })  // the scheme is case-insensitive
        else { return .failure(.missing) }
        return verify(String(decoding: utf8[prefix.count...], as: UTF8.self), nowSeconds: nowSeconds)
    }

    /// Verifies a compact JWS: structure, `alg`, `kid`, the signature, then
    /// `iss` and `iat`. The claims are looked at only after the signature holds,
    /// so a tampered token is a bad signature, whatever it claims.
    public func verify(_ jwt: String?, nowSeconds: Int64) -> Result<ProviderTokenClaims, ProviderTokenRejection> {
        guard let jwt, !jwt.isEmpty else { return .failure(.missing) }
        let bytes = Array(jwt.utf8)
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        // An empty signature part is let through to be refused as `alg` none or a bad signature.
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
            let headerBytes = Base64URL.decode(parts[0]), let header = FlatJSONObject(headerBytes),
            let claimsBytes = Base64URL.decode(parts[1]), let claims = FlatJSONObject(claimsBytes),
            let signature = Base64URL.decode(parts[2])
        else { return .failure(.malformed) }

        guard let algorithm = header.string("alg") else { return .failure(.malformed) }
        guard algorithm == "ES256" else { return .failure(.wrongAlgorithm) }
        guard let keyID = header.string("kid") else { return .failure(.malformed) }
        guard let key = keys[keyID] else { return .failure(.unknownKeyID) }

        let signingInput = Array(bytes[..<(parts[0].count + 1 + parts[1].count)])
        guard ES256.verify(rawSignature: signature, message: signingInput, with: key.publicKey) else {
            return .failure(.badSignature)
        }

        guard let issuer = claims.string("iss"), let issuedAt = claims.integer("iat") else {
            return .failure(.malformed)
        }
        guard issuer == key.teamID else { return .failure(.wrongTeam) }
        if let rejection = checkAge(issuedAt: issuedAt, nowSeconds: nowSeconds) { return .failure(rejection) }
        return .success(ProviderTokenClaims(keyID: keyID, teamID: issuer, issuedAt: issuedAt))
    }

    /// The time rules alone, for a token whose signature was already checked:
    /// nil if `issuedAt` is acceptable at `nowSeconds`.
    public func checkAge(issuedAt: Int64, nowSeconds: Int64) -> ProviderTokenRejection? {
        if issuedAt > nowSeconds + allowedClockSkewSeconds { return .issuedInFuture }
        if nowSeconds - issuedAt > Self.maximumAgeSeconds { return .expired }
        return nil
    }

    /// The `kid` of a token without verifying anything, so a server can tell
    /// which app a connection's token belongs to before it picks a verifier.
    public static func unverifiedKeyID(of jwt: String) -> String? {
        let bytes = Array(jwt.utf8)
        guard let end = bytes.firstIndex(of: UInt8(ascii: ".")),
            let header = Base64URL.decode(bytes[..<end]).flatMap(FlatJSONObject.init)
        else { return nil }
        return header.string("kid")
    }
}
