import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import Logging
import NIOCore
import NIOEmbedded

/// A dispatcher on an event loop whose clock the test moves, with fake
/// transports: the dispatcher's own tests and the service-and-dispatcher tests
/// share it, each with its own pruner.
public struct DispatcherHarness: Sendable {
    public let loop = NIOAsyncTestingEventLoop()
    /// The wall clock that turns a push's expiry into a deadline on `loop`.
    public let wall = ManualClock(UnixTime(seconds: 1_700_000_000))

    public init() {}

    /// Retries of 3 attempts at most, 100 ms doubling to 1 s, no jitter: the
    /// harness's default, so that a push answered 503 forever ends quickly.
    public static let cappedRetries = RetryPolicy(
        maxAttempts: 3, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0)

    /// A dispatcher whose apps each have a route of their own, served by the
    /// given fake; retries as `retry` says (``cappedRetries`` by default).
    public func dispatcher(
        _ apps: [(id: String, capacity: Int, transport: FakeTransport)], maxInFlight: Int = 100, quantum: Int = 4,
        retry: RetryPolicy = cappedRetries, circuitBreaker: CircuitBreakerPolicy = CircuitBreakerPolicy(),
        maxPushLifetime: TimeAmount? = nil, enqueueSlice: Int = 8_192, pruner: any TokenPruner,
        ledger: (any DispatchLedger)? = nil
    ) -> Dispatcher {
        let transports = FakeTransports()
        for app in apps { transports.set(app.transport, for: testRoute(app.id)) }
        return Dispatcher(
            configuration: DispatcherConfiguration(
                apps: apps.map {
                    DispatchApp(appID: $0.id, queueCapacity: $0.capacity, route: testRoute($0.id), maxPushLifetime: maxPushLifetime)
                },
                maxInFlight: maxInFlight, quantum: quantum, retry: retry, circuitBreaker: circuitBreaker,
                enqueueSlice: enqueueSlice),
            transports: transports, eventLoop: loop, clock: wall, pruner: pruner,
            ledger: ledger, logger: Logger(label: "dispatch-test"))
    }

    /// Fails what the fakes still hold (a promise must not be dropped), stops
    /// the dispatcher and the loop.
    public func tearDown(_ d: Dispatcher, _ transports: [FakeTransport]) async throws {
        let stopped = d.shutdown(gracePeriod: .zero)
        for transport in transports { transport.answerAll(.failure(.shutDown)) }
        await loop.advanceTime(by: .seconds(1))
        try await stopped.get()
        await loop.shutdownGracefully()
    }

    /// Waits, without moving the loop's clock, until `done`: for work another
    /// thread (a real event loop, the store's) hands to the dispatcher, which
    /// ``drive(until:step:limit:)`` would race with its bounded steps on a
    /// loaded machine. Runs the loop's due tasks between looks; false if
    /// `timeout` of wall time passes first.
    @discardableResult
    public func settle(until done: () -> Bool, timeout: Duration = .seconds(60)) async -> Bool {
        let clock = ContinuousClock()
        let giveUp = clock.now + timeout
        while !done() {
            if clock.now >= giveUp { return false }
            await loop.run()
            try? await Task.sleep(for: .milliseconds(1))
        }
        return true
    }

    /// Moves the loop's clock in small steps until `done` (or gives up after `limit`).
    public func drive(until done: () -> Bool, step: TimeAmount = .milliseconds(10), limit: Int = 2_000) async {
        var steps = 0
        while !done(), steps < limit {
            await loop.advanceTime(by: step)
            await Task.yield()
            steps += 1
        }
    }
}
