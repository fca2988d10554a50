import LiveRelayAPNs

// The tenant registry as values: apps, their APNs credentials and quotas, and
// API keys, as every node loads them from the store (``RegistrySnapshot``).
// What may change them, and how, is ``RegistryChange`` and ``RegistryRules``;
// the stores only persist what the rules decide, so memory, SQLite and
// PostgreSQL share one semantics.

/// Where a registry entry came from, which decides who may change it later.
///
/// The config file is declarative for what it says (``RegistryChange/seed(apps:keys:)``
/// brings `.seed` entries back to it at every start), but it must never undo
/// what an operator did through the admin API: `.admin` entries are the admin
/// API's alone, and a seed never touches them.
public enum RegistrySource: String, Hashable, Sendable {
    /// Created through the admin API (CreateApp, CreateAPIKey).
    case admin
    /// Written by a seed from the config file (or the development setup).
    case seed
}

/// An app's limits, as admin.proto's `Quotas`: `nil` is the server's default
/// for that limit, `0` is no limit at all.
///
/// Kept apart from LiveRelayActivities' `AppQuota` (where `nil` means no
/// limit) because the registry must remember "default" as such: changing the
/// server's default later must reach every app that never set its own.
public struct RegisteredQuotas: Hashable, Sendable {
    public var callsPerSecond: Double?
    public var burst: Int?
    public var pushesPerHour: Int?
    public var maxTokens: Int?
    public var maxLiveActivities: Int?
    /// Priority-10 sends per hour per activity and per channel.
    public var priorityBudgetPerHour: Int?

    public init(
        callsPerSecond: Double? = nil, burst: Int? = nil, pushesPerHour: Int? = nil, maxTokens: Int? = nil,
        maxLiveActivities: Int? = nil, priorityBudgetPerHour: Int? = nil
    ) {
        self.callsPerSecond = callsPerSecond
        self.burst = burst
        self.pushesPerHour = pushesPerHour
        self.maxTokens = maxTokens
        self.maxLiveActivities = maxLiveActivities
        self.priorityBudgetPerHour = priorityBudgetPerHour
    }

    /// Every limit at the server's default.
    public static let defaults = RegisteredQuotas()
}

/// How an app reaches APNs: the signing key's ids, where its private key is
/// read from, and the endpoint.
///
/// A stored key's PEM is a secret: ``description``, ``debugDescription`` and
/// the mirror (`dump`) name only the kind of source, never the PEM, so that
/// no log line, error message or audit row can carry it by accident.
public struct RegisteredCredentials: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// Where the `.p8` private key is read from.
    public enum KeySource: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        /// The PEM itself, kept in the registry row (admin.proto's `private_key_pem`).
        case stored(pem: String)
        /// A file every node can read.
        case file(path: String)
        /// An environment variable every node has (its name, never its value).
        case environment(name: String)

        /// `registry`, `file` or `env`: the prefix of admin.proto's `key_source`.
        public var kind: String {
            switch self {
            case .stored: "registry"
            case .file: "file"
            case .environment: "env"
            }
        }

        /// admin.proto's `key_source`: `registry`, `file:<path>` or `env:<NAME>`. Never the PEM.
        public var description: String {
            switch self {
            case .stored: "registry"
            case let .file(path): "file:\(path)"
            case let .environment(name): "env:\(name)"
            }
        }

        public var debugDescription: String { description }

        public var customMirror: Mirror { Mirror(self, children: ["keySource": description], displayStyle: .enum) }
    }

    /// Apple's 10-character team id.
    public var teamID: String
    /// The signing key's 10-character id.
    public var keyID: String
    /// `apple` (each token to its environment's endpoint) or `host:port`.
    public var endpoint: String
    public var keySource: KeySource
    /// PEM certificates a `host:port` endpoint's certificate chains to (public, not a secret).
    public var trustPEM: String?
    /// When these credentials were put (set by the rules, not the caller).
    public var updatedAt: UnixTime

    public init(
        teamID: String, keyID: String, endpoint: String = "apple", keySource: KeySource, trustPEM: String? = nil,
        updatedAt: UnixTime = UnixTime(milliseconds: 0)
    ) {
        self.teamID = teamID
        self.keyID = keyID
        self.endpoint = endpoint
        self.keySource = keySource
        self.trustPEM = trustPEM
        self.updatedAt = updatedAt
    }

    /// Equal but for ``updatedAt``: putting the same credentials again changes nothing.
    public func hasSameSettings(as other: RegisteredCredentials) -> Bool {
        var other = other
        other.updatedAt = updatedAt
        return self == other
    }

    public var description: String {
        "RegisteredCredentials(teamID: \(teamID), keyID: \(keyID), endpoint: \(endpoint), keySource: \(keySource), "
            + "trustPEM: \(trustPEM == nil ? "none" : "present"), updatedAt: \(updatedAt))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "teamID": teamID, "keyID": keyID, "endpoint": endpoint, "keySource": keySource.description,
                "trustPEM": trustPEM == nil ? "none" : "present", "updatedAt": updatedAt,
            ], displayStyle: .struct)
    }
}

/// An app LiveRelay pushes for, with everything a node needs to serve it.
///
/// Optional settings are `nil` for the server's default (queue capacity 100,000,
/// weight 1, pushes living until their activity's expiry), so a later change
/// of the default reaches apps that never chose their own.
public struct RegisteredApp: Hashable, Sendable {
    /// 1 to 255 of `a-z A-Z 0-9 . _ -`.
    public var id: String
    /// The iOS bundle id: the apns-topic is `<bundleID>.push-type.liveactivity`.
    public var bundleID: String
    /// A disabled app's calls are refused and its queued pushes fail; its tokens and activities are kept.
    public var enabled: Bool
    /// Unfinished pushes the app may have queued; nil: the server's default.
    public var queueCapacity: Int?
    /// Share of send slots when apps compete; nil: the server's default.
    public var weight: Int?
    /// Seconds a push is tried at most; nil or 0: until its activity's expiry.
    public var maxPushLifetimeSeconds: Int?
    public var quotas: RegisteredQuotas
    /// nil until credentials are put: the app's pushes fail `AppNotConfigured` until then.
    public var credentials: RegisteredCredentials?
    /// Where the app's event feed is delivered; nil: nowhere (``RegistryChange/putWebhook(appID:url:eventKinds:newSecret:rotate:startCursor:)``).
    public var webhook: RegisteredWebhook?
    /// Set by the rules when the app is created and changed.
    public var createdAt: UnixTime
    public var updatedAt: UnixTime
    public var source: RegistrySource

    public init(
        id: String, bundleID: String, enabled: Bool = true, queueCapacity: Int? = nil, weight: Int? = nil,
        maxPushLifetimeSeconds: Int? = nil, quotas: RegisteredQuotas = .defaults, credentials: RegisteredCredentials? = nil,
        webhook: RegisteredWebhook? = nil, createdAt: UnixTime = UnixTime(milliseconds: 0), updatedAt: UnixTime = UnixTime(milliseconds: 0),
        source: RegistrySource = .admin
    ) {
        self.id = id
        self.bundleID = bundleID
        self.enabled = enabled
        self.queueCapacity = queueCapacity
        self.weight = weight
        self.maxPushLifetimeSeconds = maxPushLifetimeSeconds
        self.quotas = quotas
        self.credentials = credentials
        self.webhook = webhook
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.source = source
    }
}

/// An UpdateApp: each non-nil field replaces the app's; nil leaves it as is.
///
/// ``quotas`` replaces the app's quotas as a whole (admin.proto's
/// UpdateAppRequest), so one limit can be reset to the default by sending the
/// others without it.
public struct RegisteredAppPatch: Hashable, Sendable {
    public var bundleID: String?
    public var queueCapacity: Int?
    public var weight: Int?
    public var maxPushLifetimeSeconds: Int?
    public var quotas: RegisteredQuotas?
    public var enabled: Bool?

    public init(
        bundleID: String? = nil, queueCapacity: Int? = nil, weight: Int? = nil, maxPushLifetimeSeconds: Int? = nil,
        quotas: RegisteredQuotas? = nil, enabled: Bool? = nil
    ) {
        self.bundleID = bundleID
        self.queueCapacity = queueCapacity
        self.weight = weight
        self.maxPushLifetimeSeconds = maxPushLifetimeSeconds
        self.quotas = quotas
        self.enabled = enabled
    }
}

/// Everything in the registry, at one version: what a node loads at start and
/// after each change it hears of.
public struct RegistrySnapshot: Hashable, Sendable {
    /// 0 for an empty registry; one more after each change that changed something.
    public var version: Int64
    public var apps: [String: RegisteredApp]
    public var keys: [String: RegisteredAPIKey]

    public init(version: Int64 = 0, apps: [String: RegisteredApp] = [:], keys: [String: RegisteredAPIKey] = [:]) {
        self.version = version
        self.apps = apps
        self.keys = keys
    }

    /// The snapshot with `writes` applied (the version is the caller's to set).
    public func applying(_ writes: [RegistryWrite]) -> RegistrySnapshot {
        var next = self
        for write in writes {
            switch write {
            case let .putApp(app): next.apps[app.id] = app
            case let .putKey(key): next.keys[key.keyID] = key
            }
        }
        return next
    }
}

/// One row a change writes: stores turn each into an upsert.
public enum RegistryWrite: Hashable, Sendable {
    case putApp(RegisteredApp)
    /// Stores keep an existing key's `lastUsedAt` as the row has it: last use
    /// is recorded by the store's `touch`, outside any change, and a change
    /// planned on an older read must not move it back.
    case putKey(RegisteredAPIKey)
}
