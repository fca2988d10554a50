import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages

/// The body of one delivery (docs/PROTOCOL.md, "Webhooks"):
///
/// ```json
/// {"app_id":"com.example.app","events":[{"id":"com.example.app:41","cursor":41,"kind":"EVENT_KIND_PUSH_FAILED",...}],
///  "missed_through_cursor":17}
/// ```
///
/// Each event has the fields of ListEvents' `Event` that its kind fills, by
/// their proto names (`liverelay events tail` prints the same objects), and an `id`,
/// `<app_id>:<cursor>`, the same in every delivery of it: a receiver drops an
/// id it has seen. `missed_through_cursor` is there only when the feed's
/// retention deleted events before they were delivered.
public enum WebhookPayload {
    public static func body(appID: String, batch: WebhookSchedule.Batch) -> [UInt8] {
        var writer = JSONWriter()
        writer.raw(#"{"app_id":"#)
        writer.string(appID)
        writer.raw(#","events":["#)
        for (i, entry) in batch.entries.enumerated() {
            if i > 0 { writer.raw(",") }
            write(ActivityService.event(entry), appID: appID, into: &writer)
        }
        writer.raw("]")
        if let missed = batch.missedThrough {
            writer.raw(#","missed_through_cursor":"#)
            writer.integer(Int64(clamping: missed))
        }
        writer.raw("}")
        return writer.bytes
    }

    /// One event as a JSON object: what a delivery's `events` hold and `liverelay events tail` prints.
    public static func json(_ event: Event, appID: String) -> String {
        var writer = JSONWriter()
        write(event, appID: appID, into: &writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func write(_ event: Event, appID: String, into w: inout JSONWriter) {
        w.raw(#"{"id":"#)
        w.string("\(appID):\(event.cursor)")
        w.raw(#","cursor":"#)
        w.integer(Int64(clamping: event.cursor))
        w.raw(#","kind":"#)
        w.string(FeedEvent.Kind(rawValue: Int(event.kind.rawValue))?.protoName ?? "\(event.kind.rawValue)")
        w.raw(#","time_ms":"#)
        w.integer(event.timeMS)
        func field(_ name: String, _ value: String) {
            guard !value.isEmpty else { return }
            w.raw(",")
            w.string(name)
            w.raw(":")
            w.string(value)
        }
        func field(_ name: String, _ value: Int64) {
            guard value != 0 else { return }
            w.raw(",")
            w.string(name)
            w.raw(":")
            w.integer(value)
        }
        field("activity_id", event.activityID)
        field("call_timestamp", event.callTimestamp)
        field("idempotency_key", event.idempotencyKey)
        if let account = event.account { write(account, into: &w) }
        field("token", event.token)
        switch event.tokenKind {
        case .update: field("token_kind", "TOKEN_KIND_UPDATE")
        case .pushToStart: field("token_kind", "TOKEN_KIND_PUSH_TO_START")
        default: break
        }
        field("reason", event.reason)
        field("invalid_since_ms", event.invalidSinceMS)
        switch event.activityState {
        case .ended: field("activity_state", "ACTIVITY_STATE_ENDED")
        case .expired: field("activity_state", "ACTIVITY_STATE_EXPIRED")
        case .dismissed: field("activity_state", "ACTIVITY_STATE_DISMISSED")
        default: break
        }
        field("channel_id", event.channelID)
        w.raw("}")
    }

    /// A settled call's account: its counts by outcome and its failures by reason.
    static func write(_ account: DeliverySummary, into w: inout JSONWriter) {
        w.raw(#","account":{"targeted":"#)
        w.integer(Int64(account.targeted))
        for (name, value) in [
            ("delivered", account.delivered), ("failed", account.failed), ("pruned", account.pruned),
            ("superseded", account.superseded), ("expired", account.expired), ("downgraded", account.downgraded),
        ] {
            w.raw(",")
            w.string(name)
            w.raw(":")
            w.integer(Int64(value))
        }
        w.raw(#","failures":["#)
        for (i, failure) in account.failures.enumerated() {
            if i > 0 { w.raw(",") }
            w.raw(#"{"reason":"#)
            w.string(failure.reason)
            w.raw(#","count":"#)
            w.integer(Int64(failure.count))
            w.raw("}")
        }
        w.raw("]}")
    }
}
