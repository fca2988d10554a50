import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet

/// Every app's state with every app's lock held (``AppShards/withAllApps(_:)``),
/// read as one state: a lookup about one app asks that app's state, a read
/// across apps (due activities, expired tokens, claimable intents) merges
/// every app's answer in the order one state would give it. Each write goes
/// to its app's state; an app with none yet gets one, locked until the hold ends.
struct AllApps: MutableState {
    /// Locked; unlocked by ``AppShards/withAllApps(_:)`` when the hold ends.
    private(set) var held: [AppShard]
    private var byApp: [String: AppShard]
    private let shards: AppShards

    /// Locks every shard of `listed`.
    init(_ listed: [AppShard], shards: AppShards) {
        listed.forEach { $0.lock.lock() }
        held = listed
        byApp = Dictionary(uniqueKeysWithValues: listed.map { ($0.appID, $0) })
        self.shards = shards
    }

    /// Copies of every app's state.
    var states: [String: InMemoryState] { byApp.mapValues(\.state) }

    mutating func applyPlan<M: StoreMutation>(_ mutation: M, now: UnixTime) throws(DomainError) -> MutationPlan<M.Outcome> {
        let plan = try mutation.plan(self, now: now)
        for write in plan.writes { shard(write.appID).state.apply(write) }
        return plan
    }

    private mutating func shard(_ appID: String) -> AppShard {
        if let shard = byApp[appID] { return shard }
        let shard = shards.shard(appID)
        shard.lock.lock()
        held.append(shard)
        byApp[appID] = shard
        return shard
    }

    /// The first `limit` of every app's answer, in `order`: each app's answer
    /// is its own first `limit`, so these are the first `limit` of all.
    private func merged<T>(limit: Int, by order: (T, T) -> Bool, _ answer: (InMemoryState) -> [T]) -> [T] {
        guard limit > 0 else { return [] }
        let all = held.flatMap { answer($0.state) }
        return held.count == 1 ? all : Array(all.sorted(by: order).prefix(limit))
    }

    // MARK: StateReader

    func token(_ key: TokenKey) -> Token? { byApp[key.appID]?.state.token(key) }
    func token(in slot: TokenSlot) -> Token? { byApp[slot.appID]?.state.token(in: slot) }
    func activity(_ key: ActivityKey) -> Activity? { byApp[key.appID]?.state.activity(key) }

    func idempotencyRecord(_ activity: ActivityKey, key: String) -> IdempotencyRecord? {
        byApp[activity.appID]?.state.idempotencyRecord(activity, key: key)
    }

    func updateTokens(of activity: ActivityKey) -> [Token] { byApp[activity.appID]?.state.updateTokens(of: activity) ?? [] }

    func updateTokenKeys(of activity: ActivityKey, limit: Int) -> [TokenKey] {
        byApp[activity.appID]?.state.updateTokenKeys(of: activity, limit: limit) ?? []
    }

    func updateTargets(of activity: ActivityKey, at now: UnixTime) -> [PushTarget] {
        byApp[activity.appID]?.state.updateTargets(of: activity, at: now) ?? []
    }

    func pushToStartTokens(appID: String, attributesType: String) -> [Token] {
        byApp[appID]?.state.pushToStartTokens(appID: appID, attributesType: attributesType) ?? []
    }

    func pushToStartTargets(appID: String, attributesType: String, at now: UnixTime) -> [PushTarget] {
        byApp[appID]?.state.pushToStartTargets(appID: appID, attributesType: attributesType, at: now) ?? []
    }

    func pushToStartTokens(appID: String, externalUserID: String, attributesType: String) -> [Token] {
        byApp[appID]?.state.pushToStartTokens(appID: appID, externalUserID: externalUserID, attributesType: attributesType) ?? []
    }

    func activitiesDue(at now: UnixTime, limit: Int) -> [Activity] {
        merged(limit: limit, by: { $0.sweepDeadline < $1.sweepDeadline }) { $0.activitiesDue(at: now, limit: limit) }
    }

    func tokensExpired(at now: UnixTime, limit: Int) -> [Token] {
        merged(limit: limit, by: { ($0.expiresAt ?? now) < ($1.expiresAt ?? now) }) { $0.tokensExpired(at: now, limit: limit) }
    }

    func claimableIntents(by owner: String, evenIfLeased: Bool, at now: UnixTime, limit: Int) -> [DispatchIntent] {
        merged(limit: limit, by: { ($0.leaseUntil, $0.createdAt) < ($1.leaseUntil, $1.createdAt) }) {
            $0.claimableIntents(by: owner, evenIfLeased: evenIfLeased, at: now, limit: limit)
        }
    }
}
