import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// The dispatcher on an event loop whose clock the test moves, behind the real service and store.
@Suite struct DispatcherServiceTests {
    let harness = DispatcherHarness()
    var loop: NIOAsyncTestingEventLoop { harness.loop }
    let callLoop = MultiThreadedEventLoopGroup.singleton.any()
    let store = InMemoryActivityStore()
    var wall: ManualClock { harness.wall }

    func dispatcher(
        _ apps: [(id: String, capacity: Int, transport: FakeTransport)], maxInFlight: Int = 100, quantum: Int = 4
    ) -> Dispatcher {
        harness.dispatcher(apps, maxInFlight: maxInFlight, quantum: quantum, pruner: StoreTokenPruner(store: store, clock: wall))
    }

    func service(_ sink: any PushSink) -> ActivityService {
        ActivityService(store: store, clock: wall, logger: Logger(label: "service-test"), sink: sink)
    }

    func context() -> CallContext {
        CallContext(
            principal: Principal(keyID: "k", apps: .all, allowedMethods: Set(LiveRelayMethod.allCases)),
            eventLoop: callLoop, deadline: nil, requestID: 1)
    }

    func register(_ service: ActivityService, app: String, tokens: Range<Int>) async throws {
        for i in tokens {
            _ = try await service.registerToken(
                RegisterTokenRequest(
                    appID: app, kind: .pushToStart, token: hex(i), environment: .production,
                    attributesType: "T", externalUserID: "", deviceID: "d\(i)"),
                context: context()
            ).get()
        }
    }

    func start(_ app: String, _ activity: String, wait: Bool = false) -> StartActivityRequest {
        StartActivityRequest(
            appID: app, activityID: activity, attributesType: "T", attributesJSON: "{}",
            contentStateJSON: #"{"s":1}"#, targets: Targets(allDevices: true), waitForDelivery: wait)
    }

    func tearDown(_ d: Dispatcher, _ transports: FakeTransport...) async throws {
        try await harness.tearDown(d, transports)
    }

    func drive(until done: () -> Bool, step: TimeAmount = .milliseconds(10), limit: Int = 2_000) async {
        await harness.drive(until: done, step: step, limit: limit)
    }

    @Test func aFullQueueIsResourceExhaustedForThatAppOnlyAndTheRefusedCallStoresNothing() async throws {
        let stuck = FakeTransport(eventLoop: loop)  // never answers: app "full" keeps its pushes unfinished
        let fine = FakeTransport(eventLoop: loop) { _, _ in .success(APNsResponse(status: 200)) }
        let d = dispatcher([
            ("full", 2, stuck),
            ("other", 2, fine),
        ])
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
            case hex(0): .success(APNsResponse(status: 200))
            case hex(1): .success(APNsResponse(status: 410, reason: "Unregistered", timestampMilliseconds: 1_700_000_000_500))
            case hex(2): .success(APNsResponse(status: 400, reason: "BadTopic"))
            case hex(3): .success(APNsResponse(status: 503, reason: "ServiceUnavailable"))
            case hex(4): attempt == 1 ? .failure(.connectionLost) : .success(APNsResponse(status: 200))
            default:
                attempt == 1
                    ? .success(APNsResponse(status: 403, reason: "ExpiredProviderToken"))
                    : .success(APNsResponse(status: 200))
            }
        }
        let d = dispatcher([("app", 100, transport)])
        let service = service(d)
        try await register(service, app: "app", tokens: 0..<6)
        #expect(store.snapshot.tokenCount == 6)

        let reply = callLoop.makePromise(of: StartActivityReply.self)
        reply.completeWith(service.startActivity(start("app", "a1", wait: true), context: context()))
        let done = NIOLockedValueBox(false)
        reply.futureResult.whenComplete { _ in done.withLockedValue { $0 = true } }
        // The call reaches the dispatcher from the call's loop: wait for its sends before moving the clock.
        #expect(await harness.settle(until: { transport.requests.count >= 6 }))
        await drive(until: { done.withLockedValue { $0 } })

        let summary = try #require(try await reply.futureResult.get().summary)
        #expect(summary.complete)
        #expect(summary.targeted == 6)
        #expect(summary.queued == 0)
        #expect(summary.delivered == 3)
        #expect(summary.pruned == 1)
        #expect(
            summary.failures == [
                FailureCount(reason: "BadTopic", count: 1),
                FailureCount(reason: "ServiceUnavailable", count: 1),
            ])
        #expect(summary.failed == 2)
        #expect(
            summary.delivered + summary.failed + summary.pruned + summary.superseded + summary.expired
                == summary.targeted)
        #expect(transport.requests.filter { $0.deviceToken == hex(3) }.count == 3, "max attempts")
        await loop.run()
        #expect(store.snapshot.tokenCount == 5, "the 410 token was pruned from the store")
        try await tearDown(d, transport)
    }

    @Test func shutdownRefusesNewCallsFailsTheQueueAndAnswersEveryWaitingCall() async throws {
        let stuck = FakeTransport(eventLoop: loop)
        let d = dispatcher([("app", 100, stuck)], maxInFlight: 2)
        let service = service(d)
        try await register(service, app: "app", tokens: 0..<5)
        let reply = service.startActivity(start("app", "a1", wait: true), context: context())
        // Not `drive`: were the clock moved past its steps before the call arrived from the
        // call's loop, the call would be enqueued after the grace period, all of it failed.
        #expect(await harness.settle(until: { stuck.waitingCount == 2 }))
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
        #expect(stuck.shutdownCalls == 0, "the APNs client closes transports, not the dispatcher")
        let summary = try #require(try await reply.get().summary)
        #expect(
            summary
                == DeliverySummary(
                    targeted: 5, delivered: 1, failed: 4,
                    failures: [FailureCount(reason: "ShuttingDown", count: 4)], complete: true))
        await loop.shutdownGracefully()
    }
}
