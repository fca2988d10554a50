import LiveRelayAPNs
import LiveRelayPushOutlet

/// What ``ClaimIntents`` found: batches to send again, and intents it
/// finished without sending (expired, or rows it cannot send).
public struct ClaimedIntents: Hashable, Sendable {
    /// The pushes of each claimed intent, rebuilt with the first attempt's payload and marked durable.
    public var batches: [PushBatch] = []
    /// Past their expiry: deleted, nothing sent, every push counted `expired` in the call's account.
    public var expired: [IntentKey] = []
    /// Rows that can never be sent (a payload over the limit, a damaged target
    /// list): deleted with the reason, the call's account settled failed with
    /// it, never retried.
    public var dropped: [DroppedIntent] = []
    /// Rows of a format version this build does not understand (written by a
    /// newer or older build during a rolling upgrade): leased for one lease
    /// and left alone, for a node that understands them once it runs out.
    public var left: [IntentKey] = []

    public init() {}

    public var isEmpty: Bool { batches.isEmpty && expired.isEmpty && dropped.isEmpty && left.isEmpty }
}

/// An intent deleted unsent, and why.
public struct DroppedIntent: Hashable, Sendable {
    public var key: IntentKey
    public var reason: String

    public init(key: IntentKey, reason: String) {
        self.key = key
        self.reason = reason
    }
}

/// Takes over dispatch intents that no live node holds (see
/// ``StateReader/claimableIntents(by:evenIfLeased:at:limit:)``): leases
/// them to `lease.owner` and rebuilds their pushes, an update's from the
/// activity's update tokens as they are now.
public struct ClaimIntents: PollsAcrossApps {
    public var lease: IntentLease
    public var evenIfLeased: Bool
    public var limit: Int

    public init(lease: IntentLease, evenIfLeased: Bool = false, limit: Int = 100) {
        self.lease = lease
        self.evenIfLeased = evenIfLeased
        self.limit = max(1, limit)
    }

    /// `plan` takes the intents whose lease ran out first, the oldest first among them.
    public func firstWork(in state: some StateReader, now: UnixTime) -> PollOrder? {
        state.claimableIntents(by: lease.owner, evenIfLeased: evenIfLeased, at: now, limit: 1).first.map {
            PollOrder(time: $0.leaseUntil, tie: $0.createdAt)
        }
    }

    public var idleOutcome: ClaimedIntents { ClaimedIntents() }

    public func limited(to limit: Int) -> ClaimIntents {
        ClaimIntents(lease: lease, evenIfLeased: evenIfLeased, limit: limit)
    }

    /// Each intent claimed, expired or dropped, as `plan` takes them.
    public func work(of outcome: ClaimedIntents) -> Int {
        outcome.batches.count + outcome.expired.count + outcome.dropped.count + outcome.left.count
    }

    public func merged(_ outcome: ClaimedIntents, _ more: ClaimedIntents) -> ClaimedIntents {
        var merged = outcome
        merged.batches += more.batches
        merged.expired += more.expired
        merged.dropped += more.dropped
        merged.left += more.left
        return merged
    }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<ClaimedIntents> {
        var claimed = ClaimedIntents()
        var writes: [StoreWrite] = []
        let until = lease.until(now)
        for intent in state.claimableIntents(by: lease.owner, evenIfLeased: evenIfLeased, at: now, limit: limit) {
            let targets = {
                intent.resolvedTargets { state.updateTargets(of: intent.key.activity, at: now) }
            }
            if intent.version != DispatchIntent.formatVersion {
                // Not this build's to judge, nor to send: leased so that this node does not take it up again
                // at once, then left for a node that reads its format. Its expiry, still, is a column this build reads.
                if let expiresAt = intent.expiresAt, expiresAt <= now {
                    writes.append(.deleteIntent(intent.key))
                    claimed.expired.append(intent.key)
                    continue
                }
                writes.append(.leaseIntent(intent.key, owner: lease.owner, until: until))
                claimed.left.append(intent.key)
                continue
            }
            if let defect = intent.defect {
                writes.append(.deleteIntent(intent.key))
                // The call's account says why, so a replay reports it failed, never queued for good.
                let count = intent.damage == nil ? max(1, targets().count) : 1
                let account = EnqueueResult(failures: [defect: count])
                writes.append(.settleReply(intent.key.activity, timestamp: intent.key.timestamp, account: account))
                writes.append(.appendEvent(.callSettled(intent.key, account: account, at: now)))
                claimed.dropped.append(DroppedIntent(key: intent.key, reason: defect))
                continue
            }
            if let expiresAt = intent.expiresAt, expiresAt <= now {
                // Settled unsent: its pushes are the call's final account, so a replay reports them expired.
                writes.append(.deleteIntent(intent.key))
                let account = EnqueueResult(expired: targets().count)
                writes.append(.settleReply(intent.key.activity, timestamp: intent.key.timestamp, account: account))
                writes.append(.appendEvent(.callSettled(intent.key, account: account, at: now)))
                claimed.expired.append(intent.key)
                continue
            }
            writes.append(.leaseIntent(intent.key, owner: lease.owner, until: until))
            claimed.batches.append(intent.batch(to: targets()))
        }
        return MutationPlan(writes: writes, outcome: claimed)
    }
}

/// Extends the leases of the intents whose pushes this node's dispatcher
/// holds, and of no others: a row this node leased but does not hold (its
/// call's COMMIT had an unknown outcome, or a claim's did) runs out of lease
/// and is claimed like another node's, so its pushes are sent.
public struct RenewIntents: SplitsByApp {
    public var lease: IntentLease
    public var keys: [IntentKey]

    public init(lease: IntentLease, keys: [IntentKey]) {
        self.lease = lease
        self.keys = keys
    }

    /// One app's when every key is of that app; every app's otherwise.
    public var scope: MutationScope {
        guard let first = keys.first?.appID, keys.allSatisfy({ $0.appID == first }) else { return .allApps }
        return .app(first)
    }

    public var partsByApp: [RenewIntents] {
        Dictionary(grouping: keys, by: \.appID).values.map { RenewIntents(lease: lease, keys: $0) }
    }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Void> {
        let until = lease.until(now)
        return MutationPlan(writes: keys.map { .renewIntent($0, owner: lease.owner, until: until) }, outcome: ())
    }
}

/// An intent whose every push is final, with the account the dispatcher kept of them.
public struct SettledIntent: Hashable, Sendable {
    public var key: IntentKey
    /// The call's final account (`queued` 0).
    public var account: EnqueueResult
    /// Its pushes that failed for good.
    public var failedPushes: [FailedPush]
    /// The call's idempotency key, when the settling node accepted the call (a resumed intent has none).
    public var idempotencyKey: String?

    public init(key: IntentKey, account: EnqueueResult, failedPushes: [FailedPush] = [], idempotencyKey: String? = nil) {
        self.key = key
        self.account = account
        self.failedPushes = failedPushes
        self.idempotencyKey = idempotencyKey
    }

    public init(_ batch: SettledBatch) {
        self.init(
            key: IntentKey(appID: batch.appID, activityID: batch.activityID, timestamp: batch.timestamp), account: batch.account,
            failedPushes: batch.failedPushes, idempotencyKey: batch.idempotencyKey)
    }
}

/// Deletes the intents whose every push is accounted for, and keeps each
/// call's final account on its idempotency record (if it has one): the row
/// that said "still to send" goes in the transaction that says what was sent,
/// so a replay of the call never finds neither. The app's feed gets the
/// call's settled event and one event per push that failed for good, in the
/// same transaction.
public struct SettleIntents: SplitsByApp {
    public var settled: [SettledIntent]

    public init(_ settled: [SettledIntent]) { self.settled = settled }

    /// One app's when every intent is of that app, as the dispatcher settles
    /// (a batch of one call's pushes); every app's otherwise.
    public var scope: MutationScope {
        guard let first = settled.first?.key.appID, settled.allSatisfy({ $0.key.appID == first }) else { return .allApps }
        return .app(first)
    }

    public var partsByApp: [SettleIntents] {
        Dictionary(grouping: settled, by: \.key.appID).values.map(SettleIntents.init)
    }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Void> {
        var writes: [StoreWrite] = []
        writes.reserveCapacity(settled.count * 3)
        for intent in settled {
            writes.append(.deleteIntent(intent.key))
            writes.append(.settleReply(intent.key.activity, timestamp: intent.key.timestamp, account: intent.account))
            for failed in intent.failedPushes {
                writes.append(
                    .appendEvent(
                        .pushFailed(
                            intent.key, token: failed.target, reason: failed.reason, idempotencyKey: intent.idempotencyKey, at: now)))
            }
            writes.append(.appendEvent(.callSettled(intent.key, account: intent.account, idempotencyKey: intent.idempotencyKey, at: now)))
        }
        return MutationPlan(writes: writes, outcome: ())
    }
}
