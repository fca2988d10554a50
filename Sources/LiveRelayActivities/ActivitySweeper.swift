import NIOCore
import ServiceLifecycle

/// Runs the expiry sweep (``ActivityService/sweep(limit:on:)``) every
/// `interval` until graceful shutdown. Expiry is also enforced lazily by the
/// rules, so the interval only bounds how long dead tokens and records linger.
/// In the server's `ServiceGroup` it stops right after the RPC server, before
/// the store closes under it.
public struct ActivitySweeper: Service {
    private let service: ActivityService
    private let interval: TimeAmount
    private let eventLoop: any EventLoop

    public init(service: ActivityService, every interval: TimeAmount = .seconds(60), on eventLoop: any EventLoop) {
        self.service = service
        self.interval = interval
        self.eventLoop = eventLoop
    }

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    try await Task.sleep(nanoseconds: UInt64(interval.nanoseconds))
                    // A failed sweep is logged by the service; the next one tries again.
                    _ = try? await service.sweep(on: eventLoop).get()
                }
            }
        } catch is CancellationError {
            // Graceful shutdown: the sweep in progress, if any, has finished.
        }
    }
}
