import LiveRelayAPNs

/// An app's webhook as the registry keeps it: the HTTPS endpoint its event
/// feed is delivered to, the kinds delivered, and the key that signs each
/// delivery.
///
/// The signing secret is kept (unlike an API key's, of which only a hash is):
/// every delivery is signed with it, on whichever node delivers. It is shown
/// once, in the reply that minted it; ``description``, ``debugDescription``
/// and the mirror leave it out, and audit rows never carry it.
public struct RegisteredWebhook: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `https://host[:port]/path[?query]` (``RegistryValidation`` checks it).
    public var url: String
    /// The kinds delivered; empty: every kind.
    public var eventKinds: Set<FeedEvent.Kind>
    /// The HMAC-SHA256 key: `whsec_` and 64 lowercase hex digits.
    public var secret: String
    /// When the webhook was set: what tells its progress from that of a webhook deleted before it
    /// (``WebhookProgress/webhookCreatedAt``).
    public var createdAt: UnixTime
    public var updatedAt: UnixTime
    /// The feed's last cursor when the webhook was set: its deliveries are the events after it.
    /// A cursor, not a time, so events committed by a node whose clock is behind are never skipped;
    /// kept when the webhook is changed.
    public var startCursor: UInt64

    public init(
        url: String, eventKinds: Set<FeedEvent.Kind> = [], secret: String, createdAt: UnixTime = UnixTime(milliseconds: 0),
        updatedAt: UnixTime = UnixTime(milliseconds: 0), startCursor: UInt64 = 0
    ) {
        self.url = url
        self.eventKinds = eventKinds
        self.secret = secret
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.startCursor = startCursor
    }

    /// Whether events of `kind` are delivered.
    public func delivers(_ kind: FeedEvent.Kind) -> Bool { eventKinds.isEmpty || eventKinds.contains(kind) }

    /// The kinds in their order on the wire (``FeedEvent/Kind`` raw values).
    public var sortedKinds: [FeedEvent.Kind] { eventKinds.sorted { $0.rawValue < $1.rawValue } }

    public var description: String {
        "RegisteredWebhook(url: \(url), eventKinds: \(sortedKinds.map(\.rawValue)), createdAt: \(createdAt), updatedAt: \(updatedAt), "
            + "startCursor: \(startCursor))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "url": url, "eventKinds": sortedKinds.map(\.rawValue), "createdAt": createdAt, "updatedAt": updatedAt,
                "startCursor": startCursor,
            ], displayStyle: .struct)
    }
}

/// How an app's webhook deliveries stand: the feed's cursor the endpoint
/// acknowledged, and the current run of failed attempts. One node at a time
/// owns an app's progress (a lease in the store), so deliveries stay in order
/// when several nodes share a PostgreSQL registry.
public struct WebhookProgress: Hashable, Sendable {
    public var appID: String
    /// The webhook this progress belongs to (its ``RegisteredWebhook/createdAt``):
    /// a webhook deleted and set again starts afresh, not from the old one's cursor.
    public var webhookCreatedAt: UnixTime
    /// The last cursor of the feed the endpoint acknowledged with a 2xx answer (or skipped: another
    /// kind); the webhook's ``RegisteredWebhook/startCursor`` before its first delivery.
    public var deliveredCursor: UInt64
    public var lastSuccessAt: UnixTime?
    /// Why the last attempt failed; nil after a success.
    public var lastError: String?
    /// When the current run of failed attempts began; nil after a success.
    public var failingSince: UnixTime?
    /// Failed attempts in a row.
    public var attempts: Int
    /// Retried past the retry window: held, probed now and then.
    public var failing: Bool
    /// Counts ResetWebhook calls: a node that saves progress read before a
    /// reset is refused, so the reset is never overwritten by a stale failure.
    public var resets: Int64

    public init(
        appID: String, webhookCreatedAt: UnixTime, deliveredCursor: UInt64 = 0, lastSuccessAt: UnixTime? = nil,
        lastError: String? = nil, failingSince: UnixTime? = nil, attempts: Int = 0, failing: Bool = false, resets: Int64 = 0
    ) {
        self.appID = appID
        self.webhookCreatedAt = webhookCreatedAt
        self.deliveredCursor = deliveredCursor
        self.lastSuccessAt = lastSuccessAt
        self.lastError = lastError
        self.failingSince = failingSince
        self.attempts = attempts
        self.failing = failing
        self.resets = resets
    }

    /// The progress of a webhook nothing was delivered for yet: from its ``RegisteredWebhook/startCursor``
    /// on (`resets` carried over from the row it replaces, so a reset is not undone).
    public static func fresh(for webhook: RegisteredWebhook, appID: String, resets: Int64 = 0) -> WebhookProgress {
        WebhookProgress(appID: appID, webhookCreatedAt: webhook.createdAt, deliveredCursor: webhook.startCursor, resets: resets)
    }

    /// The state the admin API shows (admin.proto, `Webhook.state`).
    public var state: String { failing ? "failing" : attempts > 0 ? "retrying" : "delivering" }

    /// The progress after ResetWebhook: the run of failures forgotten, the cursor kept.
    public func reset() -> WebhookProgress {
        var next = self
        next.attempts = 0
        next.failing = false
        next.failingSince = nil
        next.resets += 1
        return next
    }
}
