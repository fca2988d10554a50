import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore
import Testing

/// A push's life is the push's: retried through retryable
/// answers until its send-by time, never sent after it, and with no fixed
/// number of attempts unless one is configured.
@Suite struct PushLifetimeTests {
    static let unbounded = RetryPolicy(initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0)

    @Test func retriesAreUnboundedByDefault() {
        #expect(RetryPolicy().maxAttempts == nil)
        #expect(RetryPolicy(maxAttempts: 0, initialBackoff: .seconds(1)).maxAttempts == 1)
    }

    /// Answers 503 to every send until the push is final; returns when each send went out.
    static func failUntilFinal(_ d: inout SchedulerDriver, call: CallID) throws -> [NIODeadline] {
        var sentAt: [NIODeadline] = []
        var steps = 0
        while d.replies[call] == nil {
            steps += 1
            try #require(steps < 1_000)
            if d.outstanding.isEmpty {
                d.advance(by: try #require(d.scheduler.nextWakeup) - d.now)
            } else {
                sentAt.append(d.now)
                d.respond(503, "ServiceUnavailable")
            }
        }
        return sentAt
    }

    @Test func aPushIsRetriedUntilItsAppsMaximumLifetimeThenExpiresNeverSentAfterIt() throws {
        var c = configuration(apps: [], retry: Self.unbounded)
        c.apps = [DispatchApp(appID: "app-a", queueCapacity: 100, route: testRoute("key-a"), maxPushLifetime: .seconds(5))]
        var d = SchedulerDriver(c)
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        let sentAt = try Self.failUntilFinal(&d, call: call)
        #expect(d.replies[call] == EnqueueResult(expired: 1))
        // 0, 0.1, 0.3, 0.7, 1.5, 2.5, 3.5, 4.5: far more than the old five attempts.
        #expect(sentAt.count == 8)
        #expect(sentAt.allSatisfy { $0 < start + .seconds(5) })
        // The last retry would have been due at 5.5 s: the push expired when its last answer came, not later.
        #expect(d.now == start + .milliseconds(4_500))
        #expect(d.scheduler.counters(appID: "app-a")?.expired == 1)
        #expect(d.scheduler.counters(appID: "app-a")?.failed == 0)
    }

    @Test func theBatchsExpiryBoundsRetriesTooAndTheEarlierLimitWins() throws {
        var c = configuration(apps: [], retry: Self.unbounded)
        c.apps = [DispatchApp(appID: "app-a", queueCapacity: 100, route: testRoute("key-a"), maxPushLifetime: .seconds(60))]
        var d = SchedulerDriver(c)
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]), sendBy: start + .seconds(2))
        let sentAt = try Self.failUntilFinal(&d, call: call)
        #expect(d.replies[call] == EnqueueResult(expired: 1))
        #expect(sentAt.allSatisfy { $0 < start + .seconds(2) })
        #expect(sentAt.count == 5, "0, 0.1, 0.3, 0.7, 1.5")
    }

    @Test func aConfiguredCapOnAttemptsStillFailsThePush() throws {
        var d = SchedulerDriver(
            configuration(retry: RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0)))
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        let sentAt = try Self.failUntilFinal(&d, call: call)
        #expect(sentAt.count == 2)
        #expect(d.replies[call] == EnqueueResult(failures: ["ServiceUnavailable": 1]))
    }

    @Test func aSecondExpiredProviderTokenInARowBacksOff() throws {
        var d = SchedulerDriver(configuration(retry: Self.unbounded))
        let (call, _) = d.enqueue(try batch(tokens: [token(1)]))
        d.respond(403, "ExpiredProviderToken")
        #expect(d.outstanding.count == 1, "the first is retried at once with a new token")
        d.respond(403, "ExpiredProviderToken")
        #expect(d.outstanding.isEmpty, "the second waits: a token source that keeps failing must not spin")
        d.advance(by: .milliseconds(200))
        #expect(d.outstanding.count == 1)
        d.respond(200)
        #expect(d.replies[call] == EnqueueResult(delivered: 1))
    }
}
