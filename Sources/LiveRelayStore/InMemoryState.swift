import LiveRelayAPNs
import LiveRelayCollections
import LiveRelayDomain
import LiveRelayPushOutlet

/// The state with the three hot indexes: the reference semantics every store
/// must match, the storage of the memory store (one per app, ``AppShards``),
/// and the state domain tests run rules against. Tokens, by far the most
/// numerous rows, are kept compact (``TokenTable``); activities and
/// idempotency records (``ActivityRecords``) are `RecordMap`s (a
/// dictionary of them stalls the call that grows it past 786,432 activities
/// for 0.6 s, past 1,572,864 for 2.8 s);
/// intents are a dictionary with the intents of each activity beside it, so
/// putting one looks only at its activity's older intents.
///
/// A value type: copying it is a snapshot, and applying a plan is a pure
/// function of the old value and the writes.
public struct InMemoryState: StateReader, TokenCounts, Sendable {
    /// The tokens and their indexes, compact (``TokenTable``).
    private var tokens = TokenTable()
    private var activities = RecordMap<ActivityKey, Activity>()
    private var records = RecordMap<ActivityKey, ActivityRecords>()
    /// The activities by the minute of their sweep deadline (``SweepIndex``).
    private var sweepIndex = SweepIndex()
    private var intents: [IntentKey: DispatchIntent] = [:]
    /// The timestamps of each activity's intents: what a new intent may supersede.
    private var intentsByActivity: [ActivityKey: Set<Int64>] = [:]
    /// Each app's event feed.
    private var eventFeeds = InMemoryEventFeeds()

    public init() {}

    /// Unfinished dispatch intents.
    public var intentCount: Int { intents.count }

    public var tokenCount: Int { tokens.count }
    public var activityCount: Int { activities.count }

    /// Plans `mutation` against this state and applies its writes; nothing changes if it throws.
    ///
    /// Exported specialized for RegisterToken, the most frequent call, as
    /// ``applyPlan(_:now:)`` is.
    @_specialize(exported:true,where M == RegisterToken)
    public mutating func apply<M: StoreMutation>(_ mutation: M, now: UnixTime) throws(DomainError) -> M.Outcome {
        let plan = try mutation.plan(self, now: now)
        apply(plan.writes)
        return plan.outcome
    }

    /// ``apply(_:now:)`` that also returns the writes it applied, which the
    /// memory store checks name the app the call is about.
    ///
    /// Exported specialized for RegisterToken, the most frequent call, so that
    /// the memory store (its callers reach it through `any ActivityStore`,
    /// unspecialized) plans it without generic metadata lookups while it holds
    /// the app's lock.
    @_specialize(exported:true,where M == RegisterToken)
    public mutating func applyPlan<M: StoreMutation>(_ mutation: M, now: UnixTime) throws(DomainError) -> MutationPlan<M.Outcome> {
        let plan = try mutation.plan(self, now: now)
        apply(plan.writes)
        return plan
    }

    public mutating func apply(_ writes: [StoreWrite]) {
        for write in writes { apply(write) }
    }

    public mutating func apply(_ write: StoreWrite) {
        switch write {
        case let .putToken(token):
            tokens.put(token)
        case let .deleteToken(key):
            tokens.delete(key)
        case let .deleteUpdateTokens(activity):
            tokens.deleteUpdateTokens(of: activity)
        case let .putActivity(activity):
            sweepIndex.move(activity.key, from: activities[activity.key]?.sweepDeadline, to: activity.sweepDeadline)
            activities[activity.key] = activity
        case let .deleteActivity(key):
            sweepIndex.move(key, from: activities[key]?.sweepDeadline, to: nil)
            activities[key] = nil
            records[key] = nil
        case let .putIdempotencyRecord(record):
            records[ActivityKey(appID: record.appID, activityID: record.activityID), default: ActivityRecords()].put(record)
        case let .settleReply(activity, timestamp, account):
            records[activity]?.settle(timestamp: timestamp, account: account)
        case let .putIntent(intent):
            for timestamp in intentsByActivity[intent.key.activity] ?? [] {
                var key = intent.key
                key.timestamp = timestamp
                if let older = intents[key], older.isSuperseded(by: intent) { removeIntent(key) }
            }
            intents[intent.key] = intent
            intentsByActivity[intent.key.activity, default: []].insert(intent.key.timestamp)
        case let .deleteIntent(key):
            removeIntent(key)
        case let .leaseIntent(key, owner, until):
            intents[key]?.owner = owner
            intents[key]?.leaseUntil = until
        case let .renewIntent(key, owner, until):
            if intents[key]?.owner == owner { intents[key]?.leaseUntil = until }
        case let .appendEvent(event):
            eventFeeds.append(event)
        }
    }

    /// A page of the app's feed: the events after `cursor`, at most `limit`.
    public func events(appID: String, after cursor: UInt64, limit: Int) -> EventPage {
        eventFeeds.page(appID: appID, after: cursor, limit: limit)
    }

    /// The last cursor the app's feed handed out (0: none).
    public func lastEventCursor(appID: String) -> UInt64 { eventFeeds.lastCursor(appID: appID) }

    /// Applies `retention` to every feed of this state at `now`; returns the events deleted.
    public mutating func trimEvents(_ retention: EventRetention, now: UnixTime) -> Int {
        let before = now - retention.maxAge
        return Array(eventFeeds.appIDs).reduce(0) { $0 + eventFeeds.trim(appID: $1, before: before, keep: retention.maxPerApp) }
    }

    /// The whole state as writes that rebuild it from empty: every token,
    /// activity, idempotency record and intent as its put. How the memory
    /// store merges its apps' states into one (``InMemoryActivityStore/snapshot``).
    public func forEachWrite(_ body: (StoreWrite) -> Void) {
        tokens.forEachToken { body(.putToken($0)) }
        for (_, activity) in activities { body(.putActivity(activity)) }
        for (_, activityRecords) in records {
            // Oldest first: each put keeps the newest, so none the state holds is evicted.
            for record in activityRecords.byKey.values.sorted(by: { $0.reply.timestamp < $1.reply.timestamp }) {
                body(.putIdempotencyRecord(record))
            }
        }
        // Newest first: a put deletes only older intents it supersedes, so none the state holds is lost.
        for intent in intents.values.sorted(by: { $0.key.timestamp > $1.key.timestamp }) { body(.putIntent(intent)) }
        // In cursor order: the rebuilt feeds keep their events' order (their cursors are numbered anew).
        for feed in eventFeeds.feeds.values { feed.live.forEach { body(.appendEvent($0.event)) } }
    }

    private mutating func removeIntent(_ key: IntentKey) {
        guard intents.removeValue(forKey: key) != nil else { return }
        let activity = key.activity
        intentsByActivity[activity]?.remove(key.timestamp)
        if intentsByActivity[activity]?.isEmpty == true { intentsByActivity[activity] = nil }
    }

    // MARK: StateReader

    public func token(_ key: TokenKey) -> Token? { tokens.token(key) }

    public func token(in slot: TokenSlot) -> Token? { tokens.token(in: slot) }

    public func activity(_ key: ActivityKey) -> Activity? { activities[key] }

    /// Tokens are counted per app as they come and go; live activities are a scan.
    public func usage(of appID: String, at now: UnixTime) -> AppUsage {
        var live = [appID: 0]
        _ = countLiveActivities(of: &live, at: now, from: 0, limit: .max)
        return AppUsage(tokens: tokens.count(ofApp: appID), liveActivities: live[appID] ?? 0)
    }

    /// Adds to `counts` the live activities of the apps it has keys for, among
    /// the activities numbered `start ..< start + limit`; returns where to go on
    /// (nil: counted to the end). Why in slices: liveness depends on the time,
    /// so it is counted by a scan, and a scan of a million activities took
    /// 58 ms; the memory store counts in slices and lets go of its lock
    /// between them rather than stalling every call for that long.
    public func countLiveActivities(of counts: inout [String: Int], at now: UnixTime, from start: Int, limit: Int) -> Int? {
        // Counted in runs of one app: a dictionary lookup per activity doubled the scan's time.
        var app = "", tracked = false, run = 0
        func flush() {
            if tracked && run > 0 { counts[app]! += run }
            run = 0
        }
        let next = activities.forEach(from: start, limit: limit) { _, activity in
            guard activity.isLive(at: now) else { return }
            if activity.appID != app {
                flush()
                app = activity.appID
                tracked = counts[app] != nil
            }
            if tracked { run += 1 }
        }
        flush()
        return next
    }

    public func tokenCount(ofApp appID: String) -> Int { tokens.count(ofApp: appID) }

    public func idempotencyRecord(_ activity: ActivityKey, key: String) -> IdempotencyRecord? { records[activity]?[key] }

    public func updateTokens(of activity: ActivityKey) -> [Token] { tokens.updateTokens(of: activity) }
    public func updateTokenKeys(of activity: ActivityKey, limit: Int) -> [TokenKey] {
        tokens.updateTokenKeys(of: activity, limit: limit)
    }

    public func updateTargets(of activity: ActivityKey, at now: UnixTime) -> [PushTarget] {
        tokens.updateTargets(of: activity, at: now)
    }

    /// The activity's update tokens, counted up to `limit` (``StoreMutation/tokensRead(in:upTo:)``).
    public func updateTokenCount(of activity: ActivityKey, upTo limit: Int) -> Int {
        tokens.updateTokenCount(of: activity, upTo: limit)
    }

    /// The type's push-to-start tokens, counted up to `limit` (``StoreMutation/tokensRead(in:upTo:)``).
    public func pushToStartTokenCount(appID: String, attributesType: String, upTo limit: Int) -> Int {
        tokens.pushToStartTokenCount(appID: appID, attributesType: attributesType, upTo: limit)
    }

    public func pushToStartTokens(appID: String, attributesType: String) -> [Token] {
        tokens.pushToStartTokens(appID: appID, attributesType: attributesType)
    }

    public func pushToStartTargets(appID: String, attributesType: String, at now: UnixTime) -> [PushTarget] {
        tokens.pushToStartTargets(appID: appID, attributesType: attributesType, at: now)
    }

    public func pushToStartTokens(appID: String, externalUserID: String, attributesType: String) -> [Token] {
        tokens.pushToStartTokens(appID: appID, externalUserID: externalUserID, attributesType: attributesType)
    }

    /// The push-to-start tokens of several users, each token once.
    public func pushToStartTokens(appID: String, externalUserIDs: [String], attributesType: String) -> [Token] {
        var seen = Set<String>()
        return externalUserIDs.flatMap {
            pushToStartTokens(appID: appID, externalUserID: $0, attributesType: attributesType)
        }.filter { seen.insert($0.hex).inserted }
    }

    /// The earliest due first, as the SQL stores answer (their index is on the
    /// same deadline); only the minutes that are due are read.
    public func activitiesDue(at now: UnixTime, limit: Int) -> [Activity] {
        guard limit > 0 else { return [] }
        let due = sweepIndex.keys(dueBy: now, enough: limit).compactMap { key in
            activities[key].flatMap { $0.sweepDeadline <= now ? $0 : nil }
        }
        return Array(due.sorted { $0.sweepDeadline < $1.sweepDeadline }.prefix(limit))
    }

    public func tokensExpired(at now: UnixTime, limit: Int) -> [Token] { tokens.tokensExpired(at: now, limit: limit) }

    /// A scan: intents are few (only unfinished calls).
    public func claimableIntents(by owner: String, evenIfLeased: Bool, at now: UnixTime, limit: Int) -> [DispatchIntent] {
        let due = intents.values.filter { $0.isClaimable(by: owner, evenIfLeased: evenIfLeased, at: now) }
        return Array(due.sorted { ($0.leaseUntil, $0.createdAt) < ($1.leaseUntil, $1.createdAt) }.prefix(limit))
    }
}
