import LiveRelayMessages

/// The Swift values of the event feed interop cases: Vectors/events.json and the case
/// Tests/Interop/interop.py generates (`generated_event_cases`), written out field by field.
extension InteropCases {
    static let eventToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

    static let events: [String: any LiveRelayMessage] = [
        "event_call_settled": Event(
            cursor: 17, kind: .callSettled, timeMS: 1_893_456_000_123, activityID: "match-1", callTimestamp: 1_893_456_000,
            idempotencyKey: "key-1 ✓",
            account: DeliverySummary(
                targeted: 3, delivered: 2, failed: 1, failures: [FailureCount(reason: "BadDeviceToken", count: 1)], pruned: 1,
                complete: true)),
        "event_push_failed": Event(
            cursor: 18, kind: .pushFailed, timeMS: 1_893_456_000_200, activityID: "match-1", callTimestamp: 1_893_456_000,
            token: eventToken, reason: "DeadlineExceeded"),
        "event_token_pruned": Event(
            cursor: 19, kind: .tokenPruned, timeMS: 1_893_456_000_300, token: eventToken, tokenKind: .pushToStart,
            reason: "Unregistered", invalidSinceMS: 1_893_455_000_000),
        "event_activity_ended": Event(
            cursor: 20, kind: .activityEnded, timeMS: 1_893_484_800_000, activityID: "match-1", activityState: .expired),
        "event_dispatch_held": Event(cursor: 21, kind: .dispatchHeld, timeMS: 1, reason: "MassPruneGuard"),
        "event_channel_deleted": Event(cursor: 22, kind: .channelDeleted, timeMS: 2, channelID: channelID),
        "event_every_field_extremes": Event(
            cursor: .max, kind: .dispatchResumed, timeMS: -1, activityID: "a", callTimestamp: .min, idempotencyKey: "k",
            account: DeliverySummary(downgraded: .max), token: "t", tokenKind: .update, reason: "r", invalidSinceMS: .max,
            activityState: .dismissed, channelID: channelID2),
        "event_unrecognized_enums": Event(
            cursor: 1, kind: .unrecognized(99), tokenKind: .unrecognized(7), activityState: .unrecognized(8)),
        "event_empty_account": Event(account: DeliverySummary()),
        "event_empty": Event(),
        "list_events_request_every_field": ListEventsRequest(appID: app, afterCursor: .max, maxEvents: 1000, waitMS: 60_000),
        "list_events_request_minimal": ListEventsRequest(appID: app),
        "list_events_request_with_unknown_fields": ListEventsRequest(appID: app, afterCursor: 300),
        "list_events_reply_every_field": ListEventsReply(
            events: [
                Event(
                    cursor: 17, kind: .callSettled, timeMS: 1_893_456_000_123, activityID: "match-1",
                    account: DeliverySummary(targeted: 1, delivered: 1, complete: true)),
                Event(),
                Event(cursor: 40, kind: .dispatchResumed, timeMS: 1_893_456_000_999),
            ],
            nextCursor: 40, more: true),
        "list_events_reply_unknown_in_repeated": ListEventsReply(events: [Event(cursor: 5)], nextCursor: 5),
        "list_events_reply_none_after_cursor": ListEventsReply(nextCursor: 1234),
        "list_events_reply_empty": ListEventsReply(),
    ]

    /// interop.py `generated_event_cases()`.
    static let eventsGenerated: [String: any LiveRelayMessage] = [
        "list_events_reply_1000_events": ListEventsReply(
            events: (0..<1000).map(settledEvent), nextCursor: UInt64(1000 + 3 * 999), more: true)
    ]

    /// interop.py: the i-th event of `list_events_reply_1000_events`.
    static func settledEvent(_ i: Int) -> Event {
        let failures: [FailureCount] = i % 2 == 1 ? [FailureCount(reason: "Unregistered", count: UInt32(i))] : []
        let account = DeliverySummary(targeted: UInt32(i), delivered: UInt32(i), failures: failures, complete: true)
        return Event(
            cursor: UInt64(1000 + 3 * i), kind: .callSettled, timeMS: 1_893_456_000_000 + Int64(i), activityID: "match-\(i)",
            callTimestamp: 1_893_456_000 + Int64(i), idempotencyKey: "key-\(i)-名前", account: account)
    }
}
