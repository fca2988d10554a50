import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore
import Testing

/// Every push of every call is accounted for exactly once, whatever happens to it.
@Suite struct SchedulerAccountingTests {
    /// A seeded generator so a failing run can be replayed.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state ^ (state >> 29)
        }
    }

    static let faults: [DispatchAnswer] = [
        .response(APNsResponse(status: 200)), .response(APNsResponse(status: 200)), .response(APNsResponse(status: 200)),
        .response(APNsResponse(status: 410, reason: "Unregistered", timestampMilliseconds: 1)),
        .response(APNsResponse(status: 400, reason: "BadDeviceToken")),
        .response(APNsResponse(status: 400, reason: "BadTopic")),
        .response(APNsResponse(status: 403, reason: "ExpiredProviderToken")),
        .response(APNsResponse(status: 429, reason: "TooManyRequests")),
        .response(APNsResponse(status: 503, reason: "ServiceUnavailable")),
        .transportError(.connectionLost), .transportError(.timedOut), .transportError(.malformedResponse("x")),
    ]

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func underInjectedFaultsEveryWaitingCallAddsUpToItsTargets(seed: UInt64) throws {
        var rng = Seeded(state: seed)
        var d = SchedulerDriver(configuration(apps: [("app-a", 10_000), ("app-b", 10_000)], maxInFlight: 16, quantum: 3))
        var targets: [CallID: Int] = [:]
        var step = 0
        while step < 400 || !d.outstanding.isEmpty || d.scheduler.unfinishedCount > 0 {
            step += 1
            try #require(step < 100_000)
            let roll = Int.random(in: 0..<10, using: &rng)
            if step < 400, roll < 2 {
                let app = Bool.random(using: &rng) ? "app-a" : "app-b"
                let tokens = (0..<Int.random(in: 0...12, using: &rng)).map { _ in token(Int.random(in: 0..<30, using: &rng)) }
                let activity = "act-\(Int.random(in: 0..<4, using: &rng))"
                let deadline: NIODeadline? =
                    Bool.random(using: &rng) ? d.now + .milliseconds(Int64.random(in: 1...3_000, using: &rng)) : nil
                let call = d.enqueue(
                    try batch(app: app, activity: activity, timestamp: Int64(step), tokens: Array(Set(tokens))),
                    sendBy: deadline, replyBy: deadline
                ).0
                targets[call] = Set(tokens).count
            } else if roll < 8, !d.outstanding.isEmpty {
                let index = Int.random(in: 0..<d.outstanding.count, using: &rng)
                let token = d.outstanding[index].request.deviceToken
                d.answer(Self.faults.randomElement(using: &rng)!, token: token)
            } else {
                d.advance(by: .milliseconds(Int64.random(in: 1...400, using: &rng)))
            }
        }
        #expect(d.replies.count == targets.count, "every waiting call is answered exactly once")
        for (call, count) in targets {
            let reply = try #require(d.replies[call])
            #expect(reply.total == count, "\(call): \(reply)")
        }
        let apps = ["app-a", "app-b"].compactMap { d.scheduler.counters(appID: $0) }
        for counters in apps {
            #expect(counters.unfinished == 0)
            #expect(
                counters.delivered + counters.pruned + counters.superseded + counters.expired + counters.failed
                    == counters.enqueued)
        }
        #expect(apps.map(\.enqueued).reduce(0, +) == targets.values.reduce(0, +))
    }

    @Test func shutdownDrainsThenFailsTheRestAndAccountsForEverything() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 2))
        let (retrying, _) = d.enqueue(try batch(app: "app-b", tokens: [token(50)]))
        let (call, _) = d.enqueue(try batch(tokens: (0..<6).map(token)))
        #expect(d.outstanding.map(\.request.deviceToken) == [token(50), token(0)])
        d.absorb(d.scheduler.beginShutdown(now: d.now, drainUntil: d.now + .seconds(1)))
        #expect(d.scheduler.admit(appID: "app-a") == .shuttingDown)
        let (_, refused) = d.enqueue(try batch(timestamp: 1_700_000_005, tokens: [token(7)]), wait: false)
        #expect(refused == EnqueueResult(failures: ["ShuttingDown": 1]))
        d.respond(503, "ServiceUnavailable", token: token(50))  // app-b's push waits to retry
        d.respond(200, token: token(0))  // draining still sends what is queued
        #expect(d.outstanding.map(\.request.deviceToken) == [token(1), token(2)])
        d.advance(by: .seconds(1))
        #expect(!d.shutdownComplete, "answers in flight are still awaited")
        #expect(d.replies[retrying] == EnqueueResult(failures: ["ShuttingDown": 1]))
        d.respond(503, "ServiceUnavailable")  // no retry after the grace period
        d.respond(200)
        #expect(d.shutdownComplete)
        #expect(d.replies[call] == EnqueueResult(delivered: 2, failures: ["ShuttingDown": 4]))
        #expect(d.scheduler.unfinishedCount == 0)
    }

    /// A pruned push keeps APNs's reason in the app's account (GetAppStats reports it).
    @Test func prunedPushesAreCountedByReason() throws {
        var d = SchedulerDriver()
        d.enqueue(try batch(tokens: [token(1), token(2), token(3)]))
        d.respond(410, "Unregistered", token: token(1))
        d.respond(410, "ExpiredToken", token: token(2))
        d.respond(410, "Unregistered", token: token(3))
        let counters = try #require(d.scheduler.counters(appID: "app-a"))
        #expect(counters.prunes == ["Unregistered": 2, "ExpiredToken": 1])
        #expect(counters.pruned == 3)
    }

    /// Pushes of an app the dispatcher has no route for fail AppNotConfigured and are
    /// its account; once configured, the app keeps them in its totals.
    @Test func pushesOfAnAppWithoutARouteAreItsAccount() throws {
        var d = SchedulerDriver()
        #expect(d.scheduler.counters(appID: "later") == nil)
        let (_, result) = d.enqueue(try batch(app: "later", tokens: [token(1), token(2)]))
        #expect(result?.failures == [DispatchFailure.appNotConfigured: 2])
        #expect(d.scheduler.counters(appID: "later")?.failures == [DispatchFailure.appNotConfigured: 2])
        d.scheduler.configure(DispatchApp(appID: "later", queueCapacity: 10, route: testRoute("key-later")))
        d.enqueue(try batch(app: "later", tokens: [token(3)]))
        d.respond(200)
        let counters = try #require(d.scheduler.counters(appID: "later"))
        #expect(counters.failures == [DispatchFailure.appNotConfigured: 2])
        #expect(counters.delivered == 1)
    }
}
