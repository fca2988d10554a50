import Logging
import ServiceLifecycle

/// A store as a member of the server's `ServiceGroup`: it stays open until
/// graceful shutdown and closes then. Listed first, it stops last, after
/// everything that writes to it (the RPC server, the sweeper, the
/// dispatcher's pruning) has stopped.
public struct ActivityStoreService: Service {
    public let store: any ActivityStore
    private let logger: Logger

    public init(_ store: any ActivityStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public func run() async throws {
        try? await gracefulShutdown()
        try await store.close()
        logger.info("store closed")
    }
}
