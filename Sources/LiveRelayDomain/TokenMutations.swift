import LiveRelayAPNs
import LiveRelayMessages

/// RegisterToken as a store mutation: reads the token, its slot and its activity, applies ``TokenRegistration``.
public struct RegisterToken: StoreMutation {
    public var command: RegistrationCommand
    /// Set when the app is at its token quota: a registration that would add
    /// a token is refused; a refresh, a rotation or a removal is not.
    public var tokenQuota: CountQuota?

    public init(_ command: RegistrationCommand, tokenQuota: CountQuota? = nil) {
        self.command = command
        self.tokenQuota = tokenQuota
    }

    /// A request that passed validation (every decoded request has).
    public init(_ request: RegisterTokenRequest, pushToStartRetention: UnixTime.Duration? = nil, tokenQuota: CountQuota? = nil) {
        self.init(RegistrationCommand(validated: request, pushToStartRetention: pushToStartRetention), tokenQuota: tokenQuota)
    }

    public var scope: MutationScope { .app(command.appID) }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<TokenRegistration.Plan> {
        let key = TokenKey(appID: command.appID, hex: command.hex)
        let existing = state.token(key)
        let plan: TokenRegistration.Plan
        if command.remove {
            plan = try TokenRegistration.decide(command, existing: existing, slotOccupant: nil, activity: nil, now: now)
        } else {
            let candidate = try TokenRegistration.token(from: command, now: now)
            let occupant = candidate.slot.flatMap { state.token(in: $0) }
            let activity = candidate.activityID.flatMap {
                state.activity(ActivityKey(appID: command.appID, activityID: $0))
            }
            plan = try TokenRegistration.decide(
                command, candidate: candidate, existing: existing, slotOccupant: occupant, activity: activity, now: now)
        }
        if case .create = plan.decision, let tokenQuota { throw .quotaExceeded(appID: command.appID, tokenQuota) }
        var writes: [StoreWrite] = []
        switch plan.decision {
        case let .create(token), let .update(token): writes.append(.putToken(token))
        case let .rotate(token, replaced):
            writes.append(.deleteToken(replaced.key))
            writes.append(.putToken(token))
        case let .remove(token): writes.append(.deleteToken(token.key))
        case .unchanged, .notFound: break
        }
        if let activity = plan.activity { writes.append(.putActivity(activity)) }
        return MutationPlan(writes: writes, outcome: plan)
    }
}

/// What pruning a dead token came to.
public enum TokenPruning {
    public enum Outcome: Hashable, Sendable {
        case pruned(Token)
        /// The token was registered again after APNs found it invalid (410's
        /// `timestamp`): the new registration wins.
        case reregistered(Token)
        case notFound
    }
}

/// Removes a token APNs declared dead. Whether an answer means "dead" is
/// decided once, by `APNsDisposition` in LiveRelayAPNs; this rule only keeps
/// a token registered again after APNs found it invalid.
public struct PruneToken: StoreMutation {
    public var token: TokenKey
    /// APNs's reason (Unregistered, BadDeviceToken...): the feed's event says it.
    public var reason: String
    /// APNs's 410 `timestamp`: when it last found the token invalid.
    public var invalidSince: UnixTime?

    public init(_ token: TokenKey, reason: String, invalidSince: UnixTime? = nil) {
        self.token = token
        self.reason = reason
        self.invalidSince = invalidSince
    }

    public var scope: MutationScope { .app(token.appID) }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<TokenPruning.Outcome> {
        guard let existing = state.token(token) else { return MutationPlan(outcome: .notFound) }
        if let invalidSince, existing.updatedAt > invalidSince {
            return MutationPlan(outcome: .reregistered(existing))
        }
        let event = FeedEvent(
            appID: token.appID, kind: .tokenPruned, time: now, activityID: existing.activityID, token: token.hex,
            tokenKind: existing.kind, reason: reason, invalidSince: invalidSince)
        return MutationPlan(writes: [.deleteToken(token), .appendEvent(event)], outcome: .pruned(existing))
    }
}

/// What one sweep did.
public struct SweepReport: Hashable, Sendable {
    /// Activities that reached 8 hours without an end.
    public var expired: [ActivityKey] = []
    /// Ended activities whose dismissal date passed.
    public var dismissed: [ActivityKey] = []
    /// Finished activities forgotten after ``ActivityLifetime/retention``.
    public var purged: [ActivityKey] = []
    /// Update tokens of expired activities and tokens past their own expiry.
    public var deletedTokens: [TokenKey] = []

    public init() {}

    public var isEmpty: Bool { expired.isEmpty && dismissed.isEmpty && purged.isEmpty && deletedTokens.isEmpty }
}

/// The expiry sweep: activities at 8 hours expire and lose their update
/// tokens; ended ones become dismissed at their dismissal date; finished ones
/// are purged after the retention; tokens past their own expiry go.
/// Push-to-start tokens without an expiry are never swept (only removal or pruning ends them).
///
/// A pass does at most `limit` things: each activity changed and each token
/// deleted counts, the tokens of an expiring activity included, since a pass
/// is one mutation (one SQL transaction, one hold of the memory store's lock).
/// An activity expires with as many of its update tokens as the pass has room
/// for (an update to it is refused from then on either way), the rest go
/// before its purge: a purge waits until a pass has deleted the last of them.
public struct Sweep: PollsAcrossApps {
    /// Caps one sweep's work (and a SQL store's transaction); run again while the report is non-empty.
    public var limit: Int

    public init(limit: Int = 10_000) { self.limit = limit }

    /// `plan` takes due activities first (the earliest due first), then expired tokens (the earliest expired first).
    public func firstWork(in state: some StateReader, now: UnixTime) -> PollOrder? {
        if let due = state.activitiesDue(at: now, limit: 1).first { return PollOrder(rank: 0, time: due.sweepDeadline) }
        return state.tokensExpired(at: now, limit: 1).first { $0.isExpired(at: now) }.map {
            PollOrder(rank: 1, time: $0.expiresAt ?? now)
        }
    }

    public var idleOutcome: SweepReport { SweepReport() }

    public func limited(to limit: Int) -> Sweep { Sweep(limit: limit) }

    /// Each activity changed and each token deleted, as `plan` counts them.
    public func work(of outcome: SweepReport) -> Int {
        outcome.expired.count + outcome.dismissed.count + outcome.purged.count + outcome.deletedTokens.count
    }

    public func merged(_ outcome: SweepReport, _ more: SweepReport) -> SweepReport {
        var merged = outcome
        merged.expired += more.expired
        merged.dismissed += more.dismissed
        merged.purged += more.purged
        merged.deletedTokens += more.deletedTokens
        return merged
    }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<SweepReport> {
        var report = SweepReport()
        var writes: [StoreWrite] = []
        var deleted = Set<TokenKey>()
        /// What is left of `limit` in this pass.
        var budget = limit
        func delete(_ key: TokenKey) {
            if deleted.insert(key).inserted {
                writes.append(.deleteToken(key))
                report.deletedTokens.append(key)
                budget -= 1
            }
        }
        /// Deletes as many of the activity's update tokens as the budget has room for; true when that was all of them.
        func deleteUpdateTokens(of activity: ActivityKey) -> Bool {
            let room = max(0, budget)
            // One more than there is room for says whether any would be left.
            let keys = state.updateTokenKeys(of: activity, limit: room + 1)
            keys.prefix(room).forEach(delete)
            return keys.count <= room
        }
        for var activity in state.activitiesDue(at: now, limit: limit) where activity.sweepDeadline <= now {
            guard budget > 0 else { break }
            switch activity.state {
            case .starting, .active:
                activity.state = .expired
                writes.append(.putActivity(activity))
                writes.append(.appendEvent(.activityEnded(activity.key, state: .expired, at: now)))
                report.expired.append(activity.key)
                budget -= 1
                _ = deleteUpdateTokens(of: activity.key)
            case .ended:
                activity.state = .dismissed
                writes.append(.putActivity(activity))
                writes.append(.appendEvent(.activityEnded(activity.key, state: .dismissed, at: now)))
                report.dismissed.append(activity.key)
                budget -= 1
            case .expired, .dismissed:
                // Still due after this pass when tokens are left: the next pass goes on.
                guard deleteUpdateTokens(of: activity.key) else { continue }
                writes.append(.deleteActivity(activity.key))
                report.purged.append(activity.key)
                budget -= 1
            }
        }
        for token in state.tokensExpired(at: now, limit: max(0, budget)) where token.isExpired(at: now) {
            delete(token.key)
        }
        return MutationPlan(writes: writes, outcome: report)
    }
}
