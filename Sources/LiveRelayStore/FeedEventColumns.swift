import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet

/// How the SQL stores keep an event of the feed: its app, cursor, time and
/// de-duplication key in columns of their own, the rest as one text column of
/// small JSON, shared by SQLite and PostgreSQL so that both read what either wrote.
extension FeedEvent {
    /// `{"kind":N, ...}` with only the fields the event has.
    public var bodyJSON: String {
        var w = JSONWriter()
        w.raw("{\"kind\":")
        w.integer(Int64(kind.rawValue))
        func field(_ name: String, _ value: String?) {
            guard let value else { return }
            w.raw(",")
            w.string(name)
            w.raw(":")
            w.string(value)
        }
        func field(_ name: String, _ value: Int64?) {
            guard let value else { return }
            w.raw(",")
            w.string(name)
            w.raw(":")
            w.integer(value)
        }
        field("activity", activityID)
        field("call", callTimestamp)
        field("key", idempotencyKey)
        if let account {
            w.raw(",\"account\":")
            w.raw(StoredReply.accountJSON(account))
        }
        field("token", token)
        field("tokenKind", tokenKind?.rawValue)
        field("reason", reason)
        field("invalidSince", invalidSince?.milliseconds)
        field("state", activityState?.rawValue)
        field("channel", channelID)
        w.raw("}")
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// Reads an event back from its columns; nil for a row this build cannot read (a corrupt row, or a kind
    /// a newer build wrote), which a reader skips rather than fail the whole page.
    public init?(appID: String, time: UnixTime, dedupeKey: String?, bodyJSON: String) {
        guard let json = try? JSONValue.parse(Array(bodyJSON.utf8)),
            let rawKind = json["kind"]?.integerValue, let kind = Kind(rawValue: Int(rawKind))
        else { return nil }
        var account: EnqueueResult?
        if let value = json["account"] {
            guard let parsed = StoredReply.account(parsed: value) else { return nil }
            account = parsed
        }
        self.init(
            appID: appID, kind: kind, time: time, activityID: json["activity"]?.stringValue,
            callTimestamp: json["call"]?.integerValue, idempotencyKey: json["key"]?.stringValue, account: account,
            token: json["token"]?.stringValue,
            tokenKind: json["tokenKind"]?.stringValue.flatMap(Token.Kind.init(rawValue:)), reason: json["reason"]?.stringValue,
            invalidSince: json["invalidSince"]?.integerValue.map(UnixTime.init(milliseconds:)),
            activityState: json["state"]?.stringValue.flatMap(Activity.State.init(rawValue:)), channelID: json["channel"]?.stringValue,
            dedupeKey: dedupeKey)
    }
}
