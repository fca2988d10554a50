import LiveRelayMessages

/// The Swift value every interop case must decode to, written out field by field so that
/// a wrong field mapping (a swapped number, a lost presence bit) fails. The names and the
/// values match Vectors/cases.json and the generated cases in Tests/Interop/interop.py; the
/// admin API's are in AdminInteropCases.swift (Vectors/admin.json), the broadcast channels'
/// in ChannelInteropCases.swift (Vectors/channels.json), the event feed's in
/// EventInteropCases.swift (Vectors/events.json).
enum InteropCases {
    static let app = "com.example.scores"
    static let token16 = "0123456789abcdef"
    static let token64 = String(repeating: token16, count: 4)

    /// interop.py `token(i)`: 16 hex digits of i, four times.
    static func token(_ i: Int) -> String {
        let digits = String(i, radix: 16)
        return String(repeating: String(repeating: "0", count: 16 - digits.count) + digits, count: 4)
    }

    /// interop.py `large_text(n)`.
    static func largeText(_ n: Int) -> String { String(repeating: "aé漢🚀", count: n) }

    static let names: [String] = expected.keys.sorted()

    static let expected: [String: any LiveRelayMessage] =
        registerToken
        .merging(activityRequests) { a, _ in a }
        .merging(replies) { a, _ in a }
        .merging(parts) { a, _ in a }
        .merging(generated) { a, _ in a }
        .merging(adminApps) { a, _ in a }
        .merging(adminCredentialsAndKeys) { a, _ in a }
        .merging(adminWebhooks) { a, _ in a }
        .merging(adminGenerated) { a, _ in a }
        .merging(channels) { a, _ in a }
        .merging(channelsGenerated) { a, _ in a }
        .merging(events) { a, _ in a }
        .merging(eventsGenerated) { a, _ in a }

    static let registerToken: [String: any LiveRelayMessage] = [
        "register_push_to_start_every_field": RegisterTokenRequest(
            appID: app, kind: .pushToStart, token: token64, environment: .production,
            attributesType: "MatchAttributes", activityID: "match-東京-🚀", externalUserID: "user-名前-🚀",
            deviceID: "device-e\u{301}-Ωmega", expiresAt: .max, remove: true),
        "register_update_minimal": RegisterTokenRequest(
            appID: "a", kind: .update, token: "deadbeefdeadbeef", environment: .sandbox, activityID: "1"),
        "register_longest_token": RegisterTokenRequest(
            appID: app, kind: .update, token: String(repeating: "00112233445566778899aabbccddeeff", count: 16),
            environment: .sandbox, activityID: "a"),
        "register_with_unknown_fields": RegisterTokenRequest(
            appID: app, kind: .update, token: "deadbeefdeadbeef", environment: .sandbox, activityID: "match-7"),
        "register_reply_rotated": RegisterTokenReply(result: .rotated, replacedToken: "0011223344556677"),
        "register_reply_empty": RegisterTokenReply(),
        "register_reply_unrecognized_enum": RegisterTokenReply(result: .unrecognized(42)),
    ]

    static let activityRequests: [String: any LiveRelayMessage] = [
        "start_every_field": StartActivityRequest(
            appID: app, activityID: "match-🚀-1", attributesType: "MatchAttributes",
            attributesJSON: #"{"home":"東京","away":"Zürich 🏟"}"#,
            contentStateJSON: "{\"score\":[1,2],\"note\":\"e\u{301} 한국어\"}",
            alert: Alert(title: "Goal ⚽️", body: "東京 1–2 Zürich", sound: "default"),
            staleDate: 1_893_456_000, dismissalDate: 1_893_459_600, relevanceScore: 0.75, priority: .high,
            targets: Targets(
                pushToStartTokens: [token16, "fedcba9876543210fedcba9876543210"],
                externalUserIDs: ["user-1", "ユーザー-2", "👩‍👩‍👧"], allDevices: true),
            idempotencyKey: "key-ü-1", waitForDelivery: true),
        "start_present_zero": StartActivityRequest(
            appID: app, activityID: "match-2", attributesType: "MatchAttributes", attributesJSON: "{}",
            contentStateJSON: "{}", alert: Alert(), staleDate: 0, dismissalDate: 0, relevanceScore: 0,
            priority: .unspecified, targets: Targets(pushToStartTokens: [token16], allDevices: false),
            idempotencyKey: "", waitForDelivery: false),
        "start_minimal": StartActivityRequest(
            appID: app, activityID: "match-3", attributesType: "MatchAttributes", attributesJSON: "{}",
            contentStateJSON: "{}", targets: Targets(allDevices: true)),
        "start_nested_unknown_fields": StartActivityRequest(
            appID: app, activityID: "match-4", attributesType: "MatchAttributes", attributesJSON: "{}",
            contentStateJSON: #"{"a":1}"#, alert: Alert(title: "t"), targets: Targets(externalUserIDs: ["u"])),
        "update_every_field": UpdateActivityRequest(
            appID: app, activityID: "match-🚀-1", contentStateJSON: #"{"score":[2,2],"scorer":"Åsa Øberg"}"#,
            alert: Alert(title: "Equaliser", body: "中文 العربية עברית", sound: "whistle.caf"),
            staleDate: 1_893_456_100, dismissalDate: 1_893_459_700, relevanceScore: -1.5, priority: .low,
            endActivity: true, idempotencyKey: "key-2", waitForDelivery: true),
        "update_present_zero": UpdateActivityRequest(
            appID: app, activityID: "match-2", contentStateJSON: "{}", alert: Alert(title: "", body: "", sound: ""),
            staleDate: 0, dismissalDate: 0, relevanceScore: 0, priority: .unspecified, endActivity: false,
            idempotencyKey: "", waitForDelivery: false),
        "update_minimal": UpdateActivityRequest(appID: app, activityID: "match-3", contentStateJSON: #"{"s":0}"#),
        "end_every_field": EndActivityRequest(
            appID: app, activityID: "match-🚀-1", contentStateJSON: #"{"final":true,"score":[3,2]}"#,
            dismissalDate: 1_893_463_200, idempotencyKey: "key-3", waitForDelivery: true,
            alert: Alert(title: "Full time", body: "3–2 🎉", sound: "default"), priority: .high),
        "end_present_zero": EndActivityRequest(
            appID: app, activityID: "match-2", dismissalDate: 0, idempotencyKey: "", waitForDelivery: false,
            alert: Alert(), priority: .unspecified),
        "end_minimal": EndActivityRequest(appID: app, activityID: "match-3"),
        "ping_empty": PingRequest(),
        "ping_payload": PingRequest(payload: [0x00, 0x01, 0x02, 0xFF, 0x80, 0x80, 0x7F, 0xFE]),
    ]

    static let fullSummary = DeliverySummary(
        targeted: .max, queued: 1, delivered: 2, failed: 3,
        failures: [FailureCount(reason: "BadDeviceToken", count: 2), FailureCount(), FailureCount(reason: "QueueFull", count: 1)],
        pruned: 4, superseded: 5, expired: 6,
        unresolved: [
            UnresolvedTarget(kind: .pushToStartToken, value: token16, reason: "no push-to-start token registered"),
            UnresolvedTarget(kind: .externalUserID, value: "ユーザー", reason: "unknown user"),
            UnresolvedTarget(kind: .allDevices),
        ],
        complete: true)

    static let replies: [String: any LiveRelayMessage] = [
        "ping_reply_every_field": PingReply(
            payload: [0x00, 0x01, 0x02, 0xFF], serverTimeMS: -1_234_567_890_123,
            serverVersion: "liverelay 1.0 — ✓ 版本"),
        "ping_reply_empty": PingReply(),
        "start_reply_every_field": StartActivityReply(
            activityID: "match-🚀-1", timestamp: -62_135_596_800,
            summary: fullSummary, replayed: true, state: .active),
        "start_reply_empty_summary": StartActivityReply(activityID: "match-2", summary: DeliverySummary()),
        "start_reply_empty": StartActivityReply(),
        "update_reply_every_field": UpdateActivityReply(
            timestamp: 1_893_456_100,
            summary: DeliverySummary(
                targeted: 2, delivered: 1, failed: 1,
                failures: [FailureCount(reason: "Unregistered", count: 1)], complete: true),
            replayed: true, state: .starting),
        "update_reply_unknown_in_repeated": UpdateActivityReply(
            timestamp: 1, summary: DeliverySummary(failures: [FailureCount(reason: "TooManyRequests", count: 9)])),
        "update_reply_empty": UpdateActivityReply(),
        "end_reply_every_field": EndActivityReply(
            timestamp: .min,
            summary: DeliverySummary(
                targeted: 1, queued: 1,
                unresolved: [
                    UnresolvedTarget(kind: .unrecognized(9), value: "v", reason: "kind from a newer server")
                ]),
            replayed: true, state: .dismissed),
        "end_reply_unrecognized_state": EndActivityReply(timestamp: 1, state: .unrecognized(77)),
    ]

    static let parts: [String: any LiveRelayMessage] = [
        "summary_every_field": DeliverySummary(
            targeted: 10, queued: 0, delivered: 7, failed: 1, failures: [FailureCount(reason: "BadDeviceToken", count: 1)],
            pruned: 1, superseded: 1, expired: 1,
            unresolved: [UnresolvedTarget(kind: .externalUserID, value: "user-9", reason: "no push-to-start token registered")],
            complete: true),
        "summary_empty": DeliverySummary(),
        "failure_count_every_field": FailureCount(reason: "DeviceTokenNotForTopic", count: 123_456),
        "failure_count_empty": FailureCount(),
        "unresolved_every_field": UnresolvedTarget(kind: .pushToStartToken, value: token16, reason: "expired ⌛"),
        "unresolved_empty": UnresolvedTarget(),
        "alert_every_field": Alert(title: "Ti\u{301}tulo 🇯🇵", body: "本文 — 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", sound: "chime.caf"),
        "alert_present_empty_strings": Alert(title: "", body: "", sound: ""),
        "alert_empty": Alert(),
        "targets_every_field": Targets(pushToStartTokens: [token16], externalUserIDs: ["u1", "用户2"], allDevices: true),
        "targets_all_devices_false": Targets(allDevices: false),
        "targets_empty": Targets(),
        "error_details_every_field": ErrorDetails(
            fieldViolations: [
                FieldViolation(field: "targets.push_to_start_tokens[3]", description: "not lowercase hex"),
                FieldViolation(field: "alert.title", description: "1025 bytes, at most 1024 allowed"),
                FieldViolation(),
            ],
            retryAfterMS: 1500, reason: "QueueFull"),
        "error_details_empty": ErrorDetails(),
        "field_violation_every_field": FieldViolation(field: "external_user_ids[0]", description: "trop long — 長すぎる"),
        "field_violation_empty": FieldViolation(),
    ]

    /// interop.py `generated_cases()`.
    static let generated: [String: any LiveRelayMessage] = [
        "start_1000_tokens": StartActivityRequest(
            appID: "com.example.app", activityID: "match-1000", attributesType: "MatchAttributes",
            attributesJSON: "{}", contentStateJSON: "{}",
            targets: Targets(pushToStartTokens: (0..<1000).map(token))),
        "start_1000_user_ids": StartActivityRequest(
            appID: "com.example.app", activityID: "match-users", attributesType: "MatchAttributes",
            attributesJSON: "{}", contentStateJSON: "{}",
            targets: Targets(externalUserIDs: (0..<1000).map { "user-\($0)-名前" })),
        "ping_every_byte_value": PingRequest(payload: Array(repeating: Array(0...255), count: 48).flatMap { $0 }),
        "error_details_large": ErrorDetails(
            fieldViolations: (0..<1000).map {
                FieldViolation(field: "targets.push_to_start_tokens[\($0)]", description: "not lowercase hex")
            },
            reason: largeText(4000)),
    ]

    /// Field by field, what differs between two values of one message type.
    static func differences(_ expected: any LiveRelayMessage, _ actual: any LiveRelayMessage) -> [String] {
        if isEqual(expected, actual) { return [] }
        guard type(of: expected) == type(of: actual) else {
            return ["decoded a \(type(of: actual)), expected a \(type(of: expected))"]
        }
        var out: [String] = []
        for (e, a) in zip(Mirror(reflecting: expected).children, Mirror(reflecting: actual).children) {
            let es = String(describing: e.value), as_ = String(describing: a.value)
            if es != as_ { out.append("\(e.label ?? "?"): expected \(es.prefix(300)), got \(as_.prefix(300))") }
        }
        return out.isEmpty ? ["values differ"] : out
    }

    private static func isEqual<M: LiveRelayMessage>(_ expected: M, _ actual: any LiveRelayMessage) -> Bool {
        (actual as? M) == expected
    }
}
