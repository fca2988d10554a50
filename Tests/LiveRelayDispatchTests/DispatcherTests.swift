import LiveRelayAPNs
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
    let loop = NIOAsyncTestingEventLoop()
    let callLoop = MultiThreadedEventLoopGroup.singleton.any()
    let wall = ManualClock(UnixTime(seconds: 1_700_000_000))

    /// A dispatcher whose apps each have a route of their own, served by the given fake.
    func dispatcher(_ apps: [(id: String, capacity: Int, transport: FakeTransport)], maxInFlight: Int = 100,
                    quantum: Int = 4) -> Dispatcher {
        let transports = FakeTransports()
        for app in apps { transports.set(app.transport, for: testRoute(app.id)) }
        return Dispatcher(
            configuration: DispatcherConfiguration(
                apps: apps.map { DispatchApp(appID: $0.id, queueCapacity: $0.capacity, route: testRoute($0.id)) },
                maxInFlight: maxInFlight, quantum: quantum,
                retry: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0)),
            transports: transports, eventLoop: loop, clock: wall, pruner: RecordingPruner(),
            logger: Logger(label: "dispatch-test"))
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
        let d = dispatcher([("flood", 1_000_000, floodTransport),
                            ("quiet", 10, quietTransport)],
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
}
