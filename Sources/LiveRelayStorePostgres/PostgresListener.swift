import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// `LISTEN <channel>` on a connection of its own, handing every notification's
/// payload to ``received``: the registry's change streams and the event feed's
/// cross-node wake-ups both run on one.
///
/// A notification is lost with the connection that should have carried it,
/// and a connection can die without a word (a firewall dropping idle
/// flows): so after each `LISTEN` the listener runs ``check`` once (to catch
/// up with what happened while nobody listened), and every `checkEvery` again
/// on the same connection, which proves the connection alive. A `LISTEN` not
/// answered within the statement timeout, a check that fails or times out
/// (the connection is then closed, as in ``PostgresSession``), or a
/// notification stream that ends makes it listen again on a new connection,
/// after a growing pause, until its task is cancelled.
struct PostgresListener: Sendable {
    let client: PostgresClient
    let channel: String
    /// Whose listener this is, for the log ("the registry's").
    let owner: String
    let timeout: Duration
    let checkEvery: Duration
    let logger: Logger
    /// On the listening connection: once `LISTEN` is answered (`justListened`), then every `checkEvery`.
    let check: @Sendable (_ session: PostgresSession, _ justListened: Bool) async throws -> Void
    let received: @Sendable (_ payload: String) -> Void

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
                    level: level, "\(owner) LISTEN connection failed; listening again",
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
                    try await connection.listen(on: channel) { notifications in
                        listening.withLockedValue { $0 = true }
                        try await check(session, true)
                        for try await notification in notifications {
                            received(notification.payload)
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
                        try await check(session, false)
                    }
                }
                // The first child to finish (by failing, or by cancellation) ends both.
                try await group.next()
                group.cancelAll()
            }
        }
    }
}
