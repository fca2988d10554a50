import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import Testing

/// Broadcast channels in the domain: the start payload's channel fields, the
/// broadcast payload limit, and how an intent keeps a channel target.
@Suite struct ChannelPayloadAndIntentTests {
    let channelID = "dGVzdC1jaGFubmVsLTAwMQ=="

    @Test func aStartNamesItsChannelWithOrWithoutAnUpdateToken() throws {
        let content = LiveActivityContent(contentStateJSON: #"{"s":1}"#)
        let both = try APNsPayloadBuilder.start(
            timestamp: 1_700_000_000, attributesType: "Game", attributesJSON: "{}", content: content, channelID: channelID)
        #expect(
            both.text
                == #"{"aps":{"timestamp":1700000000,"event":"start","content-state":{"s":1},"attributes-type":"Game","attributes":{},"input-push-token":1,"input-push-channel":"dGVzdC1jaGFubmVsLTAwMQ=="}}"#
        )
        let channelOnly = try APNsPayloadBuilder.start(
            timestamp: 1_700_000_000, attributesType: "Game", attributesJSON: "{}", content: content, inputPushToken: false,
            channelID: channelID)
        #expect(!channelOnly.text.contains("input-push-token"))
        #expect(channelOnly.text.contains(#""input-push-channel":"dGVzdC1jaGFubmVsLTAwMQ==""#))
    }

    @Test func aBroadcastPayloadMayReach5KBButATokenPayloadNot() throws {
        let padding = String(repeating: "x", count: 4500)
        let content = LiveActivityContent(contentStateJSON: #"{"p":""# + padding + #""}"#)
        let broadcast = try APNsPayloadBuilder.update(
            timestamp: 1_700_000_000, content: content, limit: APNsBroadcast.maxPayloadBytes)
        #expect(broadcast.count > APNsPayload.maxBytes)
        #expect(throws: DomainError.payloadTooLarge(size: broadcast.count, limit: 4096)) {
            try APNsPayloadBuilder.update(timestamp: 1_700_000_000, content: content)
        }
        let tooBig = LiveActivityContent(contentStateJSON: #"{"p":""# + String(repeating: "x", count: 5200) + #""}"#)
        #expect(throws: DomainError.self) {
            try APNsPayloadBuilder.update(timestamp: 1_700_000_000, content: tooBig, limit: APNsBroadcast.maxPayloadBytes)
        }
    }

    func intent(timestamp: Int64, targets: [PushTarget], channelOnly: Bool) -> DispatchIntent {
        let batch = PushBatch(
            appID: "app", activityID: "game", event: .update, timestamp: timestamp,
            payload: APNsPayload(bytes: Array("{}".utf8)), headers: APNsHeaders(bundleID: "com.example", expiration: 0),
            targets: targets)
        return DispatchIntent(
            batch, lease: IntentLease(owner: "node"), now: UnixTime(seconds: 1_700_000_000), channelOnly: channelOnly)
    }

    @Test func anUpdateIntentKeepsItsChannelAndRereadsItsTokens() throws {
        let channel = PushTarget.channel(channelID, environment: .sandbox, storagePolicy: .noStorage)
        let token = PushTarget(token: "ab" + String(repeating: "0", count: 62), environment: .sandbox)
        let both = intent(timestamp: 1, targets: [token, channel], channelOnly: false)
        #expect(both.targets == [channel])
        #expect(both.withUpdateTokens)
        #expect(both.resolvedTargets { [token] } == [channel, token])
        #expect(!both.isBroadcastOnly)
        let only = intent(timestamp: 1, targets: [channel], channelOnly: true)
        #expect(!only.withUpdateTokens)
        #expect(
            only.resolvedTargets {
                Issue.record("tokens read for a channel-only intent"); return []
            } == [channel])
        #expect(only.isBroadcastOnly)
        let tokens = intent(timestamp: 1, targets: [token], channelOnly: false)
        #expect(tokens.targets == nil, "an update to tokens alone keeps no list, as before channels")
    }

    @Test func aNewerUpdateSupersedesAnOlderOnlyIfItReachesEveryTargetOfIt() {
        let channel = PushTarget.channel(channelID, environment: .sandbox, storagePolicy: .noStorage)
        let token = PushTarget(token: "ab" + String(repeating: "0", count: 62), environment: .sandbox)
        let olderBoth = intent(timestamp: 1, targets: [token, channel], channelOnly: false)
        #expect(!olderBoth.isSuperseded(by: intent(timestamp: 2, targets: [token], channelOnly: false)))
        #expect(!olderBoth.isSuperseded(by: intent(timestamp: 2, targets: [channel], channelOnly: true)))
        #expect(olderBoth.isSuperseded(by: intent(timestamp: 2, targets: [token, channel], channelOnly: false)))
        let olderTokens = intent(timestamp: 1, targets: [token], channelOnly: false)
        #expect(olderTokens.isSuperseded(by: intent(timestamp: 2, targets: [token], channelOnly: false)))
    }
}
