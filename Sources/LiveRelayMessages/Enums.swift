// Swift mirrors of the proto enums. Each keeps unknown numbers as
// `.unrecognized(n)` because proto3 (and proto2 here) must round-trip values
// from newer peers unchanged; request validation rejects them instead.
// Equality and hashing go by the numeric value, so `.unrecognized(1)` equals
// the named case for 1.

/// Which of an activity's two kinds of APNs token this is.
public enum TokenKind: Sendable, Hashable {
    case unspecified, pushToStart, update, unrecognized(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 0: self = .unspecified
        case 1: self = .pushToStart
        case 2: self = .update
        default: self = .unrecognized(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .unspecified: 0
        case .pushToStart: 1
        case .update: 2
        case let .unrecognized(value): value
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// The APNs environment a token belongs to.
public enum Environment: Sendable, Hashable {
    case unspecified, sandbox, production, unrecognized(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 0: self = .unspecified
        case 1: self = .sandbox
        case 2: self = .production
        default: self = .unrecognized(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .unspecified: 0
        case .sandbox: 1
        case .production: 2
        case let .unrecognized(value): value
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// What RegisterToken did.
public enum RegisterTokenResult: Sendable, Hashable {
    case unspecified, created, rotated, unchanged, removed, notFound, unrecognized(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 0: self = .unspecified
        case 1: self = .created
        case 2: self = .rotated
        case 3: self = .unchanged
        case 4: self = .removed
        case 5: self = .notFound
        default: self = .unrecognized(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .unspecified: 0
        case .created: 1
        case .rotated: 2
        case .unchanged: 3
        case .removed: 4
        case .notFound: 5
        case let .unrecognized(value): value
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// Where an unresolved StartActivity target came from.
public enum TargetKind: Sendable, Hashable {
    case unspecified, pushToStartToken, externalUserID, allDevices, unrecognized(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 0: self = .unspecified
        case 1: self = .pushToStartToken
        case 2: self = .externalUserID
        case 3: self = .allDevices
        default: self = .unrecognized(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .unspecified: 0
        case .pushToStartToken: 1
        case .externalUserID: 2
        case .allDevices: 3
        case let .unrecognized(value): value
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// The lifecycle of an activity as LiveRelay knows it.
public enum ActivityState: Sendable, Hashable {
    case unspecified, starting, active, ended, expired, dismissed, unrecognized(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 0: self = .unspecified
        case 1: self = .starting
        case 2: self = .active
        case 3: self = .ended
        case 4: self = .expired
        case 5: self = .dismissed
        default: self = .unrecognized(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .unspecified: 0
        case .starting: 1
        case .active: 2
        case .ended: 3
        case .expired: 4
        case .dismissed: 5
        case let .unrecognized(value): value
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// The apns-priority header: sparse values 0, 5, 10 as APNs defines them.
public enum Priority: Sendable, Hashable {
    case unspecified, low, high, unrecognized(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 0: self = .unspecified
        case 5: self = .low
        case 10: self = .high
        default: self = .unrecognized(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .unspecified: 0
        case .low: 5
        case .high: 10
        case let .unrecognized(value): value
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// liverelay.v1.ChannelStoragePolicy: how APNs keeps a broadcast channel's
/// messages for offline devices, fixed when the channel is created.
///
/// Not named `ChannelStoragePolicy`: that is LiveRelayAPNs's type (the policy as
/// APNs's `message-storage-policy` numbers it, 0 and 1), and the modules that
/// import both would find the name ambiguous. This one is the wire's, with
/// UNSPECIFIED at 0 as proto3 requires, so its numbers differ from APNs's.
public enum BroadcastStoragePolicy: Sendable, Hashable {
    case unspecified, noStorage, mostRecentMessage, unrecognized(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 0: self = .unspecified
        case 1: self = .noStorage
        case 2: self = .mostRecentMessage
        default: self = .unrecognized(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .unspecified: 0
        case .noStorage: 1
        case .mostRecentMessage: 2
        case let .unrecognized(value): value
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}
