import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore
import Testing

/// Fairness, per-activity ordering and coalescing, expiry and admission, without sockets.
@Suite struct SchedulerOrderingTests {
    @Test func aQuietAppIsSentWithinOneRoundWhileAFloodingAppHasADeepQueue() throws {
        var d = SchedulerDriver(configuration(apps: [("flood", 1_000_000), ("quiet", 100)], maxInFlight: 8, quantum: 4))
        for i in 0..<10 {
            d.enqueue(try batch(app: "flood", activity: "f\(i)", tokens: (0..<1_000).map { token(i * 1_000 + $0) }), wait: false)
        }
        #expect(d.outstanding.count == 8)
        // Some of the flood goes out; then the quiet app's single push arrives.
        for _ in 0..<100 { d.respond(200) }
        d.enqueue(try batch(app: "quiet", tokens: [token(1)]), wait: false)
        #expect(d.outstanding.allSatisfy { $0.appID == "flood" })
        var freedSlots = 0
        while !d.outstanding.contains(where: { $0.appID == "quiet" }) {
            d.respond(200)
            freedSlots += 1
            try #require(freedSlots < 1_000)
        }
        // It waits at most for the flooding app's quantum (4) after the current send, not behind the 9,900 queued.
        #expect(freedSlots <= 5)
        #expect(try #require(d.scheduler.counters(appID: "flood")).unfinished > 9_800)
    }

    @Test func sendSlotsAreSharedInProportionToWeightWhileBothAppsHaveWork() throws {
        let config = DispatcherConfiguration(
            apps: [
                DispatchApp(appID: "a", queueCapacity: 100_000, route: testRoute("k1")),
                DispatchApp(appID: "b", queueCapacity: 100_000, route: testRoute("k2"), weight: 3),
            ],
            maxInFlight: 1, quantum: 2)
        var d = SchedulerDriver(config)
        d.enqueue(try batch(app: "a", tokens: (0..<400).map(token)), wait: false)
        d.enqueue(try batch(app: "b", tokens: (0..<400).map(token)), wait: false)
        for _ in 0..<400 { d.respond(200) }
        let counts = Dictionary(grouping: d.everSent.prefix(400), by: \.appID).mapValues(\.count)
        #expect(counts["a"] == 100)
        #expect(counts["b"] == 300)
    }

    @Test func aSlowEndpointHoldsBackOnlyTheAppsThatUseIt() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 10, perTransport: 3))
        d.enqueue(try batch(app: "app-a", tokens: (0..<20).map(token)), wait: false)
        #expect(d.outstanding.count == 3, "app-a's transport is at its limit")
        d.enqueue(try batch(app: "app-b", tokens: (0..<20).map(token)), wait: false)
        #expect(d.outstanding.filter { $0.appID == "app-b" }.count == 3, "app-b's transport has its own slots")
        d.respond(200, token: token(0))  // an app-a answer frees one app-a slot only
        #expect(d.outstanding.filter { $0.appID == "app-a" }.count == 3)
        #expect(d.scheduler.inFlightCount == 6)
    }

    @Test func anOlderBatchArrivingLateIsSupersededNeverSentAfterTheNewer() throws {
        var d = SchedulerDriver()
        let (newer, _) = d.enqueue(try batch(timestamp: 11, tokens: [token(1), token(2)]))
        let (older, _) = d.enqueue(try batch(timestamp: 10, tokens: [token(1), token(2), token(3)]))
        #expect(d.replies[older] == nil)
        d.respond(200); d.respond(200); d.respond(200)
        #expect(d.replies[newer] == EnqueueResult(delivered: 2))
        // token(3) had no newer push: the older batch still reaches it.
        #expect(d.replies[older] == EnqueueResult(delivered: 1, superseded: 2))
        #expect(d.everSent.map { timestamp(of: $0.request) } == [11, 11, 10])
        #expect(d.everSent.last?.request.deviceToken == token(3))
    }

    /// A 60 s lane retention; token(1) and token(2) took a push at timestamp 11, and
    /// token(1)'s was answered while token(2)'s stays in flight.
    private func retainedLanes() throws -> SchedulerDriver {
        var c = configuration()
        c.laneRetention = .seconds(60)
        var d = SchedulerDriver(c)
        d.enqueue(try batch(timestamp: 11, tokens: [token(1), token(2)]))
        d.respond(200, token: token(1))
        return d
    }

    /// The ordering memory is bounded: a token idle for the retention is forgotten
    /// (and only then may an older update reach it; the device ignores that one).
    @Test func idleTokensAreForgottenAfterTheRetentionAndBusyOnesAreKept() throws {
        var d = try retainedLanes()
        #expect(d.scheduler.laneCount(appID: "app-a") == 2)
        #expect(d.scheduler.nextWakeup == start + .seconds(60))
        d.advance(by: .seconds(59))
        #expect(d.scheduler.laneCount(appID: "app-a") == 2, "not idle for the retention yet")
        let (stale, _) = d.enqueue(try batch(timestamp: 10, tokens: [token(1)]))
        #expect(d.replies[stale] == EnqueueResult(superseded: 1), "still remembered: the older update is not sent")
        d.advance(by: .seconds(1))
        #expect(d.scheduler.laneCount(appID: "app-a") == 2, "token(1) was taken again at 59 s; token(2) is in flight")
        d.advance(by: .seconds(60))
        #expect(d.scheduler.laneCount(appID: "app-a") == 1, "token(1) forgotten; token(2), still in flight, kept")
        d.respond(200, token: token(2))
        d.advance(by: .seconds(60))
        #expect(d.scheduler.laneCount(appID: "app-a") == 0)
        #expect(d.scheduler.nextWakeup == nil, "no lanes, no sweeps")
    }

    /// A new token takes a forgotten lane's slot; the lanes kept, and what they remember, are untouched.
    @Test func aForgottenLanesSlotGoesToANewTokenAndTheKeptLanesStayTheirs() throws {
        var d = try retainedLanes()
        d.advance(by: .seconds(120))
        #expect(d.scheduler.laneCount(appID: "app-a") == 1, "token(1) forgotten")
        let (fresh, _) = d.enqueue(try batch(timestamp: 12, tokens: [token(3), token(2)]))
        #expect(d.scheduler.laneCount(appID: "app-a") == 2)
        #expect(d.outstanding.map(\.request.deviceToken) == [token(2), token(3)], "token(2)'s newer push waits")
        d.respond(200, token: token(3))
        d.respond(200, token: token(2))
        #expect(d.outstanding.map(\.request.deviceToken) == [token(2)], "then goes, to token(2)")
        #expect(d.outstanding.map { timestamp(of: $0.request) } == [12])
        d.respond(200, token: token(2))
        #expect(d.replies[fresh] == EnqueueResult(delivered: 2))
        let (stale, _) = d.enqueue(try batch(timestamp: 11, tokens: [token(3)]))
        #expect(d.replies[stale] == EnqueueResult(superseded: 1), "token(3)'s lane remembers its timestamp")
    }

    @Test func aNewerPushWaitsForTheOneInFlightAndSupersedesItsRetry() throws {
        var d = SchedulerDriver()
        let (first, _) = d.enqueue(try batch(timestamp: 10, tokens: [token(1)]))
        let (second, _) = d.enqueue(try batch(timestamp: 11, tokens: [token(1)]))
        #expect(d.outstanding.count == 1, "never two pushes to one token on the wire")
        d.respond(503, "ServiceUnavailable")  // the older one would be retried...
        #expect(d.replies[first] == EnqueueResult(superseded: 1), "...but the newer one has overtaken it")
        #expect(d.outstanding.map { timestamp(of: $0.request) } == [11])
        d.respond(200)
        #expect(d.replies[second] == EnqueueResult(delivered: 1))
        #expect(d.everSent.map { timestamp(of: $0.request) } == [10, 11])
    }

    @Test func aPushWaitingToRetryIsSupersededByANewerOne() throws {
        var d = SchedulerDriver()
        let (first, _) = d.enqueue(try batch(timestamp: 10, tokens: [token(1)]))
        d.respond(503, "ServiceUnavailable")
        #expect(d.outstanding.isEmpty)
        let (second, _) = d.enqueue(try batch(timestamp: 11, tokens: [token(1)]))
        #expect(d.replies[first] == EnqueueResult(superseded: 1))
        #expect(d.outstanding.map { timestamp(of: $0.request) } == [11], "sent at once, not after the back-off")
        d.respond(200)
        d.advance(by: .seconds(1))
        #expect(d.outstanding.isEmpty, "the old retry never fires")
        #expect(d.replies[second] == EnqueueResult(delivered: 1))
        #expect(d.everSent.map { timestamp(of: $0.request) } == [10, 11])
    }

    @Test func queuedPushesOfAnActivityCoalesceToTheNewestPerToken() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        let (blocker, _) = d.enqueue(try batch(activity: "other", tokens: [token(99)]))
        let calls = (1...5).map { i in d.enqueue(try! batch(timestamp: Int64(i), tokens: [token(1), token(2)])).0 }
        // Another activity on the same token is not coalesced away.
        let (sibling, _) = d.enqueue(try batch(activity: "sibling", timestamp: 1, tokens: [token(1)]))
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[blocker] == EnqueueResult(delivered: 1))
        for call in calls.dropLast() { #expect(d.replies[call] == EnqueueResult(superseded: 2)) }
        #expect(d.replies[calls.last!] == EnqueueResult(delivered: 2))
        #expect(d.replies[sibling] == EnqueueResult(delivered: 1))
        #expect(d.scheduler.counters(appID: "app-a")?.superseded == 8)
        #expect(d.everSent.count == 4)
    }

    /// One token (a push-to-start token) with pushes of several activities waiting:
    /// a newer push of an activity the lane has seen supersedes that activity's waiting
    /// one; a push of an activity it has not seen supersedes nothing.
    @Test func onATokenOfManyActivitiesOnlyTheSameActivityIsSuperseded() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        let (blocker, _) = d.enqueue(try batch(activity: "blocker", tokens: [token(99)]))
        let (a1, _) = d.enqueue(try batch(activity: "a", timestamp: 1, tokens: [token(1)]))
        let (b1, _) = d.enqueue(try batch(activity: "b", timestamp: 1, tokens: [token(1)]))
        let (a2, _) = d.enqueue(try batch(activity: "a", timestamp: 2, tokens: [token(1)]))
        let (c1, _) = d.enqueue(try batch(activity: "c", timestamp: 1, tokens: [token(1)]))
        let (b2, _) = d.enqueue(try batch(activity: "b", timestamp: 2, tokens: [token(1)]))
        let (stale, _) = d.enqueue(try batch(activity: "c", timestamp: 1, tokens: [token(1)]))
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[blocker] == EnqueueResult(delivered: 1))
        #expect(d.replies[a1] == EnqueueResult(superseded: 1))
        #expect(d.replies[b1] == EnqueueResult(superseded: 1))
        #expect(d.replies[stale] == EnqueueResult(superseded: 1), "not newer than c's push taken")
        for call in [a2, c1, b2] { #expect(d.replies[call] == EnqueueResult(delivered: 1)) }
        #expect(d.everSent.count == 4)
    }

    @Test func pushesNotSentByTheirDeadlineExpireAndTheWaitingCallIsAnsweredThen() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        let (blocker, _) = d.enqueue(try batch(activity: "other", tokens: [token(99)]))
        let (late, _) = d.enqueue(
            try batch(tokens: [token(1), token(2)]), sendBy: start + .seconds(1),
            replyBy: start + .seconds(1))
        d.advance(by: .milliseconds(999))
        #expect(d.replies[late] == nil)
        d.advance(by: .milliseconds(1))
        #expect(d.replies[late] == EnqueueResult(expired: 2))
        d.respond(200)
        #expect(d.replies[blocker] == EnqueueResult(delivered: 1))
        #expect(d.outstanding.isEmpty, "expired pushes are never sent")
        #expect(d.scheduler.unfinishedCount == 0)
    }

    @Test func aWaitingCallIsAnsweredAtItsReplyTimeWithWhatIsStillInFlightAsQueued() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        let (call, _) = d.enqueue(
            try batch(tokens: [token(1), token(2), token(3)]), sendBy: start + .seconds(2),
            replyBy: start + .seconds(2))
        d.respond(200)  // token 1 delivered; token 2 now in flight
        d.advance(by: .seconds(2))
        #expect(d.replies[call] == EnqueueResult(queued: 1, delivered: 1, expired: 1))
        d.respond(200)
        #expect(d.scheduler.counters(appID: "app-a")?.delivered == 2)
        #expect(d.scheduler.unfinishedCount == 0)
    }

    @Test func admissionRefusesOnlyTheFullAppAndOneFanOutMayOvershoot() throws {
        var d = SchedulerDriver(configuration(apps: [("app-a", 5), ("app-b", 5)], maxInFlight: 2))
        #expect(d.scheduler.admit(appID: "app-a") == .admitted)
        let (_, queued) = d.enqueue(try batch(tokens: (0..<8).map(token)), wait: false)
        #expect(queued == EnqueueResult(queued: 8), "an admitted call's fan-out is taken whole")
        #expect(d.scheduler.admit(appID: "app-a") == .queueFull(unfinished: 8, capacity: 5, retryAfterMS: 1_000))
        #expect(d.scheduler.admit(appID: "app-b") == .admitted)
        #expect(d.scheduler.admit(appID: "unknown") == .admitted)
        let (_, unknown) = d.enqueue(try batch(app: "unknown", tokens: [token(1)]), wait: false)
        #expect(unknown == EnqueueResult(failures: ["AppNotConfigured": 1]))
        for _ in 0..<4 { d.respond(200) }
        #expect(d.scheduler.admit(appID: "app-a") == .admitted, "room again below capacity")
        #expect(d.scheduler.counters(appID: "app-a")?.refusedCalls == 1)
    }

    /// How admission counts (docs/PROTOCOL.md, RESOURCE_EXHAUSTED): pushes, not
    /// calls; a call is admitted while the app's unfinished pushes are below
    /// queue_capacity, and then its whole fan-out is taken, even one larger
    /// than the whole capacity; later calls wait until the count is below it again.
    @Test func aCallLargerThanTheWholeCapacityIsTakenAndLaterCallsWaitUntilBelowCapacity() throws {
        var d = SchedulerDriver(configuration(apps: [("app-a", 5)], maxInFlight: 1))
        #expect(d.scheduler.admit(appID: "app-a") == .admitted, "an empty queue")
        let (_, queued) = d.enqueue(try batch(tokens: (0..<12).map(token)), wait: false)
        #expect(queued == EnqueueResult(queued: 12))
        #expect(d.scheduler.counters(appID: "app-a")?.unfinished == 12)
        for _ in 0..<7 { d.respond(200) }
        #expect(
            d.scheduler.admit(appID: "app-a") == .queueFull(unfinished: 5, capacity: 5, retryAfterMS: 1_000),
            "at capacity is full")
        d.respond(200)
        #expect(d.scheduler.admit(appID: "app-a") == .admitted, "4 unfinished: below capacity")
        #expect(d.scheduler.counters(appID: "app-a")?.refusedCalls == 1)
    }
}
