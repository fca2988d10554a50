import LiveRelayAPNs
import LiveRelayPushOutlet

/// The whole state as plain dictionaries with the three hot indexes: the
/// reference semantics every store must match, the in-memory store's
/// storage, and the state domain tests run rules against.
///
/// A value type: copying it is a snapshot, and applying a plan is a pure
/// function of the old value and the writes.
public struct InMemoryState: StateReader, Sendable {
    /// Hexes with O(1) insert and remove (swap-remove), in a deterministic order.
    private struct Bucket: Sendable {
        var hexes: [String] = []
        var position: [String: Int] = [:]

        mutating func insert(_ hex: String) {
            guard position[hex] == nil else { return }
            position[hex] = hexes.count
            hexes.append(hex)
        }

        mutating func remove(_ hex: String) {
            guard let i = position.removeValue(forKey: hex) else { return }
            let last = hexes.removeLast()
            if i < hexes.count {
                hexes[i] = last
                position[last] = i
            }
        }
    }

    private struct TypeKey: Hashable, Sendable { var appID, attributesType: String }
    private struct UserKey: Hashable, Sendable { var appID, externalUserID, attributesType: String }

    private var tokens: [TokenKey: Token] = [:]
    private var slots: [TokenSlot: String] = [:]
    private var byActivity: [ActivityKey: Bucket] = [:]
    private var byType: [TypeKey: Bucket] = [:]
    private var byUser: [UserKey: Bucket] = [:]
    /// Tokens with their own expiry: the only ones the token sweep must look at.
    private var expiring: Set<TokenKey> = []
    private var activities: [ActivityKey: Activity] = [:]
    private var records: [ActivityKey: [String: IdempotencyRecord]] = [:]
    private var intents: [IntentKey: DispatchIntent] = [:]

    public init() {}

    /// Unfinished dispatch intents.
    public var intentCount: Int { intents.count }

    public var tokenCount: Int { tokens.count }
    public var activityCount: Int { activities.count }

    /// Plans `mutation` against this state and applies its writes; nothing changes if it throws.
    public mutating func apply<M: StoreMutation>(_ mutation: M, now: UnixTime) throws(DomainError) -> M.Outcome {
        let plan = try mutation.plan(self, now: now)
        apply(plan.writes)
        return plan.outcome
    }

    public mutating func apply(_ writes: [StoreWrite]) {
        for write in writes {
            switch write {
            case let .putToken(token):
                unindex(token.key)
                tokens[token.key] = token
                index(token)
            case let .deleteToken(key):
                unindex(key)
                tokens[key] = nil
            case let .putActivity(activity):
                activities[activity.key] = activity
            case let .deleteActivity(key):
                activities[key] = nil
                records[key] = nil
            case let .putIdempotencyRecord(record):
                records[ActivityKey(appID: record.appID, activityID: record.activityID), default: [:]][record.key] = record
            case let .settleReply(activity, timestamp, account):
                // A scan of one activity's keys: a handful.
                for (key, record) in records[activity] ?? [:] where record.reply.timestamp == timestamp {
                    records[activity]?[key]?.reply.account = account
                }
            case let .putIntent(intent):
                intents = intents.filter { !$0.value.isSuperseded(by: intent) }
                intents[intent.key] = intent
            case let .deleteIntent(key):
                intents[key] = nil
            case let .leaseIntent(key, owner, until):
                intents[key]?.owner = owner
                intents[key]?.leaseUntil = until
            case let .renewIntents(owner, until):
                for (key, intent) in intents where intent.owner == owner { intents[key]?.leaseUntil = until }
            }
        }
    }

    private mutating func index(_ token: Token) {
        if let slot = token.slot { slots[slot] = token.hex }
        if token.expiresAt != nil { expiring.insert(token.key) }
        switch token.kind {
        case .update:
            if let activityID = token.activityID {
                byActivity[ActivityKey(appID: token.appID, activityID: activityID), default: Bucket()].insert(token.hex)
            }
        case .pushToStart:
            guard let type = token.attributesType else { return }
            byType[TypeKey(appID: token.appID, attributesType: type), default: Bucket()].insert(token.hex)
            if let user = token.externalUserID {
                byUser[UserKey(appID: token.appID, externalUserID: user, attributesType: type), default: Bucket()]
                    .insert(token.hex)
            }
        }
    }

    private mutating func unindex(_ key: TokenKey) {
        guard let token = tokens[key] else { return }
        if let slot = token.slot, slots[slot] == token.hex { slots[slot] = nil }
        expiring.remove(key)
        switch token.kind {
        case .update:
            if let activityID = token.activityID {
                Self.remove(token.hex, from: &byActivity, ActivityKey(appID: token.appID, activityID: activityID))
            }
        case .pushToStart:
            guard let type = token.attributesType else { return }
            Self.remove(token.hex, from: &byType, TypeKey(appID: token.appID, attributesType: type))
            if let user = token.externalUserID {
                Self.remove(token.hex, from: &byUser, UserKey(appID: token.appID, externalUserID: user, attributesType: type))
            }
        }
    }

    private static func remove<K: Hashable>(_ hex: String, from index: inout [K: Bucket], _ key: K) {
        index[key]?.remove(hex)
        if index[key]?.hexes.isEmpty == true { index[key] = nil }
    }

    private func tokens(_ bucket: Bucket?, appID: String) -> [Token] {
        guard let bucket else { return [] }
        return bucket.hexes.compactMap { tokens[TokenKey(appID: appID, hex: $0)] }
    }

    // MARK: StateReader

    public func token(_ key: TokenKey) -> Token? { tokens[key] }

    public func token(in slot: TokenSlot) -> Token? {
        let appID: String
        switch slot {
        case let .update(app, _, _), let .pushToStart(app, _, _): appID = app
        }
        return slots[slot].flatMap { tokens[TokenKey(appID: appID, hex: $0)] }
    }

    public func activity(_ key: ActivityKey) -> Activity? { activities[key] }

    /// A scan of everything: the memory store serves tests and benchmarks, where this is cheap enough.
    public func usage(of appID: String, at now: UnixTime) -> AppUsage {
        AppUsage(
            tokens: tokens.keys.reduce(0) { $0 + ($1.appID == appID ? 1 : 0) },
            liveActivities: activities.values.reduce(0) { $0 + ($1.appID == appID && $1.isLive(at: now) ? 1 : 0) })
    }

    public func idempotencyRecord(_ activity: ActivityKey, key: String) -> IdempotencyRecord? { records[activity]?[key] }

    public func updateTokens(of activity: ActivityKey) -> [Token] {
        tokens(byActivity[activity], appID: activity.appID)
    }

    public func updateTargets(of activity: ActivityKey, at now: UnixTime) -> [PushTarget] {
        guard let bucket = byActivity[activity] else { return [] }
        var targets: [PushTarget] = []
        targets.reserveCapacity(bucket.hexes.count)
        for hex in bucket.hexes {
            if let token = tokens[TokenKey(appID: activity.appID, hex: hex)], !token.isExpired(at: now) {
                targets.append(PushTarget(token: token.hex, environment: token.environment))
            }
        }
        return targets
    }

    public func pushToStartTokens(appID: String, attributesType: String) -> [Token] {
        tokens(byType[TypeKey(appID: appID, attributesType: attributesType)], appID: appID)
    }

    public func pushToStartTokens(appID: String, externalUserID: String, attributesType: String) -> [Token] {
        tokens(byUser[UserKey(appID: appID, externalUserID: externalUserID, attributesType: attributesType)], appID: appID)
    }

    /// A scan: activities are few next to tokens and are purged after their retention.
    public func activitiesDue(at now: UnixTime, limit: Int) -> [Activity] {
        var due: [Activity] = []
        for activity in activities.values where activity.sweepDeadline <= now {
            due.append(activity)
            if due.count >= limit { break }
        }
        return due
    }

    public func tokensExpired(at now: UnixTime, limit: Int) -> [Token] {
        var due: [Token] = []
        for key in expiring {
            if let token = tokens[key], token.isExpired(at: now) {
                due.append(token)
                if due.count >= limit { break }
            }
        }
        return due
    }

    /// A scan: intents are few (only unfinished calls).
    public func claimableIntents(by owner: String, evenIfLeased: Bool, at now: UnixTime, limit: Int) -> [DispatchIntent] {
        let due = intents.values.filter { $0.owner != owner && (evenIfLeased || $0.leaseUntil <= now) }
        return Array(due.sorted { ($0.leaseUntil, $0.createdAt) < ($1.leaseUntil, $1.createdAt) }.prefix(limit))
    }
}
