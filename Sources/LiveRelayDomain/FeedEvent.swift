import LiveRelayAPNs
import LiveRelayPushOutlet

/// One fact of an app's event feed (docs/PROTOCOL.md, "Event feed"): what
/// became of a call after its reply. A rule writes it (``StoreWrite/appendEvent(_:)``)
/// in the transaction of the state it reports, so an event is never lost
/// while its fact stands, nor kept for a fact that was rolled back.
public struct FeedEvent: Hashable, Sendable {
    public enum Kind: Int, Hashable, Sendable, CaseIterable {
        /// Every push of a call is final: ``account`` is its final account.
        case callSettled = 1
        /// One push failed for good: ``token``, ``reason``.
        case pushFailed = 2
        /// A token APNs declared dead was deleted: ``token``, ``tokenKind``, ``reason``, ``invalidSince``.
        case tokenPruned = 3
        /// An activity ended: by a call (``activityState`` ended) or by the sweep (expired, dismissed).
        case activityEnded = 4
        /// The app's pushes are held: ``reason``.
        case dispatchHeld = 5
        /// The app's held pushes go again.
        case dispatchResumed = 6
        /// A broadcast channel was deleted: ``channelID``.
        case channelDeleted = 7

        /// The kind's liverelay.v1.EventKind name, as the admin API's `event_kinds` and the feed's JSON spell it.
        public var protoName: String {
            switch self {
            case .callSettled: "EVENT_KIND_CALL_SETTLED"
            case .pushFailed: "EVENT_KIND_PUSH_FAILED"
            case .tokenPruned: "EVENT_KIND_TOKEN_PRUNED"
            case .activityEnded: "EVENT_KIND_ACTIVITY_ENDED"
            case .dispatchHeld: "EVENT_KIND_DISPATCH_HELD"
            case .dispatchResumed: "EVENT_KIND_DISPATCH_RESUMED"
            case .channelDeleted: "EVENT_KIND_CHANNEL_DELETED"
            }
        }

        /// The kind an EventKind name names; nil for any other string.
        public init?(protoName: String) {
            guard let kind = Self.allCases.first(where: { $0.protoName == protoName }) else { return nil }
            self = kind
        }
    }

    public var appID: String
    public var kind: Kind
    /// When it was recorded.
    public var time: UnixTime
    public var activityID: String?
    /// The call's aps timestamp, which names it within its activity (``IntentKey``).
    public var callTimestamp: Int64?
    /// The call's idempotency key, when the node that settled the call accepted it (a call resumed from its
    /// intent by another process is named by ``activityID`` and ``callTimestamp`` alone).
    public var idempotencyKey: String?
    public var account: EnqueueResult?
    public var token: String?
    public var tokenKind: Token.Kind?
    public var reason: String?
    public var invalidSince: UnixTime?
    public var activityState: Activity.State?
    public var channelID: String?
    /// Set on a fact that two nodes may both report (a call settled by the node
    /// that sent it and, after its lease ran out, by another): a feed keeps the
    /// first event with a given key and drops the others.
    public var dedupeKey: String?

    public init(
        appID: String, kind: Kind, time: UnixTime, activityID: String? = nil, callTimestamp: Int64? = nil,
        idempotencyKey: String? = nil, account: EnqueueResult? = nil, token: String? = nil, tokenKind: Token.Kind? = nil,
        reason: String? = nil,
        invalidSince: UnixTime? = nil, activityState: Activity.State? = nil, channelID: String? = nil,
        dedupeKey: String? = nil
    ) {
        self.appID = appID
        self.kind = kind
        self.time = time
        self.activityID = activityID
        self.callTimestamp = callTimestamp
        self.idempotencyKey = idempotencyKey
        self.account = account
        self.token = token
        self.tokenKind = tokenKind
        self.reason = reason
        self.invalidSince = invalidSince
        self.activityState = activityState
        self.channelID = channelID
        self.dedupeKey = dedupeKey
    }

    /// A call's pushes are all final.
    public static func callSettled(
        _ key: IntentKey, account: EnqueueResult, idempotencyKey: String? = nil, at time: UnixTime
    ) -> FeedEvent {
        FeedEvent(
            appID: key.appID, kind: .callSettled, time: time, activityID: key.activityID, callTimestamp: key.timestamp,
            idempotencyKey: idempotencyKey, account: account, dedupeKey: "settled \(key.activityID) \(key.timestamp)")
    }

    /// One of a call's pushes failed for good.
    public static func pushFailed(
        _ key: IntentKey, token: String, reason: String, idempotencyKey: String? = nil, at time: UnixTime
    ) -> FeedEvent {
        FeedEvent(
            appID: key.appID, kind: .pushFailed, time: time, activityID: key.activityID, callTimestamp: key.timestamp,
            idempotencyKey: idempotencyKey, token: token, reason: reason,
            dedupeKey: "failed \(key.activityID) \(key.timestamp) \(token)")
    }

    /// An activity reached `state` (ended, expired or dismissed).
    public static func activityEnded(_ key: ActivityKey, state: Activity.State, at time: UnixTime) -> FeedEvent {
        FeedEvent(appID: key.appID, kind: .activityEnded, time: time, activityID: key.activityID, activityState: state)
    }
}

/// An event as an app's feed keeps it: its place in the feed with it.
public struct FeedEntry: Hashable, Sendable {
    /// Increasing in commit order within the app, not dense.
    public var cursor: UInt64
    public var event: FeedEvent

    public init(cursor: UInt64, event: FeedEvent) {
        self.cursor = cursor
        self.event = event
    }
}

/// Records facts that no other state change carries (an app's dispatch held
/// or resumed, a channel deleted): their own transaction.
public struct RecordEvents: StoreMutation {
    public var events: [FeedEvent]

    public init(_ events: [FeedEvent]) { self.events = events }

    public var scope: MutationScope {
        guard let first = events.first?.appID, events.allSatisfy({ $0.appID == first }) else { return .allApps }
        return .app(first)
    }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Void> {
        MutationPlan(writes: events.map(StoreWrite.appendEvent), outcome: ())
    }
}
