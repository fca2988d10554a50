import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import Testing

@Suite struct PayloadBuilderTests {
    let fullContent = LiveActivityContent(
        contentStateJSON: #"{"status":"cooking","eta":12.50}"#,
        alert: Alert(title: "Order", body: #"Cooking "now""#, sound: "default"),
        staleDate: 1_700_003_600, dismissalDate: 1_700_007_200, relevanceScore: 0.5)

    @Test func startPayloadHasExactBytesAndAsksForAnUpdateToken() throws {
        let payload = try APNsPayloadBuilder.start(
            timestamp: 1_700_000_000, attributesType: "DeliveryAttributes", attributesJSON: #"{"orderID": "A1"}"#,
            content: fullContent)
        #expect(
            payload.text
                == #"{"aps":{"timestamp":1700000000,"event":"start","content-state":{"status":"cooking","eta":12.50},"attributes-type":"DeliveryAttributes","attributes":{"orderID": "A1"},"input-push-token":1,"alert":{"title":"Order","body":"Cooking \"now\"","sound":"default"},"stale-date":1700003600,"dismissal-date":1700007200,"relevance-score":0.5}}"#
        )

        let root = try #require(JSONSerialization.jsonObject(with: Data(payload.bytes)) as? [String: Any])
        let aps = try #require(root["aps"] as? [String: Any])
        #expect(aps["event"] as? String == "start")
        #expect(aps["input-push-token"] as? Int == 1)
        #expect(aps["attributes-type"] as? String == "DeliveryAttributes")
        #expect((aps["content-state"] as? [String: Any])?["status"] as? String == "cooking")
        #expect((aps["alert"] as? [String: Any])?["body"] as? String == #"Cooking "now""#)
    }

    @Test func updatePayloadCarriesOnlyWhatWasGiven() throws {
        let payload = try APNsPayloadBuilder.update(
            timestamp: 1_700_000_001, content: LiveActivityContent(contentStateJSON: #"{"a":1}"#))
        #expect(payload.text == #"{"aps":{"timestamp":1700000001,"event":"update","content-state":{"a":1}}}"#)
    }

    @Test func endPayloadCarriesTheDismissalDate() throws {
        let payload = try APNsPayloadBuilder.end(
            timestamp: 1_700_000_002,
            content: LiveActivityContent(contentStateJSON: #"{"a":2}"#, dismissalDate: 0))
        #expect(payload.text == #"{"aps":{"timestamp":1700000002,"event":"end","content-state":{"a":2},"dismissal-date":0}}"#)
    }

    @Test func callerJSONIsSplicedByteForByte() throws {
        // Whitespace, key order, number spellings and escapes are the app's business.
        let state = "{ \"z\" : 1.0e3,\n \"a\":[true,null], \"s\":\"\\u00e9\\n\" }"
        let payload = try APNsPayloadBuilder.update(timestamp: 1, content: LiveActivityContent(contentStateJSON: state))
        let prefix = Array(#"{"aps":{"timestamp":1,"event":"update","content-state":"#.utf8)
        #expect(Array(payload.bytes.prefix(prefix.count)) == prefix)
        #expect(Array(payload.bytes.dropFirst(prefix.count).dropLast(2)) == Array(state.utf8))
        _ = try JSONSerialization.jsonObject(with: Data(payload.bytes))
    }

    @Test func stringsAreEscaped() throws {
        let title = "q\" b\\ n\n r\r t\t \u{01} \u{1F} é 🚚 /"
        let payload = try APNsPayloadBuilder.update(
            timestamp: 1, content: LiveActivityContent(alert: Alert(title: title)))
        #expect(payload.text == #"{"aps":{"timestamp":1,"event":"update","alert":{"title":"q\" b\\ n\n r\r t\t \u0001 \u001f é 🚚 /"}}}"#)
        let root = try #require(JSONSerialization.jsonObject(with: Data(payload.bytes)) as? [String: Any])
        let alert = try #require((root["aps"] as? [String: Any])?["alert"] as? [String: Any])
        #expect(alert["title"] as? String == title)
    }

    @Test func emptyAlertFieldsAreLeftOut() throws {
        let none = try APNsPayloadBuilder.update(timestamp: 1, content: LiveActivityContent(alert: Alert(title: "", body: nil)))
        #expect(none.text == #"{"aps":{"timestamp":1,"event":"update"}}"#)
        let body = try APNsPayloadBuilder.update(timestamp: 1, content: LiveActivityContent(alert: Alert(body: "b")))
        #expect(body.text == #"{"aps":{"timestamp":1,"event":"update","alert":{"body":"b"}}}"#)
    }

    @Test func relevanceScoresAreJSONNumbers() throws {
        for (score, text) in [(100.0, "100.0"), (0.0, "0.0"), (1e-7, "1e-07"), (-2.25, "-2.25")] {
            let payload = try APNsPayloadBuilder.update(timestamp: 1, content: LiveActivityContent(relevanceScore: score))
            #expect(payload.text == #"{"aps":{"timestamp":1,"event":"update","relevance-score":"# + text + "}}")
            let root = try #require(JSONSerialization.jsonObject(with: Data(payload.bytes)) as? [String: Any])
            #expect((root["aps"] as? [String: Any])?["relevance-score"] as? Double == score)
        }
    }

    @Test func theLimitIs4096BytesOfTheWholeBody() throws {
        func payload(padding n: Int) throws(DomainError) -> APNsPayload {
            try APNsPayloadBuilder.update(
                timestamp: 1_700_000_000,
                content: LiveActivityContent(contentStateJSON: #"{"p":""# + String(repeating: "x", count: n) + #""}"#))
        }
        let base = try payload(padding: 0).count
        let fits = try payload(padding: 4096 - base)
        #expect(fits.count == 4096)
        #expect(throws: DomainError.payloadTooLarge(size: 4097, limit: 4096)) { try payload(padding: 4097 - base) }
    }

    @Test func theSizeErrorNamesTheSize() {
        let error = DomainError.payloadTooLarge(size: 4213, limit: 4096)
        #expect(error.message == "payload is 4,213 bytes; APNs allows 4,096")
        #expect(error.code == .invalidArgument)
        #expect(DomainError.payloadTooLarge(size: 1_234_567, limit: 4096).message.hasPrefix("payload is 1,234,567 bytes"))
    }

    @Test func headersForALiveActivityPush() {
        let high = APNsHeaders(bundleID: "com.example.app", priority: Priority?.none.apnsPriority, expiration: 1_700_028_800)
        #expect(
            high.fields.map { "\($0.name): \($0.value)" } == [
                "apns-push-type: liveactivity", "apns-topic: com.example.app.push-type.liveactivity",
                "apns-priority: 10", "apns-expiration: 1700028800",
            ])
        #expect(APNsHeaders(bundleID: "b", priority: Priority?.some(.unspecified).apnsPriority, expiration: 0).priority == 10)
        #expect(APNsHeaders(bundleID: "b", priority: Priority?.some(.high).apnsPriority, expiration: 0).priority == 10)
        #expect(APNsHeaders(bundleID: "b", priority: Priority?.some(.low).apnsPriority, expiration: 0).priority == 5)
    }
}
