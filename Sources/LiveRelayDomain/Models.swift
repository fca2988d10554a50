import LiveRelayAPNs
import LiveRelayMessages
import LiveRelayPushOutlet

/// An app LiveRelay pushes for. Its bundle id makes the `apns-topic`.
public struct App: Hashable, Sendable {
    public var id: String
    public var bundleID: String

    public init(id: String, bundleID: String) {
        self.id = id
        self.bundleID = bundleID
    }
}

/// The apps a deployment knows, so that an unknown app id is NOT_FOUND rather
/// than a push to a topic nobody owns.
///
/// ``open`` treats every app id as an app whose bundle id is the app id: what
/// a server without configured apps uses (their pushes then fail visibly
/// with `AppNotConfigured`).
public struct AppDirectory: Sendable {
    private let apps: [String: App]?
    /// Apps that exist but are turned off (the tenant registry's DisableApp).
    private let disabled: Set<String>

    public static let open = AppDirectory(apps: nil, disabled: [])

    public init(apps: [App], disabled: Set<String> = []) {
        self.apps = Dictionary(apps.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        self.disabled = disabled
    }

    private init(apps: [String: App]?, disabled: Set<String>) {
        self.apps = apps
        self.disabled = disabled
    }

    public func app(_ id: String) -> App? {
        guard let apps else { return App(id: id, bundleID: id) }
        return apps[id]
    }

    /// Whether the app exists but is turned off: its calls are refused, its data kept.
    public func isDisabled(_ id: String) -> Bool { disabled.contains(id) }
}

/// A token's identity within its app: the hex is what APNs knows it by.
public struct TokenKey: Hashable, Sendable {
    public var appID: String
    public var hex: String
    public init(appID: String, hex: String) {
        self.appID = appID
        self.hex = hex
    }
}

/// The place a device keeps exactly one token in: a new token for the same
/// slot replaces (rotates) the old one.
public enum TokenSlot: Hashable, Sendable {
    /// One update token per (app, activity, device).
    case update(appID: String, activityID: String, deviceID: String)
    /// One push-to-start token per (app, device, attributes type).
    case pushToStart(appID: String, deviceID: String, attributesType: String)

    public var appID: String {
        switch self {
        case let .update(appID, _, _), let .pushToStart(appID, _, _): appID
        }
    }
}

/// A registered APNs token.
public struct Token: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable {
        /// Starts activities of one attributes type on one device; lives until removed or pruned.
        case pushToStart
        /// Updates and ends one activity; dies with it.
        case update
    }

    public var kind: Kind
    public var hex: String
    public var environment: APNsEnvironment
    public var appID: String
    /// Required for push-to-start tokens; optional for update tokens.
    public var attributesType: String?
    /// Required for update tokens; nil for push-to-start tokens.
    public var activityID: String?
    public var externalUserID: String?
    public var deviceID: String?
    public var createdAt: UnixTime
    public var updatedAt: UnixTime
    /// The caller's own expiry for the token; nil = until removed, pruned or its activity ends.
    public var expiresAt: UnixTime?

    public init(
        kind: Kind, hex: String, environment: APNsEnvironment, appID: String,
        attributesType: String? = nil, activityID: String? = nil, externalUserID: String? = nil,
        deviceID: String? = nil, createdAt: UnixTime, updatedAt: UnixTime, expiresAt: UnixTime? = nil
    ) {
        self.kind = kind
        self.hex = hex
        self.environment = environment
        self.appID = appID
        self.attributesType = attributesType
        self.activityID = activityID
        self.externalUserID = externalUserID
        self.deviceID = deviceID
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.expiresAt = expiresAt
    }

    public var key: TokenKey { TokenKey(appID: appID, hex: hex) }

    /// The rotation slot; nil without a device id (such tokens never rotate each other).
    public var slot: TokenSlot? {
        guard let deviceID else { return nil }
        switch kind {
        case .update:
            guard let activityID else { return nil }
            return .update(appID: appID, activityID: activityID, deviceID: deviceID)
        case .pushToStart:
            guard let attributesType else { return nil }
            return .pushToStart(appID: appID, deviceID: deviceID, attributesType: attributesType)
        }
    }

    public func isExpired(at now: UnixTime) -> Bool {
        if let expiresAt { return expiresAt <= now }
        return false
    }

    /// Equal in everything the caller controls (not the bookkeeping times).
    func sameRegistration(as other: Token) -> Bool {
        kind == other.kind && hex == other.hex && environment == other.environment && appID == other.appID
            && attributesType == other.attributesType && activityID == other.activityID
            && externalUserID == other.externalUserID && deviceID == other.deviceID
            && expiresAt == other.expiresAt
    }
}

/// An activity's identity: the caller chooses the id, unique within its app.
public struct ActivityKey: Hashable, Sendable {
    public var appID: String
    public var activityID: String
    public init(appID: String, activityID: String) {
        self.appID = appID
        self.activityID = activityID
    }
}

/// How long activities live, from Apple's rules (ActivityKit's documentation).
public enum ActivityLifetime {
    /// An activity is active at most 8 hours; after that it expires on the device.
    public static let maxActive = UnixTime.Duration.hours(8)
    /// An ended activity stays on the Lock Screen at most 4 hours unless dismissed earlier.
    public static let dismissalWindow = UnixTime.Duration.hours(4)
    /// How long a finished activity's record (and its idempotency keys) is kept
    /// after it left the screen, so late retries still replay or get
    /// FAILED_PRECONDITION instead of NOT_FOUND; then the record is purged.
    public static let retention = UnixTime.Duration.hours(24)
}

/// An activity as LiveRelay knows it.
public struct Activity: Hashable, Sendable {
    public enum State: String, Hashable, Sendable {
        /// Start sent through push-to-start; no update token seen yet.
        case starting
        /// An update token has been registered (or the app started it locally).
        case active
        /// Ended by the caller; shown until its dismissal date.
        case ended
        /// Reached 8 hours without an end.
        case expired
        /// Gone from the screen (dismissal date passed).
        case dismissed

        /// Whether updates and ends are refused (FAILED_PRECONDITION).
        public var isFinished: Bool { self == .ended || self == .expired || self == .dismissed }

        public var proto: ActivityState {
            switch self {
            case .starting: .starting
            case .active: .active
            case .ended: .ended
            case .expired: .expired
            case .dismissed: .dismissed
            }
        }
    }

    public var appID: String
    public var id: String
    public var attributesType: String?
    public var state: State
    /// The last aps `timestamp` stamped for it (UNIX seconds); 0 before the first push.
    public var lastTimestamp: Int64
    /// The last content state sent, so an End without one repeats it.
    public var lastContentState: String?
    public var createdAt: UnixTime
    /// createdAt + 8 hours.
    public var expiresAt: UnixTime
    public var endedAt: UnixTime?
    /// When an ended activity leaves the screen: its dismissal date, or endedAt + 4 hours.
    public var dismissAt: UnixTime?

    public init(
        appID: String, id: String, attributesType: String?, state: State, lastTimestamp: Int64 = 0,
        lastContentState: String? = nil, createdAt: UnixTime, expiresAt: UnixTime? = nil,
        endedAt: UnixTime? = nil, dismissAt: UnixTime? = nil
    ) {
        self.appID = appID
        self.id = id
        self.attributesType = attributesType
        self.state = state
        self.lastTimestamp = lastTimestamp
        self.lastContentState = lastContentState
        self.createdAt = createdAt
        self.expiresAt = expiresAt ?? createdAt + ActivityLifetime.maxActive
        self.endedAt = endedAt
        self.dismissAt = dismissAt
    }

    public var key: ActivityKey { ActivityKey(appID: appID, activityID: id) }

    /// The next time the sweeper has something to do with this activity: expire
    /// it, mark it dismissed, or purge its record. Stores index this value.
    public var sweepDeadline: UnixTime {
        switch state {
        case .starting, .active: return expiresAt
        case .ended: return dismissAt ?? (endedAt ?? expiresAt) + ActivityLifetime.dismissalWindow
        case .expired: return expiresAt + ActivityLifetime.retention
        case .dismissed: return (dismissAt ?? endedAt ?? expiresAt) + ActivityLifetime.retention
        }
    }

    /// Whether updates must be refused now, even if the sweeper has not marked it yet.
    public func isFinished(at now: UnixTime) -> Bool {
        state.isFinished || expiresAt <= now
    }

    /// Known only because a device registered an update token for it (the app
    /// started it locally, or the token beat the StartActivity that started
    /// it): nothing was ever pushed for it and it has not finished, so a
    /// StartActivity under its id proceeds instead of being ALREADY_EXISTS.
    public func isOnlyPreRegistered(at now: UnixTime) -> Bool {
        lastTimestamp == 0 && !isFinished(at: now)
    }
}

/// Which call an idempotency key was first used with.
public enum IdempotentOperation: String, Hashable, Sendable {
    case start, update, end
}

/// A start target that reached no device, and why: the caller sees it as `unresolved`.
public struct UnresolvedStartTarget: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable {
        case pushToStartToken = "push_to_start_token", externalUserID = "external_user_id", allDevices = "all_devices"
    }

    public var kind: Kind
    /// The token or user id; empty for all devices.
    public var value: String
    public var reason: String

    public init(kind: Kind, value: String, reason: String) {
        self.kind = kind
        self.value = value
        self.reason = reason
    }
}

/// What an accepted mutating call planned, in the domain's terms: kept with
/// an idempotency key so a retry with the same key gets it back (`replayed =
/// true`) instead of acting twice. The service turns it into the wire reply.
public struct StoredReply: Hashable, Sendable {
    public var timestamp: Int64
    public var state: Activity.State
    /// Tokens the call's pushes went to.
    public var targeted: Int
    /// Start targets that reached no device.
    public var unresolved: [UnresolvedStartTarget]
    /// The call's final account (`queued` 0), written when its dispatch intent
    /// is settled (``SettleIntents``, or ``ClaimIntents`` finding it expired),
    /// so that a replay reports what became of the pushes instead of the plan.
    /// nil while they are in flight or waiting to be resumed, and for good when
    /// the call was accepted without a durable intent: nobody reports its end.
    public var account: EnqueueResult?

    public init(
        timestamp: Int64, state: Activity.State, targeted: Int, unresolved: [UnresolvedStartTarget] = [],
        account: EnqueueResult? = nil
    ) {
        self.timestamp = timestamp
        self.state = state
        self.targeted = targeted
        self.unresolved = unresolved
        self.account = account
    }
}

/// An idempotency key of one activity, with what it was first used for.
public struct IdempotencyRecord: Hashable, Sendable {
    /// How many records an activity keeps: those of its newest keyed calls (by
    /// their timestamps, which only grow within an activity); putting one more
    /// evicts the oldest. Without a cap an activity receiving millions of keyed
    /// updates would grow without bound. A resend whose key was evicted is a new
    /// call: it is sent again, with a newer timestamp.
    public static let keptPerActivity = 1_000

    public var appID: String
    public var activityID: String
    public var key: String
    public var operation: IdempotentOperation
    /// A stable hash of the request; the same key with another request is refused.
    public var fingerprint: UInt64
    public var reply: StoredReply
    public var createdAt: UnixTime

    public init(
        appID: String, activityID: String, key: String, operation: IdempotentOperation,
        fingerprint: UInt64, reply: StoredReply, createdAt: UnixTime
    ) {
        self.appID = appID
        self.activityID = activityID
        self.key = key
        self.operation = operation
        self.fingerprint = fingerprint
        self.reply = reply
        self.createdAt = createdAt
    }
}
