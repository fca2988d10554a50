import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore
import Testing

/// The per-route circuit breaker: first as a value, step by step, then inside the scheduler.
@Suite struct CircuitBreakerTests {
    /// 3 failures open it; cooldowns 1 s, 2 s, 4 s, then 4 s again; no jitter.
    static let policy = CircuitBreakerPolicy(
        failureThreshold: 3, cooldown: Backoff(initial: .seconds(1), maximum: .seconds(4), multiplier: 2, jitter: 0))

    func record(
        _ b: inout CircuitBreaker, _ outcome: CircuitBreaker.Outcome, probe: Bool = false, at now: NIODeadline
    )
        -> CircuitBreaker.Transition?
    {
        var rng = SystemRandomNumberGenerator()
        return b.record(outcome, probe: probe, now: now, using: &rng)
    }

    @Test func consecutiveFailuresOpenItAndAnythingElseResetsTheCount() {
        var b = CircuitBreaker(policy: Self.policy)
        #expect(record(&b, .failure, at: start) == nil)
        #expect(record(&b, .failure, at: start) == nil)
        #expect(record(&b, .success, at: start) == nil, "an answer from APNs resets the count")
        #expect(b.consecutiveFailures == 0)
        #expect(record(&b, .failure, at: start) == nil)
        #expect(record(&b, .neutral, at: start) == nil, "a GOAWAY neither counts nor resets")
        #expect(b.consecutiveFailures == 1)
        #expect(record(&b, .failure, at: start) == nil)
        #expect(b.allowsSend)
        #expect(record(&b, .failure, at: start) == .opened(until: start + .seconds(1)))
        #expect(b.state == .open(until: start + .seconds(1)))
        #expect(!b.allowsSend)
        #expect(b.reopensAt == start + .seconds(1))
    }

    @Test func afterTheCooldownOneProbeGoesAndItsSuccessClosesIt() {
        var b = CircuitBreaker(policy: Self.policy)
        for _ in 0..<3 { _ = record(&b, .failure, at: start) }
        #expect(b.advance(now: start + .milliseconds(999)) == nil)
        #expect(!b.allowsSend, "no send before the cooldown's end")
        #expect(b.advance(now: start + .seconds(1)) == .halfOpened)
        #expect(b.allowsSend)
        let probe = b.sent()
        #expect(probe, "the first send is the probe")
        #expect(!b.allowsSend, "one probe at a time")
        let second = b.sent()
        #expect(!second)
        #expect(record(&b, .success, probe: true, at: start + .seconds(2)) == .closed)
        #expect(b.state == .closed)
        #expect(b.openings == 0)
        #expect(b.allowsSend)
        let closedSend = b.sent()
        #expect(!closedSend, "a closed breaker's sends are not probes")
    }

    @Test func aFailedProbeReopensItWithALongerCooldownUpToTheCap() {
        var b = CircuitBreaker(policy: Self.policy)
        for _ in 0..<3 { _ = record(&b, .failure, at: start) }
        var now = start
        var cooldowns: [Int64] = []
        for _ in 0..<4 {
            now = b.reopensAt!
            #expect(b.advance(now: now) == .halfOpened)
            _ = b.sent()
            guard case let .opened(until) = record(&b, .failure, probe: true, at: now) else {
                Issue.record("a failed probe reopens the breaker")
                return
            }
            cooldowns.append((until - now).nanoseconds / 1_000_000_000)
        }
        #expect(cooldowns == [2, 4, 4, 4])
        // One success closes it, and the next opening starts from the shortest cooldown again.
        #expect(b.advance(now: b.reopensAt!) == .halfOpened)
        _ = b.sent()
        #expect(record(&b, .success, probe: true, at: now) == .closed)
        for _ in 0..<3 { _ = record(&b, .failure, at: now) }
        #expect(b.reopensAt == now + .seconds(1))
    }

    @Test func answersToSendsMadeBeforeItOpenedAreIgnored() {
        var b = CircuitBreaker(policy: Self.policy)
        for _ in 0..<3 { _ = record(&b, .failure, at: start) }
        // Sends that were on the wire when it opened answer late, either way.
        #expect(record(&b, .success, at: start) == nil)
        #expect(record(&b, .failure, at: start) == nil)
        #expect(b.state == .open(until: start + .seconds(1)), "the cooldown is neither lifted nor extended")
        _ = b.advance(now: start + .seconds(1))
        _ = b.sent()
        #expect(record(&b, .success, at: start + .seconds(1)) == nil, "only the probe decides a half-open breaker")
        #expect(record(&b, .failure, at: start + .seconds(1)) == nil)
        #expect(b.state == .halfOpen(probing: true))
        // A probe that proves nothing (its stream refused by a GOAWAY) lets another probe go.
        #expect(record(&b, .neutral, probe: true, at: start + .seconds(1)) == nil)
        #expect(b.state == .halfOpen(probing: false))
        let another = b.sent()
        #expect(another)
    }

    @Test func jitterOnlyShortensTheCooldown() {
        let jittered = CircuitBreakerPolicy(
            failureThreshold: 1, cooldown: Backoff(initial: .seconds(10), maximum: .seconds(10), multiplier: 2, jitter: 0.5))
        var seen: Set<Int64> = []
        for _ in 0..<20 {
            var b = CircuitBreaker(policy: jittered)
            _ = record(&b, .failure, at: start)
            let cooldown = b.reopensAt! - start
            #expect(cooldown >= .seconds(5) && cooldown <= .seconds(10))
            seen.insert(cooldown.nanoseconds)
        }
        #expect(seen.count > 1, "breakers that opened together do not all probe together")
    }

    // MARK: In the scheduler

    static func schedulerConfiguration() -> DispatcherConfiguration {
        var c = configuration(
            retry: RetryPolicy(initialBackoff: .milliseconds(100), maxBackoff: .milliseconds(250), jitter: 0))
        c.circuitBreaker = policy
        return c
    }

    @Test func theSchedulerSendsNothingOnAnOpenRouteThenProbesThenSendsEverything() throws {
        var d = SchedulerDriver(Self.schedulerConfiguration())
        let route = testRoute("key-app-a")
        let (call, _) = d.enqueue(try batch(tokens: (0..<5).map(token)))
        #expect(d.outstanding.count == 5)
        for _ in 0..<3 { d.respond(503, "ServiceUnavailable") }
        #expect(d.circuitChanges.map(\.transition) == [.opened(until: start + .seconds(1))])
        #expect(d.circuitChanges.first?.route == route)
        // The two still in flight answer 503 too: counted already, they change nothing.
        d.respond(503, "ServiceUnavailable")
        d.respond(503, "ServiceUnavailable")
        #expect(d.circuitChanges.count == 1)
        #expect(d.scheduler.circuitBreaker(for: route)?.state == .open(until: start + .seconds(1)))

        // The retries come due at 100 ms, but nothing is sent during the cooldown...
        let sentBefore = d.everSent.count
        while d.now < start + .seconds(1) - .milliseconds(50) {
            d.advance(by: .milliseconds(50))
            #expect(d.everSent.count == sentBefore, "sent during the cooldown at \(d.now)")
        }
        #expect(d.scheduler.unfinishedCount == 5, "queued, not failed")
        // ...and the scheduler wakes up when it ends.
        #expect(d.scheduler.nextWakeup == start + .seconds(1))
        // Another route is not held back meanwhile.
        let (other, _) = d.enqueue(try batch(app: "app-b", tokens: [token(9)]))
        #expect(d.outstanding.map(\.appID) == ["app-b"])
        d.respond(200)
        #expect(d.replies[other] == EnqueueResult(delivered: 1))

        // Half-open: one probe. It fails: open again, twice as long.
        d.advance(by: start + .seconds(1) - d.now)
        #expect(d.circuitChanges.last?.transition == .halfOpened)
        #expect(d.outstanding.count == 1, "one probe")
        d.respond(503, "ServiceUnavailable")
        #expect(d.circuitChanges.last?.transition == .opened(until: start + .seconds(3)))
        d.advance(by: .milliseconds(1_999))
        #expect(d.outstanding.isEmpty)
        d.advance(by: .milliseconds(1))
        #expect(d.outstanding.count == 1, "the second probe")
        // It succeeds: closed, and everything waiting goes at once.
        d.respond(200)
        #expect(d.circuitChanges.last?.transition == .closed)
        #expect(d.outstanding.count == 4)
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[call] == EnqueueResult(delivered: 5))
        #expect(d.circuitChanges.map(\.transition.label) == ["open", "half_open", "open", "half_open", "closed"])
    }

    @Test func queuedPushesStillExpireAtTheirSendByWhileTheRouteIsOpen() throws {
        var d = SchedulerDriver(Self.schedulerConfiguration())
        d.enqueue(try batch(activity: "x", tokens: (0..<3).map(token)), wait: false)
        for _ in 0..<3 { d.respond(503, "ServiceUnavailable") }
        let (late, _) = d.enqueue(
            try batch(activity: "y", tokens: [token(7)]), sendBy: start + .milliseconds(500), replyBy: start + .milliseconds(500))
        #expect(d.outstanding.isEmpty, "the route is open")
        d.advance(by: .milliseconds(500))
        #expect(d.replies[late] == EnqueueResult(expired: 1))
    }
}
