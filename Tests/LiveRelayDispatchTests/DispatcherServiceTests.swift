import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// The dispatcher on an event loop whose clock the test moves, behind the real service and store.
@Suite struct DispatcherServiceTests {
    let loop = NIOAsyncTestingEventLoop()
    let callLoop = MultiThreadedEventLoopGroup.singleton.any()
    let store = InMemoryActivityStore()
    let wall = ManualClock(UnixTime(seconds: 1_700_000_000))

    func dispatcher(_ apps: [DispatchApp], maxInFlight: Int = 100, quantum: Int = 4,
                    pruner: (any TokenPruner)? = nil) -> Dispatcher {
        Dispatcher(
            configuration: DispatcherConfiguration(
                apps: apps, maxInFlight: maxInFlight, quantum: quantum,
                retry: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0)),
            eventLoop: loop, clock: wall, pruner: pruner ?? StoreTokenPruner(store: store, clock: wall),
            logger: Logger(label: "dispatch-test"))
    }

    func service(_ sink: any PushSink) -> ActivityService {
        ActivityService(store: store, clock: wall, logger: Logger(label: "service-test"), sink: sink)
    }

    func context() -> CallContext {
        CallContext(principal: Principal(keyID: "k", appIDs: [], allowedMethods: Set(LiveRelayMethod.allCases)),
                    eventLoop: callLoop, deadline: nil, requestID: 1)
    }

    func register(_ service: ActivityService, app: String, tokens: Range<Int>) async throws {
        for i in tokens {
            _ = try await service.registerToken(
                RegisterTokenRequest(appID: app, kind: .pushToStart, token: token(i), environment: .production,
                                     attributesType: "T", externalUserID: "", deviceID: "d\(i)"),
                context: context()).get()
        }
    }

    func start(_ app: String, _ activity: String, wait: Bool = false) -> StartActivityRequest {
        StartActivityRequest(appID: app, activityID: activity, attributesType: "T", attributesJSON: "{}",
                             contentStateJSON: #"{"s":1}"#, targets: Targets(allDevices: true), waitForDelivery: wait)
    }

    /// Fails what the fakes still hold (a promise must not be dropped), stops
    /// the dispatcher and the loop.
    func tearDown(_ d: Dispatcher, _ transports: FakeTransport...) async throws {
        let stopped = d.shutdown(gracePeriod: .zero)
        for transport in transports { transport.answerAll(.failure(.shutDown)) }
        await loop.advanceTime(by: .seconds(1))
        try await stopped.get()
        try await loop.shutdownGracefully()
    }

    /// Moves the loop's clock in small steps until `done` (or gives up after `limit`).
    func drive(until done: () -> Bool, step: TimeAmount = .milliseconds(10), limit: Int = 2_000) async {
        var steps = 0
        while !done(), steps < limit {
            await loop.advanceTime(by: step)
            await Task.yield()
            steps += 1
        }
    }

    @Test func aFullQueueIsResourceExhaustedForThatAppOnlyAndTheRefusedCallStoresNothing() async throws {
        let stuck = FakeTransport(eventLoop: loop)  // never answers: app "full" keeps its pushes unfinished
        let fine = FakeTransport(eventLoop: loop) { _, _ in .success(APNsResponse(status: 200)) }
        let d = dispatcher([DispatchApp(appID: "full", queueCapacity: 2, transport: stuck),
                            DispatchApp(appID: "other", queueCapacity: 2, transport: fine)])
        let service = service(d)
        try await register(service, app: "full", tokens: 0..<3)
        try await register(service, app: "other", tokens: 0..<3)

        let first = try await service.startActivity(start("full", "a1"), context: context()).get()
        #expect(first.summary?.queued == 3, "admitted below capacity; its fan-out of 3 is taken whole")
        #expect(first.summary?.complete == false)

        do {
            _ = try await service.startActivity(start("full", "a2"), context: context()).get()
            Issue.record("expected RESOURCE_EXHAUSTED")
        } catch let error as RPCError {
            #expect(error.status == .resourceExhausted)
            #expect(error.details.reason == "QueueFull")
            #expect(error.details.retryAfterMS == 1_000)
        }
        let stored = try await store.activity(ActivityKey(appID: "full", activityID: "a2"), on: callLoop).get()
        #expect(stored == nil, "refused before the store write")

        let other = try await service.startActivity(start("other", "b1"), context: context()).get()
        #expect(other.summary?.queued == 3, "another app is unaffected")
        #expect(d.counters(appID: "full")?.refusedCalls == 1)
        #expect(stuck.waitingCount == 3)
        try await tearDown(d, stuck, fine)
    }

    @Test func aWaitingCallGetsAnExactFinalAccountUnderInjectedFaults() async throws {
        let transport = FakeTransport(eventLoop: loop) { request, attempt in
            switch request.deviceToken {
            case token(0): .success(APNsResponse(status: 200))
            case token(1): .success(APNsResponse(status: 410, reason: "Unregistered", timestampMilliseconds: 1_700_000_000_500))
            case token(2): .success(APNsResponse(status: 400, reason: "BadTopic"))
            case token(3): .success(APNsResponse(status: 503, reason: "ServiceUnavailable"))
            case token(4): attempt == 1 ? .failure(.connectionLost) : .success(APNsResponse(status: 200))
            default: attempt == 1 ? .success(APNsResponse(status: 403, reason: "ExpiredProviderToken"))
                : .success(APNsResponse(status: 200))
            }
        }
        let d = dispatcher([DispatchApp(appID: "app", queueCapacity: 100, transport: transport)])
        let service = service(d)
        try await register(service, app: "app", tokens: 0..<6)
        #expect(store.snapshot.tokenCount == 6)

        let reply = callLoop.makePromise(of: StartActivityReply.self)
        reply.completeWith(service.startActivity(start("app", "a1", wait: true), context: context()))
        let done = NIOLockedValueBox(false)
        reply.futureResult.whenComplete { _ in done.withLockedValue { $0 = true } }
        await drive(until: { done.withLockedValue { $0 } })

        let summary = try #require(try await reply.futureResult.get().summary)
        #expect(summary.complete)
        #expect(summary.targeted == 6)
        #expect(summary.queued == 0)
        #expect(summary.delivered == 3)
        #expect(summary.pruned == 1)
        #expect(summary.failures == [FailureCount(reason: "BadTopic", count: 1),
                                     FailureCount(reason: "ServiceUnavailable", count: 1)])
        #expect(summary.failed == 2)
        #expect(summary.delivered + summary.failed + summary.pruned + summary.superseded + summary.expired
                == summary.targeted)
        #expect(transport.requests.filter { $0.deviceToken == token(3) }.count == 3, "max attempts")
        await loop.run()
        #expect(store.snapshot.tokenCount == 5, "the 410 token was pruned from the store")
        try await tearDown(d, transport)
    }

    @Test func aPushNotSentBeforeItsAPNsExpirationExpires() async throws {
        let stuck = FakeTransport(eventLoop: loop)
        let d = dispatcher([DispatchApp(appID: "app", queueCapacity: 100, transport: stuck)], maxInFlight: 1)
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

    /// docs/PROTOCOL.md section 6: a waiting call is answered at its deadline,
    /// not before, and with pushes still in flight that answer is a failure
    /// (DEADLINE_EXCEEDED), not an OK reply with `complete = false`. A push not
    /// sent by the reply margin before the deadline expires unsent.
    @Test func aWaitingCallWithAPushInFlightAtItsDeadlineFailsAtTheDeadline() async throws {
        let transport = FakeTransport(eventLoop: loop) { request, _ in
            request.deviceToken == token(0) ? .success(APNsResponse(status: 200)) : nil  // token 1 is never answered
        }
        let d = dispatcher([DispatchApp(appID: "app", queueCapacity: 100, transport: transport)], maxInFlight: 1)
        let deadline = loop.now + .seconds(1)
        // The promise completes on the dispatcher's own loop, so the callback sees the virtual time of the answer.
        let call = d.enqueue(try batch(app: "app", tokens: [token(0), token(1), token(2)]),
                             options: EnqueueOptions(waitForDelivery: true, deadline: deadline), on: loop)
        let answered = NIOLockedValueBox<(at: NIODeadline, result: Result<EnqueueResult, any Error>)?>(nil)
        call.whenComplete { result in answered.withLockedValue { $0 = (self.loop.now, result) } }

        await loop.advanceTime(to: deadline - .milliseconds(51))
        #expect(transport.requests.map(\.deviceToken) == [token(0), token(1)], "token 2 waits for the one slot")
        #expect(d.counters(appID: "app")?.expired == 0)
        await loop.advanceTime(to: deadline - .milliseconds(50))
        #expect(d.counters(appID: "app")?.expired == 1, "token 2 was not sent in time: it expires unsent")
        await loop.advanceTime(to: deadline - .milliseconds(1))
        #expect(answered.withLockedValue { $0 } == nil, "no answer before the deadline")
        await loop.advanceTime(to: deadline)
        let answer = try #require(answered.withLockedValue { $0 })
        #expect(answer.at == deadline)
        guard case let .failure(error as DeliveryDeadlineExceeded) = answer.result else {
            Issue.record("expected DeliveryDeadlineExceeded, got \(answer.result)")
            return
        }
        #expect(error.account == EnqueueResult(queued: 1, delivered: 1, expired: 1))
        #expect(transport.requests.count == 2, "token 2 was never sent")
        try await tearDown(d, transport)
    }

    @Test func aQuietAppsPushGoesOutWithinOneRoundTripWhileAFloodingAppHasADeepQueue() async throws {
        let answers: @Sendable (APNsRequest, Int) -> Result<APNsResponse, APNsTransportError>? = { _, _ in
            .success(APNsResponse(status: 200))
        }
        let floodTransport = FakeTransport(eventLoop: loop, delay: .milliseconds(10), script: answers)
        let quietTransport = FakeTransport(eventLoop: loop, delay: .milliseconds(10), script: answers)
        let d = dispatcher([DispatchApp(appID: "flood", queueCapacity: 1_000_000, transport: floodTransport),
                            DispatchApp(appID: "quiet", queueCapacity: 10, transport: quietTransport)],
                           maxInFlight: 8)
        for i in 0..<10 {
            _ = d.enqueue(try batch(app: "flood", activity: "f\(i)", tokens: (0..<1_000).map { token(i * 1_000 + $0) }),
                          on: callLoop)
        }
        await loop.advanceTime(by: .milliseconds(50))
        let sentAt = loop.now
        // The reply completes on the dispatcher's own loop, so the callback reads the
        // virtual clock and the flood's backlog at the instant of delivery, however
        // slowly this thread gets to observe it.
        let quiet = d.enqueue(try batch(app: "quiet", tokens: [token(1)]), options: EnqueueOptions(waitForDelivery: true),
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

    @Test func shutdownRefusesNewCallsFailsTheQueueAndAnswersEveryWaitingCall() async throws {
        let stuck = FakeTransport(eventLoop: loop)
        let d = dispatcher([DispatchApp(appID: "app", queueCapacity: 100, transport: stuck)], maxInFlight: 2)
        let service = service(d)
        try await register(service, app: "app", tokens: 0..<5)
        let reply = service.startActivity(start("app", "a1", wait: true), context: context())
        await drive(until: { stuck.waitingCount == 2 })
        let stopped = d.shutdown(gracePeriod: .seconds(1))
        do {
            _ = try await service.startActivity(start("app", "a2"), context: context()).get()
            Issue.record("expected UNAVAILABLE")
        } catch let error as RPCError {
            #expect(error.status == .unavailable)
        }
        await loop.advanceTime(by: .seconds(1))
        #expect(d.unfinishedCount == 2, "the two in flight are awaited")
        stuck.answerNext(.success(APNsResponse(status: 200)))
        stuck.answerNext(.failure(.connectionLost))
        await loop.run()
        try await stopped.get()
        #expect(stuck.shutdownCalls == 1)
        let summary = try #require(try await reply.get().summary)
        #expect(summary == DeliverySummary(targeted: 5, delivered: 1, failed: 4,
                                           failures: [FailureCount(reason: "ShuttingDown", count: 4)], complete: true))
        try await loop.shutdownGracefully()
    }
}
