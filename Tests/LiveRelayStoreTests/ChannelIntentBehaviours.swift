import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayStore
import Testing

/// Update intents to a broadcast channel in every store, part of
/// ``StoreBehaviourSuite/all``: the channel target and whether the update
/// tokens go too survive the row, and a claim rebuilds the pushes from them.
extension StoreBehaviourSuite {
    static let channel = PushTarget.channel("Y2hhbm5lbC0x", environment: .production, storagePolicy: .mostRecentMessage)

    static let channelIntentBehaviours: [StoreBehaviour] = [
        StoreBehaviour(
            description: "an update to a channel and the tokens is rebuilt with the channel and the tokens of now",
            run: aChannelAndTokensIntentIsRebuilt),
        StoreBehaviour(description: "a channel-only update is rebuilt with the channel alone", run: aChannelOnlyIntentIsRebuilt),
        StoreBehaviour(
            description: "a newer update supersedes an older intent only if it reaches every target of it",
            run: supersessionRespectsChannels),
    ]

    /// The activity's update to `channel`, alone or with the update tokens, as the service builds it.
    static func change(
        _ activity: String = "order-1", only: Bool?, channel: PushTarget? = channel, content: String = #"{"status":"cooking"}"#
    ) -> ChangeActivity {
        var change = ChangeActivity(
            UpdateActivityRequest(
                appID: appID, activityID: activity, contentStateJSON: content, channelID: channel?.token, channelOnly: only),
            app: app, intents: nodeA)
        change.channel = channel
        return change
    }

    static func claimAll(_ store: any ActivityStore, at now: UnixTime) async throws -> ClaimedIntents {
        try await apply(store, ClaimIntents(lease: IntentLease(owner: "observer"), evenIfLeased: true), now: now)
    }

    static func aChannelAndTokensIntentIsRebuilt(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1), device: "d1")))
        let sent = try #require(try await apply(store, change(only: nil), now: t0 + .seconds(1)).accepted)
        #expect(sent.batch.durable)
        #expect(Set(sent.batch.targets) == [channel, PushTarget(token: hex(1), environment: .sandbox)])
        // A token registered after the call: the resumed update reaches it too, with the same payload.
        try await apply(store, RegisterToken(updateToken(hex(2), device: "d2")), now: t0 + .seconds(2))

        let claimed = try await claimAll(store, at: t0 + .seconds(3))
        #expect(claimed.dropped.isEmpty && claimed.expired.isEmpty)
        let batch = try #require(claimed.batches.first)
        #expect(claimed.batches.count == 1)
        #expect(batch.targets.filter(\.isChannel) == [channel])
        #expect(batch.targets.first == channel, "the channel as stored, then the tokens read again")
        #expect(
            Set(batch.targets.filter { !$0.isChannel })
                == [PushTarget(token: hex(1), environment: .sandbox), PushTarget(token: hex(2), environment: .sandbox)])
        #expect(batch.timestamp == sent.batch.timestamp)
        #expect(batch.payload == sent.batch.payload)
        #expect(batch.headers.priority == sent.batch.headers.priority)
        #expect(batch.headers.expiration == sent.batch.headers.expiration)
        #expect(batch.event == .update)
        try await store.close()
    }

    static func aChannelOnlyIntentIsRebuilt(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1), device: "d1")))
        // Above the token limit: only a channel-only intent may carry it, so the row must still say "channel only".
        let big = #"{"p":""# + String(repeating: "x", count: 4500) + #""}"#
        let sent = try #require(try await apply(store, change(only: true, content: big), now: t0 + .seconds(1)).accepted)
        #expect(sent.batch.targets == [channel])
        #expect(sent.batch.payload.count > APNsPayload.maxBytes)
        try await apply(store, RegisterToken(updateToken(hex(2), device: "d2")), now: t0 + .seconds(2))

        let claimed = try await claimAll(store, at: t0 + .seconds(3))
        #expect(claimed.dropped.isEmpty, "a broadcast-only intent's 5 KB payload is not a defect")
        #expect(claimed.batches.map(\.targets) == [[channel]])
        #expect(claimed.batches.first?.payload == sent.batch.payload)
        try await store.close()
    }

    /// Every update is by node A, one second apart, and claimed at once by an observer:
    /// - order-1, to the channel alone and then to the tokens alone: both are left (the channel still needs the first);
    /// - order-2, to the tokens alone and then to the channel alone: both are left (the tokens still need the first);
    /// - order-3, to the channel, the tokens, and then both: only the last is left;
    /// - order-4, to the channel alone twice: only the second is left.
    static func supersessionRespectsChannels(_ make: StoreFactory) async throws {
        let store = try await make()
        for (n, activity) in ["order-1", "order-2", "order-3", "order-4"].enumerated() {
            try await apply(store, StartActivity(start(activity), app: app))
            try await apply(store, RegisterToken(updateToken(hex(n + 1), activity: activity, device: "d\(n)")))
        }
        var now = t0
        func send(_ change: ChangeActivity) async throws -> Int64 {
            now = now + .seconds(1)
            return try #require(try await apply(store, change, now: now).accepted).batch.timestamp
        }
        var expected: [String: [Int64]] = [:]
        expected["order-1"] = [try await send(change("order-1", only: true))]
        expected["order-1"]! += [try await send(change("order-1", only: nil, channel: nil))]
        expected["order-2"] = [try await send(change("order-2", only: nil, channel: nil))]
        expected["order-2"]! += [try await send(change("order-2", only: true))]
        _ = try await send(change("order-3", only: true))
        _ = try await send(change("order-3", only: nil, channel: nil))
        expected["order-3"] = [try await send(change("order-3", only: nil))]
        _ = try await send(change("order-4", only: true))
        expected["order-4"] = [try await send(change("order-4", only: true))]
        let claimed = try await claimAll(store, at: now + .seconds(1))
        let found = Dictionary(grouping: claimed.batches, by: \.activityID).mapValues { $0.map(\.timestamp).sorted() }
        for (activity, timestamps) in expected.sorted(by: { $0.key < $1.key }) {
            #expect(found[activity] ?? [] == timestamps, "\(activity)")
        }
        try await store.close()
    }
}
