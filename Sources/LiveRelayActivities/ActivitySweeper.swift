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
public struct ActivitySweeper: Service {
    private let service: ActivityService
    private let interval: TimeAmount
    private let limit: Int?
    private let eventLoop: any EventLoop

    public init(
        service: ActivityService, every interval: TimeAmount = .seconds(60), limit: Int? = nil, on eventLoop: any EventLoop
    ) {
        self.service = service
        self.interval = interval
        self.limit = limit
        self.eventLoop = eventLoop
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
        var passes = 0
        while let report = try? await service.sweep(limit: limit, on: eventLoop).get(), !report.isEmpty {
            passes += 1
            try Task.checkCancellation()
        }
        return passes
    }
}
