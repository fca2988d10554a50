import Logging
import ServiceLifecycle

/// A store as a member of the server's `ServiceGroup`: it stays open until
/// graceful shutdown and closes then. Listed first, it stops last, after
/// everything that writes to it (the RPC server, the sweeper, the
/// dispatcher's pruning) has stopped.
///
/// It also watches for a failure the store cannot recover from while the
/// process lives (``ActivityStore/permanentFailure``): it then closes the
/// store and throws, which shuts the group down gracefully (a short drain)
/// and makes the process exit non-zero for its supervisor to restart it,
/// instead of serving on with every call failing.
public struct ActivityStoreService: Service {
    public let store: any ActivityStore
    private let logger: Logger
    private let checkEvery: Duration

    public init(_ store: any ActivityStore, logger: Logger, checkEvery: Duration = .seconds(1)) {
        self.store = store
        self.logger = logger
        self.checkEvery = checkEvery
    }

    public func run() async throws {
        let failure: String? = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                try? await gracefulShutdown()
                return nil
            }
            group.addTask { [store, checkEvery] in
                while !Task.isCancelled {
                    if let failure = store.permanentFailure { return failure }
                    try? await Task.sleep(for: checkEvery)
                }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if let failure {
            logger.critical(
                "the store cannot work until the process restarts: stopping so that the supervisor restarts it",
                metadata: ["error": "\(failure)"])
            try? await store.close()
            throw StoreFailedPermanently(reason: failure)
        }
        try await store.close()
        logger.info("store closed")
    }
}

/// The store failed in a way only a restart recovers (``ActivityStore/permanentFailure``).
public struct StoreFailedPermanently: Error, CustomStringConvertible {
    public var reason: String
    public var description: String { "the store cannot work until the process restarts: \(reason)" }
}
