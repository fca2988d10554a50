import ServiceLifecycle

extension APNsClient: Service {
    /// Runs until graceful shutdown (or cancellation), then closes every
    /// connection once its streams are answered. In the server's
    /// `ServiceGroup` it stops after the dispatcher has drained.
    public func run() async throws {
        try? await gracefulShutdown()
        try await shutdown().get()
        logger.info("APNs connections closed")
    }
}
