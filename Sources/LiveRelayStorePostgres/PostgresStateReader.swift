import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet

/// ``StateReader`` for plans running inside a PostgreSQL batch transaction.
///
/// `StateReader` is synchronous and a database read is a round trip, so the
/// reader answers from a cache of what the transaction has read so far,
/// overlaid with the writes of the batch's earlier plans
/// (``PostgresOverlay``). A read the cache cannot answer is a *miss*: it is
/// recorded, answered with "nothing", and the plan's result is discarded;
/// the batch then fetches every miss of every plan at once and plans again.
/// Plans are pure functions of their reads and `now`, so the final plan,
/// made with no misses, is exactly the plan a synchronous reader would have
/// produced, and a batch costs a few round trips instead of one per read.
final class PostgresStateReader: StateReader {
    /// What the transaction read from the database.
    private(set) var cache: [ReadKey: ReadValue] = [:]
    /// The accepted plans' writes.
    var overlay = PostgresOverlay()
    /// Reads the cache could not answer since the last ``beginPlan()``.
    private(set) var misses: Set<ReadKey> = []

    func beginPlan() { misses.removeAll(keepingCapacity: true) }

    func fill(_ answers: [ReadKey: ReadValue]) {
        cache.merge(answers) { _, new in new }
    }

    private func lookup(_ key: ReadKey) -> ReadValue? {
        if let value = cache[key] { return value }
        misses.insert(key)
        return nil
    }

    func token(_ key: TokenKey) -> Token? {
        if let overlaid = overlay.token(key) { return overlaid }
        guard case let .token(token)? = lookup(.token(key)), let token, !overlay.isCleared(token) else { return nil }
        return token
    }

    func token(in slot: TokenSlot) -> Token? {
        if let overlaid = overlay.token(in: slot) { return overlaid }
        guard case let .token(token)? = lookup(.slot(slot)), let token else { return nil }
        // Changed by this batch: if it were still in the slot, the overlay would have said so.
        if overlay.token(token.key) != nil || overlay.isCleared(token) { return nil }
        return token
    }

    func activity(_ key: ActivityKey) -> Activity? {
        if let overlaid = overlay.activity(key) { return overlaid }
        guard case let .activity(activity)? = lookup(.activity(key)) else { return nil }
        return activity
    }

    func idempotencyRecord(_ activity: ActivityKey, key: String) -> IdempotencyRecord? {
        if let overlaid = overlay.record(activity, key: key) { return overlaid }
        guard case let .record(record)? = lookup(.record(activity, key)) else { return nil }
        return record.map(overlay.settled)
    }

    private func tokens(_ key: ReadKey, where matches: (Token) -> Bool) -> [Token] {
        guard case let .tokens(tokens)? = lookup(key) else { return [] }
        return overlay.merge(tokens, where: matches)
    }

    func updateTokens(of activity: ActivityKey) -> [Token] {
        tokens(.updateTokens(activity)) {
            $0.kind == .update && $0.appID == activity.appID && $0.activityID == activity.activityID
        }
    }

    /// Asks for `limit` plus as many rows as the batch changed, like the sweep's
    /// other reads; tokens the batch changed are answered as the batch left them.
    func updateTokenKeys(of activity: ActivityKey, limit: Int) -> [TokenKey] {
        // Saturated: a limit of `Int.max` asks for every key.
        let asked = min(max(0, limit), Int.max - overlay.tokenCount) + overlay.tokenCount
        var found: [String] = []
        if !overlay.isCleared(activity) {
            guard case let .hexes(hexes)? = lookup(.updateTokenHexes(activity, limit: asked)) else { return [] }
            found = hexes
        }
        let keys = overlay.merge(found.map { TokenKey(appID: activity.appID, hex: $0) }) {
            $0.kind == .update && $0.appID == activity.appID && $0.activityID == activity.activityID
        }
        return Array(keys.prefix(max(0, limit)))
    }

    func updateTargets(of activity: ActivityKey, at now: UnixTime) -> [PushTarget] {
        var rows: [TargetRow] = []
        if !overlay.isCleared(activity) {
            guard case let .targets(found)? = lookup(.updateTargets(activity)) else { return [] }
            rows = found
        }
        return overlay.merge(rows, appID: activity.appID, at: now) { $0.kind == .update && $0.activityID == activity.activityID }
    }

    func pushToStartTargets(appID: String, attributesType: String, at now: UnixTime) -> [PushTarget] {
        guard case let .targets(rows)? = lookup(.pushToStartTargets(appID: appID, attributesType: attributesType)) else { return [] }
        return overlay.merge(rows, appID: appID, at: now) { $0.kind == .pushToStart && $0.attributesType == attributesType }
    }

    func pushToStartTokens(appID: String, attributesType: String) -> [Token] {
        tokens(.pushToStartOfType(appID: appID, attributesType: attributesType)) {
            $0.kind == .pushToStart && $0.appID == appID && $0.attributesType == attributesType
        }
    }

    func pushToStartTokens(appID: String, externalUserID: String, attributesType: String) -> [Token] {
        tokens(.pushToStartOfUser(appID: appID, externalUserID: externalUserID, attributesType: attributesType)) {
            $0.kind == .pushToStart && $0.appID == appID && $0.externalUserID == externalUserID
                && $0.attributesType == attributesType
        }
    }

    /// The database is asked for `limit` plus as many rows as the batch
    /// changed, so that dropping the changed ones still leaves `limit` if there are.
    func activitiesDue(at now: UnixTime, limit: Int) -> [Activity] {
        let key = ReadKey.activitiesDue(now: now.milliseconds, limit: limit + overlay.activityCount)
        guard case let .activities(found)? = lookup(key) else { return [] }
        let merged = overlay.merge(found) { $0.sweepDeadline <= now }
        return Array(merged.sorted { $0.sweepDeadline < $1.sweepDeadline }.prefix(limit))
    }

    func tokensExpired(at now: UnixTime, limit: Int) -> [Token] {
        let key = ReadKey.tokensExpired(now: now.milliseconds, limit: limit + overlay.tokenCount)
        guard case let .tokens(found)? = lookup(key) else { return [] }
        let merged = overlay.merge(found) { $0.isExpired(at: now) }
        return Array(merged.sorted { ($0.expiresAt?.milliseconds ?? 0) < ($1.expiresAt?.milliseconds ?? 0) }.prefix(limit))
    }

    /// Asks for `limit` plus as many rows as the batch changed, like the sweep reads; rows the
    /// batch changed are answered as the batch left them.
    func claimableIntents(by owner: String, evenIfLeased: Bool, at now: UnixTime, limit: Int) -> [DispatchIntent] {
        let upTo = evenIfLeased ? Int64.max : now.milliseconds
        let key = ReadKey.claimableIntents(owner: owner, upTo: upTo, now: now.milliseconds, limit: limit + overlay.intentCount)
        guard case let .intents(found)? = lookup(key) else { return [] }
        let merged = overlay.merge(found) { $0.isClaimable(by: owner, evenIfLeased: evenIfLeased, at: now) }
        return Array(merged.sorted { ($0.leaseUntil, $0.createdAt) < ($1.leaseUntil, $1.createdAt) }.prefix(limit))
    }
}
