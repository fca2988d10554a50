import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore
import Testing

/// A broadcast channel is one target of a batch: it gets its own lane, its
/// send is a broadcast request, and no answer can prune it.
@Suite struct SchedulerChannelTests {
    let channelID = "dGVzdC1jaGFubmVsLTAwMQ=="

    func channelBatch(
        timestamp: Int64 = 1_700_000_000, tokens: [String] = [], policy: ChannelStoragePolicy = .noStorage,
        expiration: Int64 = 1_700_003_600
    ) throws -> PushBatch {
        var b = try batch(timestamp: timestamp, tokens: tokens, expiration: expiration)
        b.targets.append(.channel(channelID, environment: .sandbox, storagePolicy: policy))
        return b
    }

    @Test func aChannelTargetIsSentAsOneBroadcastBesideTheTokens() throws {
        var d = SchedulerDriver()
        let (call, _) = d.enqueue(try channelBatch(tokens: [token(1)]))
        #expect(d.outstanding.count == 2)
        let broadcast = try #require(d.outstanding.first { $0.request.broadcast != nil }?.request)
        #expect(broadcast.path == "/4/broadcasts/apps/com.example.app-a")
        #expect(broadcast.environment == .sandbox)
        let fields = Dictionary(broadcast.headerFields.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        #expect(fields["apns-channel-id"] == channelID)
        #expect(fields["apns-topic"] == nil, "a broadcast names its app in the path, never in apns-topic")
        #expect(fields["apns-expiration"] == "0", "a no-storage channel only takes apns-expiration 0")
        let device = try #require(d.outstanding.first { $0.request.broadcast == nil }?.request)
        #expect(device.path == "/3/device/" + token(1))
        d.respond(200); d.respond(200)
        #expect(d.replies[call] == EnqueueResult(delivered: 2))
    }

    @Test func aMostRecentMessageChannelKeepsThePushExpiration() throws {
        var d = SchedulerDriver()
        d.enqueue(try channelBatch(policy: .mostRecentMessage))
        let fields = Dictionary(
            try #require(d.outstanding.first).request.headerFields.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        #expect(fields["apns-expiration"] == "1700003600")
    }

    @Test func anAnswerThatWouldPruneATokenFailsAChannelSendInstead() throws {
        var d = SchedulerDriver()
        let (call, _) = d.enqueue(try channelBatch())
        d.respond(410, "Unregistered")
        #expect(d.replies[call] == EnqueueResult(failures: ["Unregistered": 1]))
        #expect(d.prunes.isEmpty, "a channel is never pruned as a dead token")
    }

    @Test func anUnknownChannelFailsWithAPNsReasonAndIsNotRetried() throws {
        var d = SchedulerDriver()
        let (call, _) = d.enqueue(try channelBatch())
        d.respond(400, "ChannelNotRegistered")
        #expect(d.replies[call] == EnqueueResult(failures: ["ChannelNotRegistered": 1]))
        #expect(d.outstanding.isEmpty)
    }

    @Test func aNewerUpdateToTheChannelSupersedesAQueuedOlderOne() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        d.enqueue(try batch(tokens: [token(9)]))  // holds the only send slot
        let (older, _) = d.enqueue(try channelBatch(timestamp: 1_700_000_001))
        let (newer, _) = d.enqueue(try channelBatch(timestamp: 1_700_000_002))
        d.respond(200); d.respond(200)
        #expect(d.replies[older] == EnqueueResult(superseded: 1))
        #expect(d.replies[newer] == EnqueueResult(delivered: 1))
        #expect(d.everSent.filter { $0.request.broadcast != nil }.count == 1)
    }
}
