import LiveRelayAPNs
import NIOCore

/// One token a push goes to, or one broadcast channel (whose single send
/// APNs fans out to every subscribed device).
public struct PushTarget: Hashable, Sendable {
    /// Lowercase hex; for a channel, its id.
    public var token: String
    public var environment: APNsEnvironment
    /// Set for a channel: its storage policy fixes the send's `apns-expiration`.
    public var channelPolicy: ChannelStoragePolicy?

    public init(token: String, environment: APNsEnvironment) {
        self.token = token
        self.environment = environment
    }

    /// A broadcast channel as one target: ordering, retries and the account treat it like a token.
    public static func channel(_ id: String, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy) -> PushTarget {
        var target = PushTarget(token: id, environment: environment)
        target.channelPolicy = storagePolicy
        return target
    }

    public var isChannel: Bool { channelPolicy != nil }
}

/// The pushes one accepted call produced: one payload and one set of headers
/// for every target, as APNs needs them.
///
/// For dispatch: `timestamp` orders the pushes of one activity. Batches of
/// the same activity can reach a sink out of order (two calls race after
/// their commits); a sink must never send a push of an activity to a token
/// after one with a higher timestamp to the same token, and may drop a
/// queued one that a newer batch supersedes.
public struct PushBatch: Hashable, Sendable {
    public var appID: String
    public var activityID: String
    public var event: APNsEvent
    /// The aps `timestamp`, strictly increasing per activity.
    public var timestamp: Int64
    public var payload: APNsPayload
    public var headers: APNsHeaders
    public var targets: [PushTarget]
    /// When the pushes stop being worth sending (the activity's end of life):
    /// a push not sent by then expires. The `apns-expiration` header says the
    /// same to APNs in whole seconds, so this is that second (``sendBy(_:)``);
    /// the dispatcher reads this field, never the header.
    public var expiresAt: UnixTime?
    /// A durable intent records the batch (keyed by app, activity and
    /// timestamp): the sink tells its ``DispatchLedger`` when every push is
    /// accounted for, so the record can go.
    public var durable = false
    /// The call's idempotency key, if it had one: its settlement carries it to the event feed.
    public var idempotencyKey: String?

    public init(
        appID: String, activityID: String, event: APNsEvent, timestamp: Int64, payload: APNsPayload,
        headers: APNsHeaders, targets: [PushTarget], expiresAt: UnixTime? = nil
    ) {
        self.appID = appID
        self.activityID = activityID
        self.event = event
        self.timestamp = timestamp
        self.payload = payload
        self.headers = headers
        self.targets = targets
        self.expiresAt = expiresAt
    }

    /// The send-by time of pushes whose life ends at `end`: its whole second, the one
    /// their `apns-expiration` carries. With the milliseconds kept, a push sent in the
    /// last second of its life would reach APNs after the expiration it states.
    public static func sendBy(_ end: UnixTime) -> UnixTime { UnixTime(seconds: end.seconds) }
}

/// A token APNs declared dead (410, BadDeviceToken, DeviceTokenNotForTopic),
/// as the dispatcher reports it: the decision is made (``APNsDisposition``),
/// the pruner only removes the token unless it was registered again since.
public struct PrunedToken: Hashable, Sendable {
    public var appID: String
    /// Lowercase hex.
    public var token: String
    /// APNs's reason, for the logs.
    public var reason: String
    /// From the 410 body's `timestamp`: a registration after it survives.
    public var invalidSince: UnixTime?

    public init(appID: String, token: String, reason: String, invalidSince: UnixTime? = nil) {
        self.appID = appID
        self.token = token
        self.reason = reason
        self.invalidSince = invalidSince
    }
}

/// Removes tokens APNs declared dead; the store's pruner in a deployment.
public protocol TokenPruner: Sendable {
    func prune(_ token: PrunedToken, on eventLoop: any EventLoop) -> EventLoopFuture<Void>
}

/// A durable batch whose every push is final, as the sink reports it to its ``DispatchLedger``.
public struct SettledBatch: Hashable, Sendable {
    public var appID: String
    public var activityID: String
    public var timestamp: Int64
    /// The batch's final account (`queued` is 0).
    public var account: EnqueueResult
    /// The pushes that failed for good, each with its reason: the event feed
    /// reports each one, with the token the account only counts.
    public var failedPushes: [FailedPush]
    /// The call's idempotency key, when the batch carried it (``PushBatch/idempotencyKey``).
    public var idempotencyKey: String?

    public init(
        appID: String, activityID: String, timestamp: Int64, account: EnqueueResult, failedPushes: [FailedPush] = [],
        idempotencyKey: String? = nil
    ) {
        self.appID = appID
        self.activityID = activityID
        self.timestamp = timestamp
        self.account = account
        self.failedPushes = failedPushes
        self.idempotencyKey = idempotencyKey
    }
}

/// A push that failed for good: to which token (or channel), and why.
public struct FailedPush: Hashable, Sendable {
    /// The device token's hex, or the channel id of a broadcast.
    public var target: String
    public var reason: String

    public init(target: String, reason: String) {
        self.target = target
        self.reason = reason
    }
}

/// Where a sink reports durable batches that are done; the store's intent
/// table in a deployment. A batch the sink gave up on because it is shutting
/// down is not reported: its record stays for the next start or another node.
public protocol DispatchLedger: Sendable {
    func settled(_ batch: SettledBatch)
    /// The app's pushes are held (`reason`: the credential rejection, or the
    /// mass-prune guard's), or go again (nil): the app's event feed reports it.
    func dispatchHold(appID: String, reason: String?)
}
