import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// A monotonic clock the test moves, for the priority-10 budget's window.
final class BudgetClock: Sendable {
    private let now = NIOLockedValueBox<Duration>(.seconds(0))

    var read: @Sendable () -> Duration { { [now] in now.withLockedValue { $0 } } }

    func advance(by duration: Duration) { now.withLockedValue { $0 += duration } }
}

/// An activity service with broadcast channels: a real in-memory activity
/// store and channel store, a recording sink, and a priority-10 budget of
/// two sends an hour on a clock the test moves.
struct BroadcastHarness {
    let clock = ManualClock(t0)
    let uptime = BudgetClock()
    let store = InMemoryActivityStore()
    let channels = InMemoryChannelStore()
    let sink = RecordingPushSink()
    let service: ActivityService
    let loop = MultiThreadedEventLoopGroup.singleton.any()

    /// Ours, sandbox, storing the most recent message.
    static let ours = ChannelRecord(
        appID: appID, id: "b3Vycy0x", environment: .production, storagePolicy: .mostRecentMessage, createdAt: t0)
    /// Another app's.
    static let theirs = ChannelRecord(
        appID: "other.app", id: "dGhlaXJz", environment: .production, storagePolicy: .noStorage, createdAt: t0)

    init(channels withChannels: Bool = true, budget: Int? = 2, quotas: QuotaGate = QuotaGate()) {
        service = ActivityService(
            store: store, clock: clock, logger: Logger(label: "broadcast-test"), sink: sink, quotas: quotas,
            channels: withChannels
                ? ChannelService(store: channels, managers: { _ in nil }, clock: clock, logger: Logger(label: "broadcast-test"))
                : nil,
            priorityBudget: PriorityBudgetGate(budgets: PriorityBudgets(defaultPerHour: budget), uptime: uptime.read))
    }

    func context(apps: AppScope = .only([appID])) -> CallContext {
        CallContext(
            principal: Principal(keyID: "key-1", apps: apps, allowedMethods: Set(LiveRelayMethod.allCases)),
            eventLoop: loop, deadline: nil, requestID: 1)
    }

    /// Our channel and theirs recorded; `activities` started, each with two sandbox update tokens.
    func prepare(_ activities: [String] = ["order-1"]) async throws {
        try await channels.create(Self.ours, limit: 10)
        try await channels.create(Self.theirs, limit: 10)
        for (n, activity) in activities.enumerated() {
            // At priority 5: a priority-10 start counts against its activity's budget (aPriorityTenStartCounts).
            var start = startRequest(activity)
            start.priority = .low
            _ = try await service.startActivity(start, context: context()).get()
            for device in 1...2 {
                _ = try await service.registerToken(
                    updateToken(hex(10 * n + device), activity: activity, device: "d\(n)-\(device)"), context: context()
                ).get()
            }
        }
    }

    func update(
        _ activity: String = "order-1", channel: String? = ours.id, only: Bool? = true, priority: Priority? = nil,
        strict: Bool? = nil, key: String? = nil, content: String = #"{"status":"cooking"}"#
    ) -> EventLoopFuture<UpdateActivityReply> {
        clock.advance(by: .seconds(1))
        return service.updateActivity(
            UpdateActivityRequest(
                appID: appID, activityID: activity, contentStateJSON: content, priority: priority, idempotencyKey: key,
                channelID: channel, channelOnly: only, strictPriorityBudget: strict),
            context: context())
    }

    func lastTimestamp(_ activity: String = "order-1") async throws -> Int64? {
        try await store.activity(ActivityKey(appID: appID, activityID: activity), on: loop).get()?.lastTimestamp
    }

    /// The priority of the last batch handed to the sink.
    var lastPriority: Int? { sink.batches.last?.headers.priority }
}

@Suite struct BroadcastCallTests {
    let h = BroadcastHarness()
    let ours = BroadcastHarness.ours

    // MARK: Targets

    @Test func aChannelOnlyUpdateGoesToTheChannelAlone() async throws {
        try await h.prepare()
        let reply = try await h.update(only: true).get()
        let batch = try #require(h.sink.batches.last)
        #expect(batch.event == .update)
        #expect(batch.targets == [.channel(ours.id, environment: .production, storagePolicy: .mostRecentMessage)])
        #expect(batch.targets.first?.isChannel == true)
        #expect(reply.summary?.targeted == 1)
    }

    @Test func anUpdateToTheChannelAndTheTokensGoesToBoth() async throws {
        try await h.prepare()
        let reply = try await h.update(only: nil).get()
        let batch = try #require(h.sink.batches.last)
        #expect(batch.targets.count == 3)
        #expect(Set(batch.targets.filter { !$0.isChannel }.map(\.token)) == [hex(1), hex(2)])
        #expect(batch.targets.filter(\.isChannel) == [ours.target])
        #expect(reply.summary?.targeted == 3)
        // channel_only false is the same as leaving it out.
        _ = try await h.update(only: false).get()
        #expect(h.sink.batches.last?.targets.count == 3)
    }

    @Test func anUnknownOrAnotherAppsChannelIsNotFoundBeforeAnythingIsStored() async throws {
        try await h.prepare()
        let before = try await h.lastTimestamp()
        let sent = h.sink.batches.count
        for channel in ["bm9uZQ==", BroadcastHarness.theirs.id] {
            for only in [true, false] {
                let error = await rpcError(h.update(channel: channel, only: only))
                #expect(error?.status == .notFound, "\(channel)")
                #expect(error?.details.reason == "ChannelNotFound", "\(channel)")
            }
            let ended = await rpcError(
                h.service.endActivity(EndActivityRequest(appID: appID, activityID: "order-1", channelID: channel), context: h.context()))
            #expect(ended?.status == .notFound)
            let started = await rpcError(
                h.service.startActivity(
                    StartActivityRequest(
                        appID: appID, activityID: "order-2", attributesType: "DeliveryAttributes", attributesJSON: "{}",
                        contentStateJSON: "{}", targets: Targets(allDevices: true), channelID: channel), context: h.context()))
            #expect(started?.status == .notFound)
        }
        #expect(try await h.lastTimestamp() == before)
        #expect(try await h.lastTimestamp("order-2") == nil, "the refused start stored its activity")
        #expect(try await h.store.activity(ActivityKey(appID: appID, activityID: "order-1"), on: h.loop).get()?.state == .active)
        #expect(h.sink.batches.count == sent)
    }

    @Test func aKeyNotAllowedForTheAppIsDeniedEvenWhenTheChannelExists() async throws {
        try await h.prepare()
        let sent = h.sink.batches.count
        for channel in [ours.id, "bm9uZQ=="] {
            let error = await rpcError(
                h.service.updateActivity(
                    UpdateActivityRequest(
                        appID: appID, activityID: "order-1", contentStateJSON: "{}", channelID: channel, channelOnly: true),
                    context: h.context(apps: .only(["other.app"]))))
            #expect(error?.status == .permissionDenied, "\(channel): a key learns nothing of another app's channels")
        }
        let created = await rpcError(
            h.service.createChannel(
                CreateChannelRequest(appID: appID, environment: .sandbox, storagePolicy: .noStorage),
                context: h.context(apps: .only(["other.app"]))))
        #expect(created?.status == .permissionDenied)
        #expect(h.sink.batches.count == sent)
    }

    @Test func aServerWithoutChannelsRefusesACallNamingOne() async throws {
        let h = BroadcastHarness(channels: false)
        _ = try await h.service.startActivity(startRequest(), context: h.context()).get()
        let before = try await h.lastTimestamp()
        let error = await rpcError(h.update())
        #expect(error?.status == .failedPrecondition)
        #expect(error?.details.reason == "ChannelsNotConfigured")
        #expect(try await h.lastTimestamp() == before)
        for call in [
            await rpcError(
                h.service.createChannel(
                    CreateChannelRequest(appID: appID, environment: .sandbox, storagePolicy: .noStorage), context: h.context())),
            await rpcError(h.service.listChannels(ListChannelsRequest(appID: appID), context: h.context())),
            await rpcError(h.service.deleteChannel(DeleteChannelRequest(appID: appID, channelID: ours.id), context: h.context())),
        ] {
            #expect(call?.status == .failedPrecondition)
            #expect(call?.details.reason == "ChannelsNotConfigured")
        }
        // Without a channel, the same server takes the update.
        _ = try await h.update(channel: nil, only: nil).get()
    }

    /// Channel RPCs are calls of their app: over its calls_per_second they are refused like the
    /// others (CallRateExceeded), and another app's rate is untouched.
    @Test func channelRPCsCountAgainstTheAppsCallRate() async throws {
        let uptime = ManualUptime()
        let quotas = QuotaGate(
            settings: QuotaSettings(perApp: [appID: AppQuota(callsPerSecond: 2, burst: 2)]), refreshInterval: .seconds(2),
            uptime: { uptime.read() })
        let h = BroadcastHarness(quotas: quotas)
        try await h.channels.create(BroadcastHarness.ours, limit: 10)
        for _ in 0..<2 { _ = try await h.service.listChannels(ListChannelsRequest(appID: appID), context: h.context()).get() }
        let refused = await rpcError(h.service.listChannels(ListChannelsRequest(appID: appID), context: h.context()))
        #expect(refused?.status == .resourceExhausted)
        #expect(refused?.details.reason == "CallRateExceeded")
        let deleted = await rpcError(
            h.service.deleteChannel(DeleteChannelRequest(appID: appID, channelID: ours.id), context: h.context()))
        #expect(deleted?.details.reason == "CallRateExceeded")
        #expect(try await h.channels.channel(appID: appID, channelID: ours.id) != nil, "the refused delete changed nothing")
        _ = try await h.service.listChannels(ListChannelsRequest(appID: "other.app"), context: h.context(apps: .only(["other.app"])))
            .get()
        uptime.advance(.milliseconds(500))
        _ = try await h.service.listChannels(ListChannelsRequest(appID: appID), context: h.context()).get()
    }

    @Test func theChannelRPCsGoThroughTheActivityService() async throws {
        try await h.prepare()
        let listed = try await h.service.listChannels(ListChannelsRequest(appID: appID), context: h.context()).get()
        #expect(listed.channels.map(\.channelID) == [ours.id])
        // This harness has no APNs credentials for the app.
        let created = await rpcError(
            h.service.createChannel(
                CreateChannelRequest(appID: appID, environment: .sandbox, storagePolicy: .noStorage), context: h.context()))
        #expect(created?.details.reason == "AppNotConfigured")
    }

    // MARK: Payloads

    func startWith(channel: String?, inputPushToken: Bool?, activity: String = "order-2") async throws -> PushBatch {
        _ = try await h.service.registerToken(pushToStart(hex(99)), context: h.context()).get()
        _ = try await h.service.startActivity(
            StartActivityRequest(
                appID: appID, activityID: activity, attributesType: "DeliveryAttributes", attributesJSON: "{}",
                contentStateJSON: #"{"s":0}"#, targets: Targets(allDevices: true), channelID: channel,
                inputPushToken: inputPushToken), context: h.context()
        ).get()
        return try #require(h.sink.batches.last { $0.activityID == activity })
    }

    @Test func aStartNamingTheChannelSubscribesToIt() async throws {
        try await h.prepare()
        let start = try await startWith(channel: ours.id, inputPushToken: nil)
        #expect(start.event == .start)
        #expect(start.payload.text.contains(#""input-push-channel":"b3Vycy0x""#))
        #expect(start.payload.text.contains(#""input-push-token":1"#))
        // The start goes to the push-to-start token, not to the channel.
        #expect(start.targets.map(\.token) == [hex(99)])
    }

    @Test func aStartMayAskForNoUpdateToken() async throws {
        try await h.prepare()
        let start = try await startWith(channel: ours.id, inputPushToken: false)
        #expect(!start.payload.text.contains("input-push-token"))
        #expect(start.payload.text.contains("input-push-channel"))
        let plain = try await startWith(channel: nil, inputPushToken: nil, activity: "order-3")
        #expect(plain.payload.text.contains(#""input-push-token":1"#))
        #expect(!plain.payload.text.contains("input-push-channel"))
    }

    @Test func aLargeStateFitsTheChannelAloneButNotTheTokens() async throws {
        try await h.prepare()
        let big = #"{"p":""# + String(repeating: "x", count: 4500) + #""}"#
        let before = try await h.lastTimestamp()
        let error = await rpcError(h.update(only: nil, content: big))
        #expect(error?.status == .invalidArgument)
        #expect(error?.details.reason == "PayloadTooLarge")
        #expect(try await h.lastTimestamp() == before)
        let tokensOnly = await rpcError(h.update(channel: nil, only: nil, content: big))
        #expect(tokensOnly?.details.reason == "PayloadTooLarge")

        _ = try await h.update(only: true, content: big).get()
        let batch = try #require(h.sink.batches.last)
        #expect(batch.payload.count > APNsPayload.maxBytes)
        #expect(batch.payload.count <= APNsBroadcast.maxPayloadBytes)
        #expect(batch.targets == [ours.target])
        #expect(try await h.lastTimestamp() != before)

        let huge = #"{"p":""# + String(repeating: "x", count: 5200) + #""}"#
        #expect(await rpcError(h.update(only: true, content: huge))?.details.reason == "PayloadTooLarge")
    }

    @Test func anEndCarriesItsStaleDateAndRelevanceScore() async throws {
        try await h.prepare()
        _ = try await h.service.endActivity(
            EndActivityRequest(
                appID: appID, activityID: "order-1", staleDate: 1_700_000_600, relevanceScore: 0.5, channelID: ours.id),
            context: h.context()
        ).get()
        let end = try #require(h.sink.batches.last)
        #expect(end.event == .end)
        #expect(end.payload.text.contains(#""stale-date":1700000600"#))
        #expect(end.payload.text.contains(#""relevance-score":0.5"#))
        #expect(end.targets.contains(ours.target))
        #expect(end.targets.count == 3)
    }

    @Test func anEndWithoutThemCarriesNeither() async throws {
        try await h.prepare()
        _ = try await h.service.endActivity(endRequest(), context: h.context()).get()
        let end = try #require(h.sink.batches.last)
        #expect(!end.payload.text.contains("stale-date"))
        #expect(!end.payload.text.contains("relevance-score"))
    }

    // MARK: The priority-10 budget

    @Test func theThirdPriorityTenUpdateOfTheHourGoesAtFive() async throws {
        try await h.prepare()
        for _ in 1...2 {
            let reply = try await h.update(channel: nil, only: nil).get()
            #expect(h.lastPriority == 10)
            #expect(reply.summary?.downgraded == 0)
        }
        let third = try await h.update(channel: nil, only: nil).get()
        #expect(h.lastPriority == 5)
        #expect(third.summary?.targeted == 2)
        #expect(third.summary?.downgraded == third.summary?.targeted)
    }

    @Test func aPriorityTenStartCountsAgainstItsActivity() async throws {
        _ = try await h.service.registerToken(pushToStart(hex(99)), context: h.context()).get()
        _ = try await h.service.startActivity(startRequest("order-9"), context: h.context()).get()
        #expect(h.lastPriority == 10)
        _ = try await h.service.registerToken(updateToken(hex(98), activity: "order-9"), context: h.context()).get()
        let first = try await h.update("order-9", channel: nil, only: nil).get()
        #expect(h.lastPriority == 10)
        #expect(first.summary?.downgraded == 0)
        let second = try await h.update("order-9", channel: nil, only: nil).get()
        #expect(h.lastPriority == 5)
        #expect(second.summary?.downgraded == 1)
    }

    @Test func strictModeRefusesOverTheBudgetAndStoresNothing() async throws {
        try await h.prepare()
        for _ in 1...2 { _ = try await h.update(channel: nil, only: nil, strict: true).get() }
        let before = try await h.lastTimestamp()
        let sent = h.sink.batches.count
        let error = await rpcError(h.update(channel: nil, only: nil, strict: true))
        #expect(error?.status == .resourceExhausted)
        #expect(error?.details.reason == "PriorityBudgetExhausted")
        #expect((error?.details.retryAfterMS ?? 0) > 0)
        #expect((error?.details.retryAfterMS ?? .max) <= 61 * 60 * 1000)
        #expect(try await h.lastTimestamp() == before)
        #expect(h.sink.batches.count == sent)
        // Priority 5 is never refused, strict or not.
        _ = try await h.update(channel: nil, only: nil, priority: .low, strict: true).get()
        #expect(h.lastPriority == 5)
    }

    @Test func priorityFiveNeverCounts() async throws {
        try await h.prepare()
        for _ in 1...5 {
            let reply = try await h.update(channel: nil, only: nil, priority: .low).get()
            #expect(h.lastPriority == 5)
            #expect(reply.summary?.downgraded == 0, "asked for 5: nothing was downgraded")
        }
        for _ in 1...2 {
            _ = try await h.update(channel: nil, only: nil).get()
            #expect(h.lastPriority == 10)
        }
        _ = try await h.update(channel: nil, only: nil).get()
        #expect(h.lastPriority == 5)
    }

    @Test func aReplayCountsNothing() async throws {
        try await h.prepare()
        let first = try await h.update(channel: nil, only: nil, key: "k1").get()
        let sent = h.sink.batches.count
        for _ in 1...3 {
            let replay = try await h.update(channel: nil, only: nil, key: "k1").get()
            #expect(replay.replayed)
            #expect(replay.timestamp == first.timestamp)
            #expect(replay.summary?.downgraded == 0)
        }
        #expect(h.sink.batches.count == sent, "a replay sends nothing")
        _ = try await h.update(channel: nil, only: nil).get()
        #expect(h.lastPriority == 10, "the replays spent the budget")
        _ = try await h.update(channel: nil, only: nil).get()
        #expect(h.lastPriority == 5)
    }

    /// A client that lost the answer to its last call within the budget
    /// resends it with the same key to learn its outcome: that is a replay,
    /// whatever the budget says now, never a refusal that would tell it the
    /// call had no effect.
    @Test func aReplayOverTheBudgetIsStillAReplay() async throws {
        try await h.prepare()
        _ = try await h.update(channel: nil, only: nil, strict: true, key: "k1").get()
        let second = try await h.update(channel: nil, only: nil, strict: true, key: "k2").get()
        let sent = h.sink.batches.count
        let replay = try await h.update(channel: nil, only: nil, strict: true, key: "k2").get()
        #expect(replay.replayed)
        #expect(replay.timestamp == second.timestamp)
        let lenient = try await h.update(channel: nil, only: nil, key: "k2").get()
        #expect(lenient.replayed)
        #expect(lenient.summary?.downgraded == 0)
        #expect(h.sink.batches.count == sent)
        // A new call is over the budget all the same.
        #expect(await rpcError(h.update(channel: nil, only: nil, strict: true, key: "k3"))?.details.reason == "PriorityBudgetExhausted")
    }

    @Test func aRefusedCallDoesNotSpendTheBudget() async throws {
        try await h.prepare()
        _ = try await h.update(channel: nil, only: nil).get()
        // Refused by the rule after the budget's decision: nothing sent, nothing counted.
        let big = #"{"p":""# + String(repeating: "x", count: 4500) + #""}"#
        for _ in 1...3 { #expect(await rpcError(h.update(channel: nil, only: nil, content: big)) != nil) }
        _ = try await h.update(channel: nil, only: nil).get()
        #expect(h.lastPriority == 10)
    }

    @Test func anHourLaterPriorityTenIsBack() async throws {
        try await h.prepare()
        for _ in 1...3 { _ = try await h.update(channel: nil, only: nil).get() }
        #expect(h.lastPriority == 5)
        // A send counts for between 60 and 61 minutes (per-minute buckets): at 59 minutes it still does.
        h.uptime.advance(by: .seconds(59 * 60))
        _ = try await h.update(channel: nil, only: nil).get()
        #expect(h.lastPriority == 5)
        #expect(await rpcError(h.update(channel: nil, only: nil, strict: true))?.details.reason == "PriorityBudgetExhausted")
        h.uptime.advance(by: .seconds(2 * 60))
        let reply = try await h.update(channel: nil, only: nil, strict: true).get()
        #expect(h.lastPriority == 10)
        #expect(reply.summary?.downgraded == 0)
    }

    @Test func aChannelsBudgetCountsAcrossActivities() async throws {
        try await h.prepare(["order-1", "order-2"])
        _ = try await h.update("order-1").get()
        #expect(h.lastPriority == 10)
        _ = try await h.update("order-2").get()
        #expect(h.lastPriority == 10)
        // Each activity has sent once, the channel twice: the channel is over.
        let third = try await h.update("order-1").get()
        #expect(h.lastPriority == 5)
        #expect(third.summary?.downgraded == 1)
        let strict = await rpcError(h.update("order-2", strict: true))
        #expect(strict?.details.reason == "PriorityBudgetExhausted")
        // Without the channel, order-2 still has room of its own.
        _ = try await h.update("order-2", channel: nil, only: nil).get()
        #expect(h.lastPriority == 10)
    }

    @Test func withoutABudgetNothingIsDowngraded() async throws {
        let h = BroadcastHarness(budget: nil)
        try await h.prepare()
        for _ in 1...5 {
            let reply = try await h.update(channel: nil, only: nil, strict: true).get()
            #expect(h.lastPriority == 10)
            #expect(reply.summary?.downgraded == 0)
        }
    }
}
