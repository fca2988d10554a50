import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// ListEvents over a real memory store: pages in cursor order, the long poll,
/// retention's answer, and who may read which feed.
@Suite(.timeLimit(.minutes(1))) struct ListEventsTests {
    func record(_ h: Harness, _ channels: [String]) async throws {
        for channel in channels {
            try await h.store.apply(
                RecordEvents([FeedEvent(appID: appID, kind: .channelDeleted, time: h.clock.now(), channelID: channel)]),
                now: h.clock.now(), on: h.loop
            ).get()
        }
    }

    func list(
        _ h: Harness, after: UInt64 = 0, max: UInt32 = 0, wait: UInt32 = 0, context: CallContext? = nil
    )
        -> EventLoopFuture<ListEventsReply>
    {
        h.service.listEvents(
            ListEventsRequest(appID: appID, afterCursor: after, maxEvents: max, waitMS: wait), context: context ?? h.context())
    }

    @Test func eventsComeInCursorOrderAPageAtATime() async throws {
        let h = Harness()
        try await record(h, ["a", "b", "c"])
        let first = try await list(h, max: 2).get()
        #expect(first.events.map(\.channelID) == ["a", "b"])
        #expect(first.events.allSatisfy { $0.kind == .channelDeleted && $0.timeMS == t0.milliseconds })
        #expect(first.more && first.nextCursor == first.events.last?.cursor)
        let second = try await list(h, after: first.nextCursor, max: 2).get()
        #expect(second.events.map(\.channelID) == ["c"] && !second.more)
        let none = try await list(h, after: second.nextCursor).get()
        #expect(none.events.isEmpty && none.nextCursor == second.nextCursor, "the cursor stays where it was")
    }

    /// Settled calls and ended activities reach the feed through the service's own calls.
    @Test func anEndedActivityIsInTheFeed() async throws {
        let h = Harness()
        try await h.start(startRequest())
        try await h.end(endRequest())
        let reply = try await list(h).get()
        #expect(reply.events.map(\.kind) == [.activityEnded])
        #expect(reply.events.first?.activityID == "order-1" && reply.events.first?.activityState == .ended)
    }

    /// A poll with nothing to read waits for the next event and answers with it;
    /// one that waits in vain answers empty when its wait ends.
    @Test func aLongPollAnswersWithTheNextEventOrEmptyAtTheEndOfItsWait() async throws {
        let h = Harness()
        try await record(h, ["a"])
        let waiting = list(h, after: 1, wait: 30_000)
        // Registered as a waiter before the event is committed: the wait is what answers it.
        try await eventually("the poll waits") { h.store.eventCommits.waiterCount == 1 }
        try await record(h, ["b"])
        let woken = try await waiting.get()
        #expect(woken.events.map(\.channelID) == ["b"])
        #expect(h.store.eventCommits.waiterCount == 0)

        let empty = try await list(h, after: woken.nextCursor, wait: 100).get()
        #expect(empty.events.isEmpty && empty.nextCursor == woken.nextCursor)
        #expect(h.store.eventCommits.waiterCount == 0, "a wait that ended leaves no waiter behind")
    }

    /// A cancelled poll stops waiting at its next look, long before its wait would end.
    @Test func aCancelledLongPollEnds() async throws {
        let h = Harness()
        let context = h.context()
        let waiting = list(h, wait: 60_000, context: context)
        try await eventually("the poll waits") { h.store.eventCommits.waiterCount == 1 }
        context.eventLoop.execute { context.cancellation.cancel() }
        let reply = try await waiting.get()
        #expect(reply.events.isEmpty)
    }

    /// Events after the cursor went with retention: the caller is told, never skipped past them.
    @Test func aCursorOlderThanTheFeedKeepsIsRefused() async throws {
        let h = Harness()
        try await record(h, ["a", "b", "c", "d"])
        #expect(try await h.store.trimEvents(EventRetention(maxPerApp: 2), now: t0, on: h.loop).get() == 2)
        let error = await rpcError(list(h, after: 1))
        #expect(error?.status == .failedPrecondition && error?.details.reason == "CursorExpired")
        #expect(error?.message.contains("the oldest kept is 3") == true, "\(String(describing: error?.message))")
        #expect(try await list(h, after: 0).get().events.map(\.channelID) == ["c", "d"], "0 reads from the oldest kept")
        #expect(try await list(h, after: 2).get().events.map(\.channelID) == ["c", "d"], "nothing after 2 went")
    }

    /// A page of nothing but rows this build cannot read (a newer build's kinds): the reply's
    /// cursor moves past them at once, and a long poll does not wait on them.
    @Test func rowsThisBuildCannotReadDoNotHoldAReader() async throws {
        let h = Harness()
        let service = ActivityService(store: UnreadableFeedStore(), clock: h.clock, logger: Logger(label: "test"), sink: h.recorder)
        let plain = try await service.listEvents(ListEventsRequest(appID: appID, afterCursor: 3), context: h.context()).get()
        #expect(plain.events.isEmpty && plain.nextCursor == 7 && !plain.more)
        let started = ContinuousClock.now
        let polled = try await service.listEvents(
            ListEventsRequest(appID: appID, afterCursor: 3, waitMS: 10_000), context: h.context()
        ).get()
        #expect(polled.events.isEmpty && polled.nextCursor == 7)
        #expect(ContinuousClock.now - started < .seconds(5), "answered at once, not at the end of the wait")
        // Past them: nothing to read, the cursor stays.
        let past = try await service.listEvents(ListEventsRequest(appID: appID, afterCursor: 7), context: h.context()).get()
        #expect(past.events.isEmpty && past.nextCursor == 7)
    }

    @Test func anotherAppsFeedIsDeniedAndAnUnknownAppIsNotFound() async throws {
        let h = Harness(apps: AppDirectory(apps: [App(id: appID, bundleID: appID)], disabled: ["com.example.off"]))
        try await record(h, ["a"])
        let denied = await rpcError(
            h.service.listEvents(ListEventsRequest(appID: "com.example.other"), context: h.context(apps: .only([appID]))))
        #expect(denied?.status == .permissionDenied)
        let unknown = await rpcError(
            h.service.listEvents(ListEventsRequest(appID: "com.example.none"), context: h.context(apps: .all)))
        #expect(unknown?.status == .notFound && unknown?.details.reason == "UnknownApp")
        let disabled = h.service.listEvents(ListEventsRequest(appID: "com.example.off"), context: h.context(apps: .all))
        #expect(try await disabled.get().events.isEmpty, "a disabled app's feed can still be read")
    }
}

/// A feed whose rows after cursor 3 up to 7 this build cannot read: pages of them are empty.
final class UnreadableFeedStore: MemoryReadsStore {
    let reads = InMemoryActivityStore()

    func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        reads.apply(mutation, now: now, on: eventLoop)
    }

    func events(appID: String, after cursor: UInt64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<EventPage> {
        eventLoop.makeSucceededFuture(cursor < 7 ? EventPage(scannedThrough: 7) : EventPage())
    }
}
