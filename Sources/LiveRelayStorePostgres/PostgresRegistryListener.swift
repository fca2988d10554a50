import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// `LISTEN liverelay_registry` on a connection of its own, feeding every
/// version it hears of (for its schema) to the registry's change streams.
///
/// A notification is lost with the connection that should have carried it,
/// and a connection can die without a word (a firewall dropping idle
/// flows): so after each `LISTEN` the listener reads the version once (what
/// changed while nobody listened), and every `checkEvery` it reads the
/// version again on the same connection, which both publishes what a lost
/// notification missed and proves the connection alive. A `LISTEN` not
/// answered within the statement timeout, a read that fails or times out
/// (the connection is then closed, as in ``PostgresSession``), or a
/// notification stream that ends makes it listen again on a new connection,
/// after a growing pause, until the registry closes (the task is cancelled).
struct PostgresRegistryListener: Sendable {
    let client: PostgresClient
    let schema: String
    let timeout: Duration
    let checkEvery: Duration
    let feed: RegistryVersionFeed
    let logger: Logger

    /// The notification stream ended without an error.
    private struct StreamEnded: Error {}

    func run() async {
        var failures = 0
        while !Task.isCancelled {
            let listening = NIOLockedValueBox(false)
            do {
                try await listenOnce(listening)
            } catch {
                guard !Task.isCancelled else { return }
                // A connection that listened before failing starts a new outage.
                failures = listening.withLockedValue { $0 } ? 1 : failures + 1
                // Once per outage at warning level; a database down for long would otherwise flood the log.
                let level: Logger.Level = failures == 1 ? .warning : .debug
                logger.log(
                    level: level, "the registry's LISTEN connection failed; listening again",
                    metadata: ["attempt": "\(failures)", "error": "\(String(reflecting: error))"])
                await PostgresRetry.wait(PostgresRetry.listener, after: failures)
            }
        }
    }

    /// Listens on one connection until it fails (throws) or the task is cancelled (returns).
    /// `listening` is set once `LISTEN` has been answered.
    private func listenOnce(_ listening: NIOLockedValueBox<Bool>) async throws {
        try await client.withConnection { connection in
            let session = PostgresSession(connection, timeout: timeout, logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await connection.listen(on: PostgresTenantRegistry.channel) { notifications in
                        listening.withLockedValue { $0 = true }
                        feed.publish(try await PostgresRegistryTables.version(on: session))
                        for try await notification in notifications {
                            if let version = PostgresTenantRegistry.version(fromPayload: notification.payload, schema: schema) {
                                feed.publish(version)
                            }
                        }
                    }
                    if !Task.isCancelled { throw StreamEnded() }
                }
                group.addTask {
                    // LISTEN is a statement too: one unanswered within the timeout closes the connection.
                    try await Task.sleep(for: timeout)
                    guard listening.withLockedValue({ $0 }) else {
                        _ = try? await withDeadline(timeout, "closing the connection") { try await connection.close() }
                        throw DeadlineExceeded(limit: timeout, what: "waiting for LISTEN")
                    }
                    while !Task.isCancelled {
                        try await Task.sleep(for: checkEvery)
                        feed.publish(try await PostgresRegistryTables.version(on: session))
                    }
                }
                // The first child to finish (by failing, or by cancellation) ends both.
                try await group.next()
                group.cancelAll()
            }
        }
    }
}
