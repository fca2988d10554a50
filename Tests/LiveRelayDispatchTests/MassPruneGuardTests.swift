import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import NIOCore
import Testing

/// The mass-pruning guard: token rejections for most of an app's pushes mean
/// a wrong bundle id, key or environment, not that every device left.
@Suite struct MassPruneGuardTests {
    static func dead(_ n: Int) -> PrunedToken {
        PrunedToken(appID: "app-a", token: token(n), reason: "DeviceTokenNotForTopic")
    }

    @Test func rejectionsAreHeldUntilTheWindowHasTheMinimumThenReleased() {
        var g = MassPruneGuard(policy: MassPruneGuardPolicy(window: 100, minimumAnswers: 20, threshold: 0.5))
        #expect(g.record(.notForTopic, prune: Self.dead(1)) == .prune([]))
        #expect(g.record(.badDeviceToken, prune: Self.dead(2)) == .prune([]))
        for _ in 0..<17 { #expect(g.record(.accepted) == .prune([])) }
        #expect(g.held == [Self.dead(1), Self.dead(2)])
        #expect(g.record(.accepted) == .prune([Self.dead(1), Self.dead(2)]), "20 answers, 10% rejections: a verdict")
        #expect(g.held.isEmpty)
        // From then on a rejection below the threshold prunes at once.
        #expect(g.record(.notForTopic, prune: Self.dead(3)) == .prune([Self.dead(3)]))
    }

    @Test func aMajorityOfRejectionsTripsItAndDropsWhatItHeld() {
        var g = MassPruneGuard(policy: MassPruneGuardPolicy(window: 100, minimumAnswers: 20, threshold: 0.5))
        for n in 0..<10 { _ = g.record(.notForTopic, prune: Self.dead(n)) }
        for _ in 0..<9 { _ = g.record(.accepted) }
        // 10 of 20 is half: not above the threshold.
        #expect(g.record(.accepted) == .prune((0..<10).map(Self.dead)))
        var g2 = MassPruneGuard(policy: MassPruneGuardPolicy(window: 100, minimumAnswers: 20, threshold: 0.5))
        for n in 0..<11 { _ = g2.record(.notForTopic, prune: Self.dead(n)) }
        for _ in 0..<8 { _ = g2.record(.accepted) }
        #expect(g2.record(.accepted) == .tripped(reason: DispatchFailure.massDeviceTokenNotForTopic))
        #expect(g2.held.isEmpty, "nothing it held is pruned")
        #expect(g2.count == 0, "judged afresh afterwards")
    }

    @Test func theReasonNamesTheDominantRejection() {
        var g = MassPruneGuard(policy: MassPruneGuardPolicy(window: 10, minimumAnswers: 10, threshold: 0.5))
        for _ in 0..<3 { _ = g.record(.notForTopic) }
        for _ in 0..<6 { _ = g.record(.badDeviceToken) }
        #expect(g.record(.accepted) == .tripped(reason: DispatchFailure.massBadDeviceToken), "a wrong environment")
    }

    @Test func theWindowSlides() {
        var g = MassPruneGuard(policy: MassPruneGuardPolicy(window: 10, minimumAnswers: 5, threshold: 0.5))
        for _ in 0..<50 { #expect(g.record(.accepted) == .prune([])) }
        // Long good history does not hide a change: only the last 10 answers count.
        for n in 0..<5 { #expect(g.record(.notForTopic, prune: Self.dead(n)) == .prune([Self.dead(n)])) }
        #expect(g.record(.notForTopic, prune: Self.dead(5)) == .tripped(reason: DispatchFailure.massDeviceTokenNotForTopic))
    }

    // MARK: In the scheduler

    @Test func aWrongTopicForMostPushesSuspendsTheAppInsteadOfPruningItsTokens() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 5))
        let (call, _) = d.enqueue(try batch(tokens: (0..<30).map(token)))
        for _ in 0..<19 { d.respond(400, "DeviceTokenNotForTopic") }
        #expect(d.prunes.isEmpty, "held until the app has 20 answers")
        #expect(d.scheduler.credentialError(appID: "app-a") == nil)
        d.respond(400, "DeviceTokenNotForTopic")  // the 20th: 100% rejections
        let error = try #require(d.scheduler.credentialError(appID: "app-a"))
        #expect(error.reason == "MassDeviceTokenNotForTopic")
        #expect(error.status == 400)
        #expect(error.suspendedUntil == d.now + .seconds(60))
        #expect(d.credentialEvents.map(\.1.reason) == ["MassDeviceTokenNotForTopic"])
        // Four were still in flight: one answers 410 (a device that did leave: pruned), three DeviceTokenNotForTopic.
        #expect(d.outstanding.count == 4)
        d.respond(410, "Unregistered", timestamp: 1_699_999_000_000)
        while !d.outstanding.isEmpty { d.respond(400, "DeviceTokenNotForTopic") }
        #expect(d.prunes.map(\.reason) == ["Unregistered"], "no DeviceTokenNotForTopic token is pruned")
        #expect(d.replies[call] == nil, "the pushes after the verdict are held with the app, not failed")
        #expect(d.scheduler.unfinishedCount == 10, "the tripping one, the three in flight and the six queued")
        #expect(d.scheduler.counters(appID: "app-a")?.credentialRejections == 1)
        // Held like rejected credentials: new pushes wait with the others...
        let (_, during) = d.enqueue(try batch(activity: "act-2", timestamp: 1_700_000_001, tokens: [token(40)]), wait: false)
        #expect(during == EnqueueResult(queued: 1))
        // ...while the other app goes on.
        let (other, _) = d.enqueue(try batch(app: "app-b", tokens: [token(41)]))
        d.respond(400, "DeviceTokenNotForTopic")
        #expect(d.replies[other] == EnqueueResult(failures: ["DeviceTokenNotForTopic": 1]), "its prune waits for app-b's verdict")
        // After the hold one push probes; once the app is fixed (accepted), the rest goes.
        d.advance(by: .seconds(60))
        #expect(d.outstanding.count == 1)
        d.respond(200)
        #expect(d.scheduler.credentialError(appID: "app-a") == nil)
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(
            d.replies[call] == EnqueueResult(delivered: 10, pruned: 1, failures: ["DeviceTokenNotForTopic": 19]),
            "the 19 before the verdict failed (their prunes, held, were dropped), the 410 pruned; the held ones delivered")
    }

    @Test func aHealthyAppsFewRejectionsArePrunedOnceTheWindowHasEnough() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        d.enqueue(try batch(tokens: (0..<25).map(token)), wait: false)
        for i in 0..<25 {
            if i % 8 == 0 { d.respond(400, i == 16 ? "BadDeviceToken" : "DeviceTokenNotForTopic") } else { d.respond(200) }
            if i == 18 { #expect(d.prunes.isEmpty) }
        }
        #expect(d.prunes.map(\.token) == [token(0), token(8), token(16), token(24)])
        #expect(d.scheduler.credentialError(appID: "app-a") == nil)
        // Three answered while the prunes waited for the verdict (failed with APNs's reason), one after (pruned).
        #expect(d.scheduler.counters(appID: "app-a")?.pruned == 1)
    }

    @Test func aWrongEnvironmentTripsItAsMassBadDeviceToken() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        let (call, _) = d.enqueue(try batch(tokens: (0..<25).map(token)))
        for _ in 0..<20 { d.respond(400, "BadDeviceToken") }
        #expect(d.scheduler.credentialError(appID: "app-a")?.reason == "MassBadDeviceToken")
        #expect(d.prunes.isEmpty)
        #expect(d.replies[call] == nil, "held: the tripping push and the five queued wait for the app's fix")
        #expect(d.scheduler.unfinishedCount == 6)
    }
}
