import Foundation
import LiveRelayMessages
import LiveRelayService
import LiveRelayTLS
import NIOConcurrencyHelpers
import NIOCore

/// Turns the API key from a HELLO into the principal the connection acts as.
///
/// Synchronous on purpose: it runs on the connection's event loop once per
/// connection, so it must be cheap (a hash and a dictionary lookup), and a
/// store round trip here would stall every other connection on that loop.
public protocol Authenticator: Sendable {
    func authenticate(apiKey: ByteBuffer) -> Result<Principal, AuthenticationFailure>
}

/// Why a key was refused, as the client will read it in GOAWAY UNAUTHENTICATED.
///
/// One value for every refusal: telling "no such key" from "wrong secret"
/// would let a caller enumerate key ids.
public struct AuthenticationFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// Sent to the client; never contains the key.
    public var message: String

    public init(message: String) {
        self.message = message
    }

    public static let invalidAPIKey = AuthenticationFailure(message: "invalid API key")

    public var description: String { message }
}

/// Checks `lrk_<keyID>_<secret>` keys against SHA-256 hashes of their secrets.
///
/// Only hashes are held, so a leaked key file or heap dump does not leak keys.
/// The secret is 256 random bits, so an unsalted fast hash is enough: there is
/// nothing to brute-force that a slow KDF would protect. Every key, known or
/// not, well-formed or not, goes through the same steps (parse, lookup,
/// digest, constant-time compare against the stored hash or a random decoy),
/// so timing does not reveal which key ids exist.
public struct APIKeyAuthenticator: Authenticator {
    struct Entry: Sendable {
        var secretHash: [UInt8]
        var principal: Principal
    }

    /// Which steps one check ran, so tests can prove every path runs the same ones.
    struct Trace: Hashable {
        var parsed: Bool
        var lookedUp: Bool
        var hashedBytes: Int
        var comparedBytes: Int
    }

    private let entries: [String: Entry]
    /// Compared against when the key id is unknown, so that path costs the same.
    private let decoyHash: [UInt8]

    /// - Throws: `APIKeyError` for a malformed record or a key id used twice.
    public init(records: [APIKeyRecord]) throws(APIKeyError) {
        var keys: [(principal: Principal, secretSHA256: String)] = []
        for record in records { keys.append((try record.principal(), record.secretSHA256)) }
        try self.init(keys: keys)
    }

    /// Keys as principals with the SHA-256 of their secrets (the tenant registry's keys).
    ///
    /// - Throws: `APIKeyError` for a malformed hash or a key id used twice.
    public init(keys: [(principal: Principal, secretSHA256: String)]) throws(APIKeyError) {
        var entries: [String: Entry] = [:]
        for (principal, secretSHA256) in keys {
            guard let hash = Hex.decode(secretSHA256), hash.count == 32 else {
                throw APIKeyError("key \(principal.keyID): secret_sha256 must be 64 hex digits")
            }
            guard entries[principal.keyID] == nil else {
                throw APIKeyError("key id \(principal.keyID) appears twice")
            }
            entries[principal.keyID] = Entry(secretHash: hash, principal: principal)
        }
        self.entries = entries
        self.decoyHash = Crypto.randomBytes(32)
    }

    public func authenticate(apiKey: ByteBuffer) -> Result<Principal, AuthenticationFailure> {
        check(apiKey: apiKey).result
    }

    /// Mints a key. The plaintext is shown to the operator once and never stored;
    /// the record (hash only) is what gets saved.
    public static func generateKey(
        apps: AppScope,
        allowedMethods: Set<LiveRelayMethod>,
        label: String? = nil,
        createdAt: Date = Date()
    ) -> (plaintext: String, record: APIKeyRecord) {
        let keyID = Base32.encode(Crypto.randomBytes(8), characters: APIKeyFormat.keyIDLength)
        let secret = Hex.encode(Crypto.randomBytes(APIKeyFormat.secretBytes))
        let record = APIKeyRecord(
            keyID: keyID,
            secretSHA256: Hex.encode(Crypto.sha256(Array(secret.utf8))),
            apps: apps,
            allowedMethods: allowedMethods.map(\.methodName).sorted(),
            // Whole seconds: the key file stores ISO 8601 without fractions, so a
            // saved record reads back equal to the one generated.
            createdAt: Date(timeIntervalSince1970: createdAt.timeIntervalSince1970.rounded(.down)),
            label: label
        )
        return (APIKeyFormat.prefix + keyID + "_" + secret, record)
    }

    func check(apiKey: ByteBuffer) -> (result: Result<Principal, AuthenticationFailure>, trace: Trace) {
        let bytes = apiKey.readableBytesView
        let parsed = APIKeyFormat.parse(bytes)
        // An unparsable key is looked up under "", which no record can have, and
        // its whole text is hashed: the same steps as a well-formed unknown key.
        let entry = self.entries[parsed?.keyID ?? ""]
        let secret = parsed?.secret ?? bytes[...]
        let actual = Crypto.sha256(secret)
        let expected = entry?.secretHash ?? self.decoyHash
        let matches = Crypto.constantTimeEquals(actual, expected)
        let trace = Trace(parsed: parsed != nil, lookedUp: true, hashedBytes: secret.count, comparedBytes: expected.count)
        if matches, let entry {
            return (.success(entry.principal), trace)
        }
        return (.failure(.invalidAPIKey), trace)
    }
}

/// The shape of a LiveRelay API key: `lrk_` + 12 base32 key-id characters + `_` + 64 hex digits.
enum APIKeyFormat {
    static let prefix = "lrk_"
    static let keyIDLength = 12
    static let secretBytes = 32
    static let length = 4 + 12 + 1 + 64

    static func parse(_ bytes: ByteBufferView) -> (keyID: String, secret: ByteBufferView.SubSequence)? {
        guard bytes.count == length, bytes.starts(with: prefix.utf8) else { return nil }
        let idStart = bytes.startIndex + prefix.utf8.count
        let idEnd = idStart + keyIDLength
        guard bytes[idEnd] == UInt8(ascii: "_") else { return nil }
        let keyID = String(decoding: bytes[idStart..<idEnd], as: UTF8.self)
        guard Base32.isValid(keyID.utf8[...]) else { return nil }
        return (keyID, bytes[(idEnd + 1)...])
    }
}

/// An authenticator whose keys can be replaced while the server runs (a key
/// created, changed or revoked in the tenant registry): the next HELLO is
/// checked against the new set. Connections already open keep their
/// principal; revoking a key also needs ``RPCServer/revoke(keyIDs:)`` to close them.
public final class ReloadableAuthenticator: Authenticator {
    private let current: NIOLockedValueBox<APIKeyAuthenticator>
    private let onUse: @Sendable (String) -> Void

    /// - Parameter onUse: told the key id of every successful HELLO (the registry's last-used time); must be cheap.
    public init(_ initial: APIKeyAuthenticator, onUse: @escaping @Sendable (String) -> Void = { _ in }) {
        self.current = NIOLockedValueBox(initial)
        self.onUse = onUse
    }

    public func replace(with authenticator: APIKeyAuthenticator) {
        current.withLockedValue { $0 = authenticator }
    }

    public func authenticate(apiKey: ByteBuffer) -> Result<Principal, AuthenticationFailure> {
        let result = current.withLockedValue { $0 }.authenticate(apiKey: apiKey)
        if case let .success(principal) = result { onUse(principal.keyID) }
        return result
    }
}
