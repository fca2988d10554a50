import LiveRelayAPNs

/// An API key as the registry keeps it: its public id, the hash of its
/// secret (never the secret, which exists only in the CreateAPIKey reply) and
/// what it may do.
///
/// Its own type rather than LiveRelayServer's `APIKeyRecord`: the domain
/// cannot import the server, and the registry's key has a life (last use,
/// revocation, origin) that a key file's record does not. ``description``,
/// ``debugDescription`` and the mirror leave the hash out: it identifies the
/// secret, and logs are no place for it.
public struct RegisteredAPIKey: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The apps a tenant key may act for.
    public enum Apps: Hashable, Sendable {
        /// Every app, present and future (an operator's key); said by name, never an empty set.
        case all
        /// These apps, at least one.
        case only(Set<String>)
    }

    /// What the key may call.
    public enum Role: Hashable, Sendable {
        /// liverelay.admin.v1.Admin, and nothing else.
        case admin
        /// liverelay.v1.LiveRelay for `apps`: the RPCs named in `methods`
        /// ("StartActivity", ...; an empty list allows none).
        case tenant(apps: Apps, methods: [String])
    }

    /// 12 lowercase base32 characters: the public part of `lrk_<keyID>_<secret>`.
    public var keyID: String
    /// SHA-256 of the secret part, as 64 lowercase hex digits.
    public var secretSHA256: String
    public var role: Role
    /// Free text for operators ("staging push worker").
    public var label: String?
    public var createdAt: UnixTime
    /// Recorded by the store's `touch` (at most once a minute per node), never by a change.
    public var lastUsedAt: UnixTime?
    /// Set once by RevokeAPIKey and never cleared: a revoked key id is spent.
    public var revokedAt: UnixTime?
    public var source: RegistrySource

    public init(
        keyID: String, secretSHA256: String, role: Role, label: String? = nil, createdAt: UnixTime = UnixTime(milliseconds: 0),
        lastUsedAt: UnixTime? = nil, revokedAt: UnixTime? = nil, source: RegistrySource = .admin
    ) {
        self.keyID = keyID
        self.secretSHA256 = secretSHA256
        self.role = role
        self.label = label
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.revokedAt = revokedAt
        self.source = source
    }

    public var isRevoked: Bool { revokedAt != nil }

    public var description: String {
        "RegisteredAPIKey(keyID: \(keyID), secretSHA256: <redacted>, role: \(role), label: \(label.map { "\"\($0)\"" } ?? "nil"), "
            + "createdAt: \(createdAt), lastUsedAt: \(lastUsedAt.map { "\($0)" } ?? "nil"), "
            + "revokedAt: \(revokedAt.map { "\($0)" } ?? "nil"), source: \(source))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "keyID": keyID, "secretSHA256": "<redacted>", "role": role, "label": label as Any, "createdAt": createdAt,
                "lastUsedAt": lastUsedAt as Any, "revokedAt": revokedAt as Any, "source": source,
            ], displayStyle: .struct)
    }
}

/// One change to the registry: what the admin API and the config file ask for.
///
/// ``RegistryRules`` decides what each does to a snapshot; every store runs
/// that decision, its writes, the audit row and the version bump in one
/// transaction.
public enum RegistryChange: Hashable, Sendable {
    /// A new app (source `.admin`); `.appExists` if the id is taken, disabled apps included.
    case createApp(RegisteredApp)
    /// Changes the fields the patch sets; `.appNotFound` for an unknown id.
    case updateApp(id: String, RegisteredAppPatch)
    /// Turns the app off (UpdateApp with `enabled` turns it on again).
    case disableApp(id: String)
    /// Sets the app's credentials, replacing any before.
    case putCredentials(appID: String, RegisteredCredentials)
    /// A new key (source `.admin`); `.keyExists` if the id was ever used, revoked keys included.
    case createKey(RegisteredAPIKey)
    /// Revokes the key; revoking it again changes nothing and keeps the first time.
    case revokeKey(keyID: String)
    /// The config file's apps and keys, applied declaratively (``RegistryRules``
    /// says exactly how); idempotent: a seed that changes nothing writes nothing.
    case seed(apps: [RegisteredApp], keys: [RegisteredAPIKey])
    /// Sets the app's webhook. `newSecret` (always minted, so the decision is the
    /// transaction's) signs from now on when the app has no webhook yet or `rotate` is
    /// set; otherwise the webhook keeps its secret. `startCursor` (the feed's last cursor,
    /// read before the change) is the new webhook's ``RegisteredWebhook/startCursor``; a
    /// webhook changed keeps its own.
    case putWebhook(appID: String, url: String, eventKinds: Set<FeedEvent.Kind>, newSecret: String, rotate: Bool, startCursor: UInt64)
    /// Removes the app's webhook; `.webhookNotFound` when it has none.
    case deleteWebhook(appID: String)
}

/// What an audit row says was done.
public enum AuditAction: String, Hashable, Sendable, CaseIterable {
    case createApp = "CreateApp"
    case updateApp = "UpdateApp"
    case disableApp = "DisableApp"
    case putCredentials = "PutAPNsCredentials"
    case createKey = "CreateAPIKey"
    case revokeKey = "RevokeAPIKey"
    case seed = "Seed"
    case putWebhook = "PutWebhook"
    case deleteWebhook = "DeleteWebhook"
}

/// One row of the registry's audit log: who changed what, when.
///
/// Written in the change's own transaction, so the log and the registry
/// never disagree. ``details`` is a small JSON object of the changed fields
/// and their non-secret values: never a key's hash, a PEM or an environment
/// variable's value (credentials show team id, key id, endpoint, the kind of
/// key source and its path or variable name).
public struct AuditEntry: Hashable, Sendable {
    /// The registry version the change produced: increasing by one per row, without gaps.
    public var sequence: Int64
    public var at: UnixTime
    /// The admin key's id, `config` (a seed from the config file) or `bootstrap`.
    public var actor: String
    public var action: AuditAction
    /// The app id or key id changed (`*` for a seed, whose details list them).
    public var target: String
    /// A JSON object, e.g. `{"bundle_id":"com.example.orders","weight":2}`.
    public var details: String

    public init(sequence: Int64, at: UnixTime, actor: String, action: AuditAction, target: String, details: String) {
        self.sequence = sequence
        self.at = at
        self.actor = actor
        self.action = action
        self.target = target
        self.details = details
    }
}

/// What a store's `apply` did.
public struct RegistryApplied: Hashable, Sendable {
    /// The registry's version after the change (unchanged when nothing changed).
    public var version: Int64
    /// The audit row written; nil when the change changed nothing (no row, no version bump).
    public var entry: AuditEntry?

    public init(version: Int64, entry: AuditEntry?) {
        self.version = version
        self.entry = entry
    }
}

/// Why the rules refused a change. Nothing was written.
public enum RegistryError: Error, Hashable, Sendable, CustomStringConvertible {
    case appExists(String)
    case appNotFound(String)
    case keyExists(String)
    case keyNotFound(String)
    /// A new tenant key names apps the registry does not have (sorted).
    case keyAppsNotFound([String])
    /// The app has no webhook to read, delete or reset.
    case webhookNotFound(String)
    /// A value every node would fail to serve (a malformed id or hash, a
    /// non-positive capacity, an endpoint that is neither `apple` nor `host:port`).
    case invalid(field: String, detail: String)

    /// The status family the admin API answers with.
    public var code: DomainError.Code {
        switch self {
        case .appExists, .keyExists: .alreadyExists
        case .appNotFound, .keyNotFound, .keyAppsNotFound, .webhookNotFound: .notFound
        case .invalid: .invalidArgument
        }
    }

    public var description: String {
        switch self {
        case let .appExists(id): "app \(id) already exists"
        case let .appNotFound(id): "no app \(id)"
        case let .keyExists(id): "API key id \(id) is already used"
        case let .keyNotFound(id): "no API key \(id)"
        case let .keyAppsNotFound(ids):
            "no app \(ids.joined(separator: ", ")): an API key acts only for apps that exist (create them first, or make it an all-apps key)"
        case let .webhookNotFound(id): "app \(id) has no webhook"
        case let .invalid(field, detail): "\(field): \(detail)"
        }
    }
}
