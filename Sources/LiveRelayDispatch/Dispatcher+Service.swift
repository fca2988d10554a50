import ServiceLifecycle

extension Dispatcher: Service {
    /// Runs until graceful shutdown (or cancellation), then drains: what is
    /// queued is sent for up to ``DispatcherConfiguration/drainGracePeriod``,
    /// the rest fails `ShuttingDown`, and every waiting call gets its account.
    /// In the server's `ServiceGroup` it stops after the RPC server (no call
    /// can add pushes any more) and before the APNs client closes the connections.
    public func run() async throws {
        try? await gracefulShutdown()
        try await shutdown(gracePeriod: drainGracePeriod).get()
    }
}
