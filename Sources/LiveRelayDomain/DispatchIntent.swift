import LiveRelayAPNs
import LiveRelayPushOutlet

/// Names one accepted call's pushes: an activity's aps timestamps are
/// strictly increasing, so (app, activity, timestamp) is unique per call.
public struct IntentKey: Hashable, Sendable, CustomStringConvertible {
    public var appID: String
    public var activityID: String
    public var timestamp: Int64

    public init(appID: String, activityID: String, timestamp: Int64) {
        self.appID = appID
        self.activityID = activityID
        self.timestamp = timestamp
    }

    public init(_ batch: PushBatch) {
        self.init(appID: batch.appID, activityID: batch.activityID, timestamp: batch.timestamp)
    }

    public var activity: ActivityKey { ActivityKey(appID: appID, activityID: activityID) }
    public var description: String { "\(appID)/\(activityID)@\(timestamp)" }
}

/// Who is working on an intent, and until when: a node renews the leases of
/// the intents it holds while it works on them; an intent whose lease ran
/// out (its node died) is claimed by the next node that looks.
public struct IntentLease: Hashable, Sendable {
    /// The node, random per process start.
    public var owner: String
    /// How long a lease lasts from its last renewal.
    public var duration: Duration

    public init(owner: String, duration: Duration = .seconds(30)) {
        self.owner = owner
        self.duration = duration
    }

    /// The lease's end for a claim or a renewal at `now`.
    public func until(_ now: UnixTime) -> UnixTime {
        let (seconds, attoseconds) = duration.components
        return UnixTime(milliseconds: now.milliseconds + seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}

/// The durable record of one accepted call's pushes (docs/PROTOCOL.md,
/// "Delivery guarantees"): written in the transaction that accepts the call,
/// deleted once every push is accounted for. It is one row per call however
/// many tokens the call reaches: an update names its targets as "the
/// activity's update tokens" and reads them again when it is resumed; a start
/// and an end (whose update tokens are deleted with it) keep their list.
///
/// A resumed intent is sent with the same payload, and so the same aps
/// timestamp, as the first attempt: a device that already has that state
/// drops the repeat.
public struct DispatchIntent: Hashable, Sendable {
    /// The row format this build writes. A row with another version is never guessed at: it is left for a build that reads it.
    public static let formatVersion = 1

    public var key: IntentKey
    public var event: APNsEvent
    public var payload: APNsPayload
    public var topic: String
    public var priority: Int
    /// `apns-expiration`, UNIX seconds.
    public var expiration: Int64
    public var expiresAt: UnixTime?
    /// nil: the activity's update tokens when the pushes are (re)built.
    public var targets: [PushTarget]?
    /// With a target list (an update to a broadcast channel): the activity's
    /// update tokens are read when the pushes are (re)built and sent as well.
    public var withUpdateTokens = false
    public var createdAt: UnixTime
    /// The node working on it, and until when (``IntentLease``).
    public var owner: String?
    public var leaseUntil: UnixTime
    public var version: Int
    /// Set by a store that could not read part of the row (a damaged target list).
    public var damage: String?

    public init(
        key: IntentKey, event: APNsEvent, payload: APNsPayload, topic: String, priority: Int, expiration: Int64,
        expiresAt: UnixTime?, targets: [PushTarget]?, createdAt: UnixTime, owner: String?, leaseUntil: UnixTime,
        version: Int = DispatchIntent.formatVersion
    ) {
        self.key = key
        self.event = event
        self.payload = payload
        self.topic = topic
        self.priority = priority
        self.expiration = expiration
        self.expiresAt = expiresAt
        self.targets = targets
        self.createdAt = createdAt
        self.owner = owner
        self.leaseUntil = leaseUntil
        self.version = version
    }

    /// The intent of `batch`, leased to `lease` from `now`. An update keeps no
    /// token list (its tokens are re-read from the activity, unless it went to
    /// its channel only) but keeps its channel; a start or end keeps its list.
    public init(_ batch: PushBatch, lease: IntentLease, now: UnixTime, channelOnly: Bool = false) {
        let channels = batch.targets.filter(\.isChannel)
        self.init(
            key: IntentKey(batch), event: batch.event, payload: batch.payload, topic: batch.headers.topic,
            priority: batch.headers.priority, expiration: batch.headers.expiration, expiresAt: batch.expiresAt,
            targets: batch.event != .update ? batch.targets : channels.isEmpty ? nil : channels, createdAt: now,
            owner: lease.owner, leaseUntil: lease.until(now))
        withUpdateTokens = batch.event == .update && !channels.isEmpty && !channelOnly
    }

    /// The write that records `batch` as an intent, marking it durable; none
    /// without a lease (intents disabled) or without targets.
    public static func record(
        _ batch: inout PushBatch, lease: IntentLease?, now: UnixTime, channelOnly: Bool = false
    ) -> [StoreWrite] {
        guard let lease, !batch.targets.isEmpty else { return [] }
        batch.durable = true
        return [.putIntent(DispatchIntent(batch, lease: lease, now: now, channelOnly: channelOnly))]
    }

    /// The pushes' targets as the intent names them: its list, and the
    /// activity's update tokens (`updateTokens`, read only when needed) when
    /// it has no list or names them besides its channel.
    public func resolvedTargets(updateTokens: () -> [PushTarget]) -> [PushTarget] {
        guard let targets else { return updateTokens() }
        return withUpdateTokens ? targets + updateTokens() : targets
    }

    /// Whether every target is a channel: the broadcast payload limit applies.
    public var isBroadcastOnly: Bool {
        guard let targets, !withUpdateTokens, !targets.isEmpty else { return false }
        return targets.allSatisfy(\.isChannel)
    }

    /// Whether `owner` may claim the intent at `now`: its lease is over, whoever
    /// held it, this node included (a row this node leased and does not hold,
    /// its call's or its claim's COMMIT having had an unknown outcome, is not
    /// renewed and comes back here). With `evenIfLeased` (a node that knows it
    /// is the only one, at start) any lease counts as over except the ones
    /// `owner` holds now: the rows its earlier pages of the same claim took.
    public func isClaimable(by owner: String, evenIfLeased: Bool, at now: UnixTime) -> Bool {
        if evenIfLeased { return self.owner != owner || leaseUntil <= now }
        return leaseUntil <= now
    }

    /// Whether a newer intent of the same activity makes this one pointless
    /// and is to delete it: only updates are superseded (a start's targets are
    /// other tokens, and an end is the last), and only while no other live node
    /// works on them. Another node's row is left to it: deleting it would
    /// conflict with that node's lease renewals (on PostgreSQL, a serialization
    /// failure per renewal), and sending it does no harm, since a device drops
    /// a timestamp older than the one it has.
    public func isSuperseded(by newer: DispatchIntent) -> Bool {
        event == .update && newer.event != .start && newer.key.activity == key.activity
            && newer.key.timestamp > key.timestamp && (owner == newer.owner || leaseUntil <= newer.createdAt)
            && newer.reachesEveryone(self)
    }

    /// Whether this intent goes to every target `older` went to: the update
    /// tokens if it did, and each of its channels (a newer update to the
    /// tokens alone leaves a channel's subscribers needing the older one).
    private func reachesEveryone(_ older: DispatchIntent) -> Bool {
        let tokens = targets == nil || withUpdateTokens || event == .end
        if older.targets == nil || older.withUpdateTokens, !tokens { return false }
        let channels = Set((targets ?? []).lazy.filter(\.isChannel).map(\.token))
        return (older.targets ?? []).allSatisfy { !$0.isChannel || channels.contains($0.token) }
    }

    /// The pushes again, to `targets`, marked durable.
    public func batch(to targets: [PushTarget]) -> PushBatch {
        var headers = APNsHeaders(bundleID: "", priority: priority, expiration: expiration)
        headers.topic = topic
        var batch = PushBatch(
            appID: key.appID, activityID: key.activityID, event: event, timestamp: key.timestamp, payload: payload,
            headers: headers, targets: targets, expiresAt: expiresAt)
        batch.durable = true
        return batch
    }

    /// Why the intent can never be sent, if it cannot: a row that does not
    /// read, or a payload above APNs's limit. (A row of another format version
    /// is not judged: it is left for a build that reads it.)
    public var defect: String? {
        if let damage { return damage }
        let limit = isBroadcastOnly ? APNsBroadcast.maxPayloadBytes : APNsPayload.maxBytes
        if payload.count > limit { return "PayloadTooLarge(\(payload.count))" }
        return nil
    }
}
