import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// The dispatcher on an event loop whose clock the test moves, with fake transports and no store.
@Suite struct DispatcherTests {
    let harness = DispatcherHarness()
    var loop: NIOAsyncTestingEventLoop { harness.loop }
    let callLoop = MultiThreadedEventLoopGroup.singleton.any()
    var wall: ManualClock { harness.wall }

    func dispatcher(
        _ apps: [(id: String, capacity: Int, transport: FakeTransport)], maxInFlight: Int = 100, quantum: Int = 4
    ) -> Dispatcher {
        harness.dispatcher(apps, maxInFlight: maxInFlight, quantum: quantum, pruner: RecordingPruner())
    }

    func tearDown(_ d: Dispatcher, _ transports: FakeTransport...) async throws {
        try await harness.tearDown(d, transports)
    }

    func drive(until done: () -> Bool, step: TimeAmount = .milliseconds(10), limit: Int = 2_000) async {
        await harness.drive(until: done, step: step, limit: limit)
    }

    @Test func aPushNotSentBeforeItsAPNsExpirationExpires() async throws {
        let stuck = FakeTransport(eventLoop: loop)
        let d = dispatcher([("app", 100, stuck)], maxInFlight: 1)
        let blocker = d.enqueue(try batch(app: "app", activity: "x", tokens: [token(0)]), on: callLoop)
        #expect(try await blocker.get() == EnqueueResult(queued: 1))
        let expiring = try batch(app: "app", tokens: [token(1)], expiration: wall.now().seconds + 2)
        let result = d.enqueue(expiring, options: EnqueueOptions(waitForDelivery: true), on: callLoop)
        await loop.advanceTime(by: .milliseconds(1_999))
        #expect(d.counters(appID: "app")?.expired == 0)
        await loop.advanceTime(by: .milliseconds(1))
        #expect(try await result.get() == EnqueueResult(expired: 1))
        #expect(stuck.requests.count == 1, "never sent")
        try await tearDown(d, stuck)
    }

    @Test func aQuietAppsPushGoesOutWithinOneRoundTripWhileAFloodingAppHasADeepQueue() async throws {
        let answers: @Sendable (APNsRequest, Int) -> Result<APNsResponse, APNsTransportError>? = { _, _ in
            .success(APNsResponse(status: 200))
        }
        let floodTransport = FakeTransport(eventLoop: loop, delay: .milliseconds(10), script: answers)
        let quietTransport = FakeTransport(eventLoop: loop, delay: .milliseconds(10), script: answers)
        let d = dispatcher(
            [
                ("flood", 1_000_000, floodTransport),
                ("quiet", 10, quietTransport),
            ],
            maxInFlight: 8)
        for i in 0..<10 {
            _ = d.enqueue(
                try batch(app: "flood", activity: "f\(i)", tokens: (0..<1_000).map { token(i * 1_000 + $0) }),
                on: callLoop)
        }
        await loop.advanceTime(by: .milliseconds(50))
        let sentAt = loop.now
        // The reply completes on the dispatcher's own loop, so the callback reads the
        // virtual clock and the flood's backlog at the instant of delivery, however
        // slowly this thread gets to observe it.
        let quiet = d.enqueue(
            try batch(app: "quiet", tokens: [token(1)]), options: EnqueueOptions(waitForDelivery: true),
            on: loop)
        let observed = NIOLockedValueBox<(at: NIODeadline, floodUnfinished: Int)?>(nil)
        quiet.whenComplete { _ in
            let unfinished = d.counters(appID: "flood")?.unfinished ?? -1
            observed.withLockedValue { $0 = (self.loop.now, unfinished) }
        }
        await drive(until: { observed.withLockedValue { $0 } != nil }, step: .milliseconds(1))
        #expect(try await quiet.get() == EnqueueResult(delivered: 1))
        let delivery = try #require(observed.withLockedValue { $0 })
        #expect(delivery.at - sentAt <= .milliseconds(40), "a freed slot, then one round trip (the flood needs 12 s)")
        #expect(delivery.floodUnfinished > 9_900)
        try await tearDown(d, floodTransport, quietTransport)
    }

    /// docs/PROTOCOL.md section 6: a waiting call with pushes still in flight is
    /// answered with a failure (DEADLINE_EXCEEDED with its account), not an OK reply
    /// with `complete = false`, half the reply margin before its deadline: ahead of
    /// the connection's own plain DEADLINE_EXCEEDED at the deadline, which would lose
    /// the account. A push not sent by the reply margin before the deadline expires unsent.
    @Test func aWaitingCallWithAPushInFlightIsAnsweredJustBeforeItsDeadline() async throws {
        let transport = FakeTransport(eventLoop: loop) { request, _ in
            request.deviceToken == token(0) ? .success(APNsResponse(status: 200)) : nil  // token 1 is never answered
        }
        let d = dispatcher([("app", 100, transport)], maxInFlight: 1)
        let deadline = loop.now + .seconds(1)
        // The promise completes on the dispatcher's own loop, so the callback sees the virtual time of the answer.
        let call = d.enqueue(
            try batch(app: "app", tokens: [token(0), token(1), token(2)]),
            options: EnqueueOptions(waitForDelivery: true, deadline: deadline), on: loop)
        let answered = NIOLockedValueBox<(at: NIODeadline, result: Result<EnqueueResult, any Error>)?>(nil)
        call.whenComplete { result in answered.withLockedValue { $0 = (self.loop.now, result) } }

        await loop.advanceTime(to: deadline - .milliseconds(51))
        #expect(transport.requests.map(\.deviceToken) == [token(0), token(1)], "token 2 waits for the one slot")
        #expect(d.counters(appID: "app")?.expired == 0)
        await loop.advanceTime(to: deadline - .milliseconds(50))
        #expect(d.counters(appID: "app")?.expired == 1, "token 2 was not sent in time: it expires unsent")
        await loop.advanceTime(to: deadline - .milliseconds(26))
        #expect(answered.withLockedValue { $0 } == nil, "no answer before half the margin")
        await loop.advanceTime(to: deadline - .milliseconds(25))
        let answer = try #require(answered.withLockedValue { $0 })
        #expect(answer.at == deadline - .milliseconds(25), "before the connection's own answer at the deadline")
        guard case let .failure(error as DeliveryDeadlineExceeded) = answer.result else {
            Issue.record("expected DeliveryDeadlineExceeded, got \(answer.result)")
            return
        }
        #expect(error.account == EnqueueResult(queued: 1, delivered: 1, expired: 1))
        #expect(transport.requests.count == 2, "token 2 was never sent")
        try await tearDown(d, transport)
    }

    @Test func aFanOutTakenInSlicesIsDeliveredWholeAndAnsweredOnce() async throws {
        let transport = FakeTransport(eventLoop: loop) { _, _ in .success(APNsResponse(status: 200)) }
        let d = harness.dispatcher([("app", 1_000, transport)], maxInFlight: 16, enqueueSlice: 8, pruner: RecordingPruner())
        let tokens = (0..<50).map(token)
        let waiting = d.enqueue(
            try batch(app: "app", tokens: tokens), options: EnqueueOptions(waitForDelivery: true), on: callLoop)
        let fireAndForget = d.enqueue(try batch(app: "app", activity: "act-2", tokens: tokens), on: callLoop)
        await drive(until: { d.counters(appID: "app")?.delivered == 100 })
        #expect(try await waiting.get() == EnqueueResult(delivered: 50))
        #expect(try await fireAndForget.get() == EnqueueResult(queued: 50), "answered after its first slice")
        let sent = Dictionary(grouping: transport.requests, by: \.deviceToken).mapValues(\.count)
        #expect(sent == Dictionary(uniqueKeysWithValues: tokens.map { ($0, 2) }), "each token once per call")
        #expect(d.unfinishedCount == 0)
        try await tearDown(d, transport)
    }

    // MARK: A push's life is the push's

    /// Retries without a cap (100 ms doubling to 1 s, no jitter) and a breaker
    /// that opens after 3 failures for 1 s, 2 s, then 4 s at most.
    func unboundedDispatcher(_ transport: FakeTransport) -> Dispatcher {
        harness.dispatcher(
            [("app", 100, transport)],
            retry: RetryPolicy(initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0),
            circuitBreaker: CircuitBreakerPolicy(
                failureThreshold: 3, cooldown: Backoff(initial: .seconds(1), maximum: .seconds(4), multiplier: 2, jitter: 0)),
            pruner: RecordingPruner())
    }

    /// A transport that answers 503 until `until`, then 200, and notes when each request came.
    func outage(until: NIODeadline) -> (FakeTransport, NIOLockedValueBox<[NIODeadline]>) {
        let loop = self.loop
        let sentAt = NIOLockedValueBox<[NIODeadline]>([])
        let transport = FakeTransport(eventLoop: loop) { _, _ in
            let now = loop.now
            sentAt.withLockedValue { $0.append(now) }
            return now < until ? .success(APNsResponse(status: 503, reason: "ServiceUnavailable")) : .success(APNsResponse(status: 200))
        }
        return (transport, sentAt)
    }

    @Test func aFireAndForgetPushOutlivesItsCallsDeadlineAndIsDeliveredAfterA20SecondOutage() async throws {
        let begin = loop.now
        let (transport, sentAt) = outage(until: begin + .seconds(20))
        let d = unboundedDispatcher(transport)
        // The CLI's 10 s deadline, on a call that does not wait: answered "queued" at once.
        let deadline = begin + .seconds(10)
        let queued = d.enqueue(try batch(app: "app", tokens: [token(1)]), options: EnqueueOptions(deadline: deadline), on: callLoop)
        #expect(try await queued.get() == EnqueueResult(queued: 1))
        await drive(until: { d.counters(appID: "app")?.delivered == 1 }, step: .milliseconds(100), limit: 400)
        let counters = try #require(d.counters(appID: "app"))
        #expect(counters.delivered == 1)
        #expect(counters.expired == 0, "the call's deadline did not end the push")
        let sends = sentAt.withLockedValue { $0 }
        #expect(sends.contains { $0 > deadline }, "tried after the call's deadline")
        // The breaker opened after 3 failures: probes at 1.3, 3.3, 7.3, 11.3, 15.3, 19.3 and 23.3 s
        // (cooldowns 1, 2, 4, 4... s), not a retry every second.
        #expect(sends.count == 10)
        let delivered = try #require(sends.last)
        #expect(delivered >= begin + .seconds(20) && delivered <= begin + .seconds(24), "within a cooldown of the outage's end")
        try await tearDown(d, transport)
    }

    @Test func aWaitingCallsDeadlineStillBoundsItsPush() async throws {
        let begin = loop.now
        let (transport, sentAt) = outage(until: begin + .seconds(20))
        let d = unboundedDispatcher(transport)
        let deadline = begin + .seconds(10)
        let call = d.enqueue(
            try batch(app: "app", tokens: [token(1)]), options: EnqueueOptions(waitForDelivery: true, deadline: deadline), on: loop)
        let answered = NIOLockedValueBox<(at: NIODeadline, result: Result<EnqueueResult, any Error>)?>(nil)
        call.whenComplete { result in answered.withLockedValue { $0 = (self.loop.now, result) } }
        await drive(until: { answered.withLockedValue { $0 } != nil }, step: .milliseconds(100), limit: 200)
        let answer = try #require(answered.withLockedValue { $0 })
        #expect(try answer.result.get() == EnqueueResult(expired: 1), "the caller gets its account")
        #expect(answer.at <= deadline)
        #expect(sentAt.withLockedValue { $0 }.allSatisfy { $0 < deadline - .milliseconds(50) }, "never sent after its send-by")
        #expect(d.counters(appID: "app")?.expired == 1)
        try await tearDown(d, transport)
    }

    @Test func aFireAndForgetPushEndsAtItsAppsMaximumLifetime() async throws {
        let begin = loop.now
        let (transport, sentAt) = outage(until: begin + .seconds(20))
        let d = harness.dispatcher(
            [("app", 100, transport)], retry: RetryPolicy(initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0),
            maxPushLifetime: .seconds(3), pruner: RecordingPruner())
        _ = d.enqueue(try batch(app: "app", tokens: [token(1)]), options: EnqueueOptions(deadline: begin + .seconds(1)), on: callLoop)
        await drive(until: { d.counters(appID: "app")?.expired == 1 }, step: .milliseconds(100), limit: 100)
        #expect(d.counters(appID: "app")?.expired == 1)
        #expect(sentAt.withLockedValue { $0 }.contains { $0 > begin + .seconds(1) }, "the call's deadline did not end it")
        #expect(sentAt.withLockedValue { $0 }.allSatisfy { $0 < begin + .seconds(3) })
        try await tearDown(d, transport)
    }
}
