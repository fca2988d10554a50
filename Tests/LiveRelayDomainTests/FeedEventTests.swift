import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import Testing

/// The events the rules write into an app's feed, in the plan (the
/// transaction) of the state they report, and what the feed keeps.
struct FeedEventTests {
    func events(_ state: InMemoryState, after cursor: UInt64 = 0) -> [FeedEvent] {
        state.events(appID: app.id, after: cursor, limit: 1_000).entries.map(\.event)
    }

    /// A settled call: one event per push that failed for good, then the call's own, with its account;
    /// settling it again (a second node, after a lease ran out) adds nothing.
    @Test func aSettledCallReportsItsAccountAndEachFailedPushOnce() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        _ = try state.apply(RegisterToken(pushToStart(hex(2), device: "d2")), now: t0)
        let lease = IntentLease(owner: "node")
        let call = try #require(try state.apply(StartActivity(start(key: "k1"), app: app, intents: lease), now: t0).accepted)
        #expect(call.batch.idempotencyKey == "k1", "the batch carries the call's key to its settlement")
        let key = IntentKey(call.batch)
        let account = EnqueueResult(delivered: 1, failures: ["BadPriority": 1])
        let settled = SettledIntent(
            key: key, account: account, failedPushes: [FailedPush(target: hex(2), reason: "BadPriority")],
            idempotencyKey: call.batch.idempotencyKey)
        try state.apply(SettleIntents([settled]), now: t0 + .seconds(1))
        try state.apply(SettleIntents([settled]), now: t0 + .seconds(2))

        let feed = events(state)
        #expect(feed.map(\.kind) == [.pushFailed, .callSettled])
        #expect(feed[0].token == hex(2) && feed[0].reason == "BadPriority")
        #expect(feed[0].activityID == "order-1" && feed[0].callTimestamp == key.timestamp)
        #expect(feed[1].account == account && feed[1].callTimestamp == key.timestamp)
        #expect(feed[1].time == t0 + .seconds(1))
        #expect(feed.allSatisfy { $0.idempotencyKey == "k1" })
    }

    /// An intent that can no longer be sent settles too: expired unsent, or dropped as unreadable.
    @Test func anIntentExpiredBeforeItsResumeIsReportedSettledExpired() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        let call = try #require(
            try state.apply(StartActivity(start(), app: app, intents: IntentLease(owner: "dead")), now: t0).accepted)
        let late = (call.batch.expiresAt ?? t0) + .seconds(1)
        let claimed = try state.apply(ClaimIntents(lease: IntentLease(owner: "next"), evenIfLeased: true), now: late)
        #expect(claimed.expired == [IntentKey(call.batch)])
        let feed = events(state)
        #expect(feed.map(\.kind) == [.callSettled])
        #expect(feed.first?.account == EnqueueResult(expired: 1))
    }

    @Test func aPrunedTokenIsReportedWithItsKindAndReasonAndAReregisteredOneIsNot() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        let key = TokenKey(appID: app.id, hex: hex(1))
        _ = try state.apply(PruneToken(key, reason: "Unregistered", invalidSince: t0 - .seconds(5)), now: t0 + .seconds(1))
        #expect(events(state).isEmpty, "registered after APNs found it invalid: kept, nothing to report")
        _ = try state.apply(PruneToken(key, reason: "Unregistered", invalidSince: t0 + .seconds(5)), now: t0 + .seconds(6))
        let pruned = try #require(events(state).first)
        #expect(pruned.kind == .tokenPruned && pruned.token == hex(1) && pruned.tokenKind == .pushToStart)
        #expect(pruned.reason == "Unregistered" && pruned.invalidSince == t0 + .seconds(5))
        _ = try state.apply(PruneToken(key, reason: "Unregistered"), now: t0 + .seconds(7))
        #expect(events(state).count == 1, "a token already gone is not reported twice")
    }

    /// Ended by a call, then dismissed by the sweep; another activity expired by it.
    @Test func activitiesEndedByACallOrTheSweepAreReportedWithTheirState() throws {
        var state = InMemoryState()
        _ = try state.apply(StartActivity(start(), app: app), now: t0)
        _ = try state.apply(StartActivity(start("order-2"), app: app), now: t0)
        _ = try state.apply(ChangeActivity(endRequest(dismissal: t0.seconds + 600), app: app), now: t0)
        _ = try state.apply(Sweep(), now: t0 + .seconds(600))
        _ = try state.apply(Sweep(), now: t0 + .hours(8))
        let ends = events(state).map { "\($0.activityID ?? "") \($0.activityState.map { "\($0)" } ?? "")" }
        #expect(ends == ["order-1 ended", "order-1 dismissed", "order-2 expired"])
        #expect(events(state).allSatisfy { $0.kind == .activityEnded })
    }

    /// A refused call writes nothing, its event included.
    @Test func aRefusedCallWritesNoEvent() throws {
        var state = InMemoryState()
        #expect(refusal(&state, ChangeActivity(endRequest(), app: app), now: t0) != nil)
        #expect(events(state).isEmpty)
    }

    /// Retention: the older bound wins, the mark tells a reader what went, cursors go on increasing.
    @Test func retentionKeepsTheNewestAndMarksWhatWent() throws {
        var state = InMemoryState()
        for i in 0..<10 {
            try state.apply(
                RecordEvents([FeedEvent(appID: app.id, kind: .channelDeleted, time: t0 + .seconds(Int64(i)), channelID: "c\(i)")]),
                now: t0 + .seconds(Int64(i)))
        }
        #expect(state.trimEvents(EventRetention(maxAge: .seconds(100), maxPerApp: 6), now: t0 + .seconds(9)) == 4)
        var page = state.events(appID: app.id, after: 0, limit: 3)
        #expect(page.trimmedThrough == 4 && page.more)
        #expect(page.entries.map(\.cursor) == [5, 6, 7])
        #expect(state.trimEvents(EventRetention(maxAge: .seconds(2), maxPerApp: 100), now: t0 + .seconds(9)) == 3)
        page = state.events(appID: app.id, after: 0, limit: 100)
        #expect(page.entries.map(\.event.channelID) == ["c7", "c8", "c9"] && page.trimmedThrough == 7 && !page.more)
        try state.apply(RecordEvents([FeedEvent(appID: app.id, kind: .dispatchHeld, time: t0 + .seconds(10))]), now: t0)
        #expect(state.events(appID: app.id, after: 10, limit: 10).entries.map(\.cursor) == [11])
    }

    /// Every field an event may carry survives the SQL stores' columns.
    @Test func anEventRoundTripsThroughItsColumns() {
        let full = FeedEvent(
            appID: app.id, kind: .callSettled, time: t0, activityID: "order \"1\"", callTimestamp: 1_700_000_123, idempotencyKey: "k-1",
            account: EnqueueResult(delivered: 3, pruned: 1, superseded: 2, expired: 4, failures: ["BadPriority": 5]),
            token: hex(7), tokenKind: .update, reason: "Unregistered", invalidSince: t0 - .seconds(3), activityState: .dismissed,
            channelID: "chan", dedupeKey: "settled order 1")
        #expect(FeedEvent(appID: app.id, time: t0, dedupeKey: full.dedupeKey, bodyJSON: full.bodyJSON) == full)
        let bare = FeedEvent(appID: app.id, kind: .dispatchResumed, time: t0)
        #expect(FeedEvent(appID: app.id, time: t0, dedupeKey: nil, bodyJSON: bare.bodyJSON) == bare)
        #expect(FeedEvent(appID: app.id, time: t0, dedupeKey: nil, bodyJSON: #"{"kind":99}"#) == nil, "a kind from a newer build")
        #expect(FeedEvent(appID: app.id, time: t0, dedupeKey: nil, bodyJSON: "not json") == nil)
    }
}
