import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayWebhookDelivery
import Testing

/// The body a receiver parses: every event with its id, its kind's name and the
/// fields its kind fills, and the retention gap when there is one.
@Suite("WebhookPayload")
struct WebhookPayloadTests {
    static let app = "com.example.app"

    static func parse(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func eachEventCarriesItsIDKindAndTheFieldsItsKindFills() throws {
        let key = IntentKey(appID: Self.app, activityID: "order-7", timestamp: 1_700_000_000)
        let time = UnixTime(milliseconds: 1_700_000_000_123)
        let settled = FeedEvent.callSettled(
            key, account: EnqueueResult(delivered: 3, pruned: 1, failures: ["Unregistered": 2]), idempotencyKey: "k-1", at: time)
        let pruned = FeedEvent(
            appID: Self.app, kind: .tokenPruned, time: time, token: String(repeating: "ab", count: 32), tokenKind: .update,
            reason: "Unregistered", invalidSince: UnixTime(milliseconds: 1_699_999_000_000))
        let deleted = FeedEvent(appID: Self.app, kind: .channelDeleted, time: time, channelID: "ch\"1")
        let batch = WebhookSchedule.Batch(
            entries: [FeedEntry(cursor: 11, event: settled), FeedEntry(cursor: 12, event: pruned), FeedEntry(cursor: 15, event: deleted)],
            through: 16, missedThrough: nil)
        let body = try Self.parse(WebhookPayload.body(appID: Self.app, batch: batch))
        #expect(body["app_id"] as? String == Self.app)
        #expect(body["missed_through_cursor"] == nil)
        let events = try #require(body["events"] as? [[String: Any]])
        #expect(events.map { $0["id"] as? String } == ["\(Self.app):11", "\(Self.app):12", "\(Self.app):15"])
        #expect(
            events.map { $0["kind"] as? String } == ["EVENT_KIND_CALL_SETTLED", "EVENT_KIND_TOKEN_PRUNED", "EVENT_KIND_CHANNEL_DELETED"])
        #expect(events.allSatisfy { $0["time_ms"] as? Int64 == time.milliseconds })

        let call = events[0]
        #expect(call["activity_id"] as? String == "order-7")
        #expect(call["call_timestamp"] as? Int == 1_700_000_000)
        #expect(call["idempotency_key"] as? String == "k-1")
        let account = try #require(call["account"] as? [String: Any])
        #expect(account["targeted"] as? Int == 6)
        #expect(account["delivered"] as? Int == 3)
        #expect(account["pruned"] as? Int == 1)
        #expect(account["failed"] as? Int == 2)
        #expect((account["failures"] as? [[String: Any]])?.first?["reason"] as? String == "Unregistered")
        #expect(call["token"] == nil, "only the fields the kind fills")

        #expect(events[1]["token_kind"] as? String == "TOKEN_KIND_UPDATE")
        #expect(events[1]["invalid_since_ms"] as? Int64 == 1_699_999_000_000)
        #expect(events[1]["reason"] as? String == "Unregistered")
        #expect(events[2]["channel_id"] as? String == "ch\"1", "strings are escaped")
    }

    @Test func aRetentionGapIsInTheBody() throws {
        let batch = WebhookSchedule.Batch(entries: [], through: 40, missedThrough: 39)
        let body = try Self.parse(WebhookPayload.body(appID: Self.app, batch: batch))
        #expect(body["missed_through_cursor"] as? Int == 39)
        #expect((body["events"] as? [Any])?.isEmpty == true)
    }

    @Test func kindNamesAreTheProtocolsAndTheAdminAPIsList() {
        #expect(FeedEvent.Kind.allCases.map(\.protoName) == Admin.Webhook.eventKindNames)
        for kind in FeedEvent.Kind.allCases { #expect(FeedEvent.Kind(protoName: kind.protoName) == kind) }
        #expect(FeedEvent.Kind(protoName: "EVENT_KIND_UNSPECIFIED") == nil)
    }
}
