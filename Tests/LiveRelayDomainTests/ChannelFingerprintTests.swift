import LiveRelayDomain
import LiveRelayMessages
import Testing

/// The request fingerprints stored with idempotency keys, after broadcast
/// channels added fields: a request without them hashes as it did before
/// (a key stored by an older build still matches its resent request), and
/// each new field, once set, makes another request.
@Suite struct ChannelFingerprintTests {
    // Requests without any of the new fields.
    let start = StartActivityRequest(
        appID: "com.example.app", activityID: "order-1", attributesType: "DeliveryAttributes",
        attributesJSON: #"{"orderID":"A1"}"#, contentStateJSON: #"{"status":"placed"}"#,
        alert: Alert(title: "Placed", body: "Your order is in"), staleDate: 1_700_000_600, relevanceScore: 0.25,
        targets: Targets(externalUserIDs: ["user-a", "user-b"]))
    let update = UpdateActivityRequest(
        appID: "com.example.app", activityID: "order-1", contentStateJSON: #"{"status":"cooking"}"#, staleDate: 1_700_000_600,
        priority: .low)
    let end = EndActivityRequest(
        appID: "com.example.app", activityID: "order-1", contentStateJSON: #"{"status":"delivered"}"#,
        dismissalDate: 1_700_003_600, alert: Alert(body: "Delivered"))

    /// The values the encoding of the commit before channels (2152cc9) gives
    /// these requests, worked out from that encoding (FNV-1a 64 over the tagged fields) outside Swift.
    @Test func requestsWithoutTheNewFieldsHashAsBeforeChannels() {
        #expect(Fingerprint.of(start) == 0xee26_a33d_3ac1_ddad)
        #expect(Fingerprint.of(update) == 0x815b_c0ba_c29f_44cd)
        #expect(Fingerprint.of(end) == 0x2762_b4ea_2dd7_ceeb)
    }

    @Test func defaultsOfTheNewFieldsHashAsTheirAbsence() {
        var start = self.start
        start.inputPushToken = true
        start.strictPriorityBudget = true
        start.waitForDelivery = true
        #expect(Fingerprint.of(start) == Fingerprint.of(self.start))
        var update = self.update
        update.channelOnly = false
        update.strictPriorityBudget = false
        #expect(Fingerprint.of(update) == Fingerprint.of(self.update))
        var end = self.end
        end.channelOnly = false
        end.strictPriorityBudget = true
        #expect(Fingerprint.of(end) == Fingerprint.of(self.end))
    }

    @Test func eachNewFieldOnceSetMakesAnotherRequest() {
        var hashes: Set<UInt64> = [Fingerprint.of(start), Fingerprint.of(update), Fingerprint.of(end)]
        func distinct(_ hash: UInt64, _ what: String) {
            #expect(hashes.insert(hash).inserted, "\(what) hashes like another request")
        }
        var s = start
        s.channelID = "Y2gtMQ=="
        distinct(Fingerprint.of(s), "start + channel")
        s.channelID = "Y2gtMg=="
        distinct(Fingerprint.of(s), "start + another channel")
        s = start
        s.inputPushToken = false
        distinct(Fingerprint.of(s), "start without an update token")

        var u = update
        u.channelID = "Y2gtMQ=="
        distinct(Fingerprint.of(u), "update + channel")
        u.channelOnly = true
        distinct(Fingerprint.of(u), "update to the channel only")

        var e = end
        e.staleDate = 1_700_000_900
        distinct(Fingerprint.of(e), "end + stale date")
        e = end
        e.relevanceScore = 0.5
        distinct(Fingerprint.of(e), "end + relevance score")
        e.staleDate = 1_700_000_900
        distinct(Fingerprint.of(e), "end + both")
        e = end
        e.channelID = "Y2gtMQ=="
        distinct(Fingerprint.of(e), "end + channel")
        e.channelOnly = true
        distinct(Fingerprint.of(e), "end to the channel only")
    }
}
