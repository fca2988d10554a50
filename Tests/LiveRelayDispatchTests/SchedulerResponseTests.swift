import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore
import Testing

/// Each APNs answer handled as APNs's documented reason table says, without sockets.
@Suite struct SchedulerResponseTests {
    struct FinalCase: Sendable, CustomStringConvertible {
        var status: Int
        var reason: String?
        var expected: EnqueueResult
        var description: String { "\(status) \(reason ?? "")" }
    }

    static let finalCases: [FinalCase] = [
        FinalCase(status: 200, reason: nil, expected: EnqueueResult(delivered: 1)),
        FinalCase(status: 410, reason: "Unregistered", expected: EnqueueResult(pruned: 1)),
        FinalCase(status: 410, reason: "ExpiredToken", expected: EnqueueResult(pruned: 1)),
        // The mass-prune guard holds a rejection's prune until it has a verdict: failed, not pruned.
        FinalCase(status: 400, reason: "BadDeviceToken", expected: EnqueueResult(failures: ["BadDeviceToken": 1])),
        FinalCase(status: 400, reason: "DeviceTokenNotForTopic", expected: EnqueueResult(failures: ["DeviceTokenNotForTopic": 1])),
        FinalCase(status: 400, reason: "BadTopic", expected: EnqueueResult(failures: ["BadTopic": 1])),
        FinalCase(status: 404, reason: "BadPath", expected: EnqueueResult(failures: ["BadPath": 1])),
        FinalCase(status: 413, reason: "PayloadTooLarge", expected: EnqueueResult(failures: ["PayloadTooLarge": 1])),
        FinalCase(status: 405, reason: nil, expected: EnqueueResult(failures: ["HTTP405": 1])),
    ]

    @Test(arguments: finalCases)
    func aFinalAnswerEndsThePushOnce(_ c: FinalCase) throws {
        var d = SchedulerDriver()
        let (call, immediate) = d.enqueue(try batch(tokens: [token(1)]))
        #expect(immediate == nil)
        #expect(d.outstanding.count == 1)
        d.respond(c.status, c.reason, timestamp: 1_699_999_000_123)
        #expect(d.replies[call] == c.expected)
        #expect(d.outstanding.isEmpty, "a final answer is never retried")
        #expect(d.scheduler.unfinishedCount == 0)
        // A 410 prunes at once; a 400 token rejection is held by the mass-pruning
        // guard until the app has enough answers to tell a dead device from a
        // wrong configuration (MassPruneGuardTests).
        let pruning = c.expected.pruned == 1 && c.status == 410
        #expect(
            d.prunes
                == (pruning
                    ? [
                        PrunedToken(
                            appID: "app-a", token: token(1), reason: c.reason!,
                            invalidSince: UnixTime(milliseconds: 1_699_999_000_123))
                    ] : []))
        #expect(d.scheduler.credentialError(appID: "app-a") == nil)
    }

    /// A 403 about the app's credentials (not an expired provider token) ends no push: it holds the app.
    @Test(arguments: ["InvalidProviderToken", "BadEnvironmentKeyIdInToken", "BadCertificate"])
    func aCredentialRejectionHoldsThePushInsteadOfEndingIt(_ reason: String) throws {
        var d = SchedulerDriver()
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        d.respond(403, reason)
        #expect(d.replies[call] == nil)
        #expect(d.scheduler.unfinishedCount == 1)
        #expect(d.scheduler.credentialError(appID: "app-a")?.reason == reason)
        #expect(d.settled.isEmpty, "its durable intent stays")
    }

    @Test func aPruneAlsoEndsThePushesQueuedToTheDeadToken() throws {
        var d = SchedulerDriver()
        let (first, _) = d.enqueue(try batch(activity: "x", tokens: [token(1)]))
        let (second, _) = d.enqueue(try batch(activity: "y", tokens: [token(1)]))
        #expect(d.outstanding.count == 1, "one push per token on the wire")
        d.respond(410, "Unregistered")
        #expect(d.replies[first] == EnqueueResult(pruned: 1))
        #expect(d.replies[second] == EnqueueResult(pruned: 1))
        #expect(d.prunes.count == 1, "the token is pruned once")
        #expect(d.outstanding.isEmpty)
    }

    @Test func anExpiredProviderTokenIsRetriedAtOnceOnANewStream() throws {
        var d = SchedulerDriver()
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        d.respond(403, "ExpiredProviderToken")
        #expect(d.outstanding.count == 1, "sent again in the same step, no back-off")
        #expect(d.scheduler.credentialError(appID: "app-a") == nil)
        d.respond(200)
        #expect(d.replies[call] == EnqueueResult(delivered: 1))
        #expect(d.scheduler.counters(appID: "app-a")?.attempts == 2)
    }

    @Test(arguments: [
        (429, "TooManyRequests"), (500, "InternalServerError"), (503, "ServiceUnavailable"),
        (503, "Shutdown"), (429, "TooManyProviderTokenUpdates"),
    ])
    func retryableAnswersBackOffExponentiallyUpToTheCapThenFailAfterMaxAttempts(_ status: Int, _ reason: String) throws {
        var d = SchedulerDriver()  // 4 attempts, 100 ms doubling, capped at 250 ms, no jitter
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        var delays: [Int64] = []
        for attempt in 1...3 {
            d.respond(status, reason)
            #expect(d.outstanding.isEmpty, "attempt \(attempt) waits before it is sent again")
            let wake = try #require(d.scheduler.nextWakeup)
            delays.append((wake - d.now).nanoseconds / 1_000_000)
            d.advance(by: (wake - d.now) - .nanoseconds(1))
            #expect(d.outstanding.isEmpty, "not a nanosecond early")
            d.advance(by: .nanoseconds(1))
            #expect(d.outstanding.count == 1)
        }
        #expect(delays == [100, 200, 250])
        d.respond(status, reason)
        #expect(d.replies[call] == EnqueueResult(failures: [reason: 1]))
        let counters = try #require(d.scheduler.counters(appID: "app-a"))
        #expect(counters.attempts == 4)
        #expect(counters.retries == 3)
    }

    @Test func jitterSpreadsTheDelaysWithinTheirBounds() throws {
        let policy = RetryPolicy(maxAttempts: 5, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0.5)
        // The shared Backoff rule: d × (1 − jitter × random), so random 0 is the
        // full delay and random near 1 the shortest (the old rule ran the other way).
        #expect(policy.backoff.delay(after: 1, random: 0) == .milliseconds(100))
        #expect(policy.backoff.delay(after: 1, random: 0.999_999).nanoseconds < 50_001_000)
        #expect(policy.backoff.delay(after: 1, random: 1) == .milliseconds(50))
        #expect(policy.backoff.delay(after: 3, random: 1) == .milliseconds(200))
        #expect(policy.backoff.delay(after: 30, random: 0.5) == .milliseconds(750))

        var d = SchedulerDriver(configuration(retry: policy))
        d.enqueue(try batch(tokens: (0..<20).map(token)))
        for _ in 0..<20 { d.respond(503, "ServiceUnavailable") }
        // Twenty pushes failed together; their retries do not all come back together.
        var due: Set<Int64> = []
        var now = d.now
        while d.scheduler.unfinishedCount > 0, d.outstanding.count < 20 {
            let wake = try #require(d.scheduler.nextWakeup)
            #expect(wake - now >= .milliseconds(0))
            now = wake
            d.advance(by: wake - d.now)
            due.insert((wake - start).nanoseconds)
        }
        #expect(due.count > 10)
        #expect(due.allSatisfy { $0 >= 50_000_000 && $0 <= 100_000_000 })
    }

    @Test(arguments: [
        (APNsTransportError.connectionLost, true), (.timedOut, true), (.refusedByGoAway, true),
        (.connectFailed("refused"), true), (.shutDown, false), (.malformedResponse("not h2"), false),
    ])
    func transportErrorsAreRetriedOnlyWhenRetryable(_ error: APNsTransportError, _ retryable: Bool) throws {
        var d = SchedulerDriver()
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        d.answer(.transportError(error))
        if retryable {
            #expect(d.replies[call] == nil)
            d.advance(by: .milliseconds(100))
            #expect(d.outstanding.count == 1)
            d.respond(200)
            #expect(d.replies[call] == EnqueueResult(delivered: 1))
        } else {
            let reason = error == .shutDown ? "TransportShutDown" : "MalformedResponse"
            #expect(d.replies[call] == EnqueueResult(failures: [reason: 1]))
        }
    }

    /// Rejected credentials hold the app, they do not fail it: its pushes (queued, and new ones)
    /// wait while the other apps go on; after the hold one push probes, a second rejection doubles
    /// the hold, and an accepted probe sends everything that waited.
    @Test func rejectedCredentialsHoldTheAppsPushesWhileOtherAppsGoOn() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        let (a1, _) = d.enqueue(try batch(tokens: [token(1), token(2), token(3)]))
        let (b1, _) = d.enqueue(try batch(app: "app-b", tokens: [token(9)]))
        d.respond(403, "InvalidProviderToken")
        #expect(d.replies[a1] == nil, "nothing of the app is failed")
        #expect(d.credentialEvents.map(\.0) == ["app-a"])
        #expect(d.holdEvents.map { "\($0.0) \($0.1)" } == ["app-a true"])
        let error = try #require(d.scheduler.credentialError(appID: "app-a"))
        #expect(error.reason == "InvalidProviderToken")
        #expect(error.suspendedUntil == d.now + .seconds(60))
        #expect(d.outstanding.map(\.appID) == ["app-b"], "the other app is sent to")
        d.respond(200)
        #expect(d.replies[b1] == EnqueueResult(delivered: 1))

        // While held, new pushes are taken (queued) and nothing is sent for the app.
        let (_, during) = d.enqueue(try batch(activity: "act-2", timestamp: 1_700_000_001, tokens: [token(4)]), wait: false)
        #expect(during == EnqueueResult(queued: 1))
        #expect(d.outstanding.isEmpty)
        #expect(d.scheduler.unfinishedCount == 4)

        // At the end of the hold one push probes; rejected again, the hold doubles.
        d.advance(by: .seconds(60))
        #expect(d.outstanding.map(\.appID) == ["app-a"])
        d.respond(403, "InvalidProviderToken")
        #expect(d.outstanding.isEmpty)
        #expect(d.scheduler.credentialError(appID: "app-a")?.suspendedUntil == d.now + .seconds(120))
        d.advance(by: .seconds(60))
        #expect(d.outstanding.isEmpty, "still held")
        d.advance(by: .seconds(60))
        #expect(d.outstanding.count == 1, "one probe, not the whole queue")
        // Accepted: the hold ends and every push that waited goes.
        d.respond(200)
        #expect(d.scheduler.credentialError(appID: "app-a") == nil)
        #expect(d.holdEvents.map { "\($0.0) \($0.1)" } == ["app-a true", "app-a false"])
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[a1] == EnqueueResult(delivered: 3))
        #expect(d.scheduler.unfinishedCount == 0)
        #expect(d.scheduler.counters(appID: "app-a")?.credentialRejections == 2)
    }

    /// A held push that reaches its send-by time fails with the rejection's reason (why it was not sent).
    @Test func aHeldPushFailsWithTheRejectionAtItsSendByTime() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        var durable = try batch(tokens: [token(1), token(2)])
        durable.durable = true
        let (call, _) = d.enqueue(durable, sendBy: d.now + .seconds(30))
        d.respond(403, "InvalidProviderToken")
        #expect(d.replies[call] == nil)
        #expect(d.settled.isEmpty, "its intent stays while it is held")
        d.advance(by: .seconds(30))
        #expect(d.replies[call] == EnqueueResult(failures: ["InvalidProviderToken": 2]))
        #expect(d.settled.map(\.account) == [EnqueueResult(failures: ["InvalidProviderToken": 2])], "settled then, with its reason")
    }

    /// A change of the app in the registry (new credentials under the same key id) probes at once.
    @Test func aChangeOfTheAppProbesAtOnce() throws {
        var d = SchedulerDriver(configuration(apps: [("app-a", 100)], maxInFlight: 1))
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        d.respond(403, "InvalidProviderToken")
        #expect(d.outstanding.isEmpty)
        d.absorb(d.scheduler.configure(DispatchApp(appID: "app-a", queueCapacity: 100, route: testRoute("key-app-a"))))
        d.advance(by: .zero)
        #expect(d.outstanding.count == 1, "probed without waiting out the hold")
        d.respond(200)
        #expect(d.replies[call] == EnqueueResult(delivered: 1))
        #expect(d.scheduler.credentialError(appID: "app-a") == nil)
    }
}
