import Foundation
import LiveRelayMessages
import LiveRelayService

/// A stored API key: its public id, the hash of its secret, and what it may do.
///
/// Codable so the CLI can keep keys in a JSON file an operator can read and
/// edit (revoke a key by deleting its entry) without ever seeing a secret.
public struct APIKeyRecord: Codable, Hashable, Sendable {
    /// The public part of the key, used for lookup and in logs.
    public var keyID: String
    /// Lowercase hex SHA-256 of the secret part of the key.
    public var secretSHA256: String
    /// Apps the key may act for; never empty unless ``allApps``.
    public var appIDs: [String]
    /// An operator key: it may act for every app, present and future. Said by
    /// name, so that a forgotten `app_ids` is refused rather than read as "all".
    public var allApps: Bool
    /// RPC names such as "StartActivity" (see `LiveRelayMethod.methodName`).
    public var allowedMethods: [String]
    public var createdAt: Date
    /// Free text for operators ("staging push worker").
    public var label: String?

    public init(
        keyID: String,
        secretSHA256: String,
        apps: AppScope,
        allowedMethods: [String],
        createdAt: Date,
        label: String? = nil
    ) {
        self.keyID = keyID
        self.secretSHA256 = secretSHA256
        switch apps {
        case .all:
            self.appIDs = []
            self.allApps = true
        case let .only(ids):
            self.appIDs = ids.sorted()
            self.allApps = false
        }
        self.allowedMethods = allowedMethods
        self.createdAt = createdAt
        self.label = label
    }

    enum CodingKeys: String, CodingKey {
        case keyID = "key_id"
        case secretSHA256 = "secret_sha256"
        case appIDs = "app_ids"
        case allApps = "all_apps"
        case allowedMethods = "allowed_methods"
        case createdAt = "created_at"
        case label
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        keyID = try container.decode(String.self, forKey: .keyID)
        secretSHA256 = try container.decode(String.self, forKey: .secretSHA256)
        appIDs = try container.decodeIfPresent([String].self, forKey: .appIDs) ?? []
        allApps = try container.decodeIfPresent(Bool.self, forKey: .allApps) ?? false
        allowedMethods = try container.decode([String].self, forKey: .allowedMethods)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        label = try container.decodeIfPresent(String.self, forKey: .label)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(keyID, forKey: .keyID)
        try container.encode(secretSHA256, forKey: .secretSHA256)
        if allApps {
            try container.encode(true, forKey: .allApps)
        } else {
            try container.encode(appIDs, forKey: .appIDs)
        }
        try container.encode(allowedMethods, forKey: .allowedMethods)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encodeIfPresent(label, forKey: .label)
    }

    /// The apps this key may act for: `all_apps` or a non-empty `app_ids`, never both, never neither.
    public func scope() throws(APIKeyError) -> AppScope {
        if allApps {
            guard appIDs.isEmpty else {
                throw APIKeyError("key \(keyID): \"all_apps\" is true and \"app_ids\" lists apps: keep one of the two")
            }
            return .all
        }
        guard !appIDs.isEmpty else {
            throw APIKeyError(
                "key \(keyID): \"app_ids\" is empty: list the apps the key may act for, or set \"all_apps\": true for an operator key")
        }
        return .only(Set(appIDs))
    }

    /// The identity this key authenticates as; throws on an unknown method name
    /// rather than silently granting less (or more) than the file says.
    public func principal() throws(APIKeyError) -> Principal {
        var methods = Set<LiveRelayMethod>()
        for name in allowedMethods {
            guard let method = LiveRelayMethod(methodName: name) else {
                let known = LiveRelayMethod.allCases.map(\.methodName).joined(separator: ", ")
                throw APIKeyError("key \(keyID): unknown method \"\(name)\" (known: \(known))")
            }
            methods.insert(method)
        }
        guard keyID.utf8.count == APIKeyFormat.keyIDLength, Base32.isValid(keyID.utf8[...]) else {
            throw APIKeyError("key id \"\(keyID)\" must be \(APIKeyFormat.keyIDLength) lowercase base32 characters")
        }
        return Principal(keyID: keyID, apps: try scope(), allowedMethods: methods)
    }
}

/// A malformed key record or key file. Messages name the key id, never a secret.
public struct APIKeyError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// The JSON file of hashed keys that `liverelay serve` reads.
///
/// It holds no secret, but it is written with mode 0600 anyway: who may call
/// what is still worth keeping from other local users.
public struct APIKeyFile: Codable, Hashable, Sendable {
    public var keys: [APIKeyRecord]

    public init(keys: [APIKeyRecord] = []) {
        self.keys = keys
    }

    public static func load(path: String) throws -> APIKeyFile {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(APIKeyFile.self, from: data)
        } catch {
            throw APIKeyError("\(path): not a valid API key file: \(error)")
        }
    }

    /// Writes a temporary file (0600) next to `path`, then renames it over
    /// `path`, so a crash never leaves a half-written key file behind.
    public func save(path: String) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var data = try encoder.encode(self)
        data.append(UInt8(ascii: "\n"))
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw APIKeyError("\(temporary): cannot create: \(String(cString: strerror(errno)))") }
        var ok = true
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if written <= 0 { ok = false; break }
                offset += written
            }
        }
        ok = ok && fsync(fd) == 0
        close(fd)
        guard ok, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw APIKeyError("\(path): cannot write: \(reason)")
        }
    }
}

// `LiveRelayMethod.methodName` and `LiveRelayMethod(methodName:)` ("StartActivity")
// live in LiveRelayMessages, beside the enum: the admin API's CreateAPIKey names
// methods the same way and is validated there.
