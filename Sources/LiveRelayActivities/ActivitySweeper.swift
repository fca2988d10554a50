import LiveRelayStore
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// Runs the expiry sweep (``ActivityService/sweep(limit:on:)``) every
/// `interval` until graceful shutdown, and at each turn again and again while a
/// pass finds work: one pass is capped (`limit`, by default the store's
/// `sweepLimit`: one store transaction), so a backlog larger than that clears
/// at once instead of one pass per interval.
/// Expiry is also enforced lazily by the rules, so the interval only bounds how
/// long dead tokens and records linger.
/// In the server's `ServiceGroup` it stops right after the RPC server, before
/// the store closes under it.
/// Each turn also deletes what the event feeds' retention no longer keeps.
/// It sweeps at its ``SweepClock``'s time, so a forward jump of the wall clock
/// does not expire every live activity at once; while it holds back it logs
/// an error each turn and reports the gap in `liverelay_sweep_clock_held_back_seconds`.
public struct ActivitySweeper: Service {
    private let service: ActivityService
    private let interval: TimeAmount
    private let limit: Int?
    private let eventRetention: EventRetention
    private let eventLoop: any EventLoop
    private let monotonic: @Sendable () -> NIODeadline
    private let sweepClock = NIOLockedValueBox(SweepClock())
    private let heldBack = Gauge(label: "liverelay_sweep_clock_held_back_seconds")
    private let logger: Logger

    /// - Parameter monotonic: the monotonic clock the wall clock is checked against (tests move it).
    public init(
        service: ActivityService, every interval: TimeAmount = .seconds(60), limit: Int? = nil,
        eventRetention: EventRetention = EventRetention(), on eventLoop: any EventLoop,
        monotonic: @escaping @Sendable () -> NIODeadline = { .now() },
        logger: Logger = Logger(label: "liverelay.sweep")
    ) {
        self.service = service
        self.interval = interval
        self.limit = limit
        self.eventRetention = eventRetention
        self.eventLoop = eventLoop
        self.monotonic = monotonic
        self.logger = logger
    }

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    try await Task.sleep(nanoseconds: UInt64(interval.nanoseconds))
                    try await sweepUntilClear()
                }
            }
        } catch is CancellationError {
            // Graceful shutdown: the sweep in progress, if any, has finished.
        }
    }

    /// One turn: passes of at most `limit` until one finds nothing (or fails:
    /// the service logs it and the next turn tries again). Returns the passes that found work.
    @discardableResult
    public func sweepUntilClear() async throws -> Int {
        let wall = service.clock.now()
        let monotonicMilliseconds = monotonic().uptimeNanoseconds / 1_000_000
        let (now, held) = sweepClock.withLockedValue {
            $0.sweepTime(wall: wall, monotonicMilliseconds: Int64(truncatingIfNeeded: monotonicMilliseconds))
        }
        heldBack.record(Double(held?.milliseconds ?? 0) / 1000)
        if let held {
            logger.error(
                "the wall clock jumped forward: the expiry sweep holds back (fix the clock, or restart to accept it)",
                metadata: ["ahead_seconds": "\(held.milliseconds / 1000)", "sweeping_at_ms": "\(now.milliseconds)"])
        }
        var passes = 0
        while let report = try? await service.sweep(limit: limit, at: now, on: eventLoop).get(), !report.isEmpty {
            passes += 1
            try Task.checkCancellation()
        }
        do {
            let trimmed = try await service.store.trimEvents(eventRetention, now: now, on: eventLoop).get()
            if trimmed > 0 { logger.debug("event feeds trimmed", metadata: ["events": "\(trimmed)"]) }
        } catch {
            logger.warning("could not trim the event feeds; the next turn tries again", metadata: ["error": "\(error)"])
        }
        return passes
    }
}
