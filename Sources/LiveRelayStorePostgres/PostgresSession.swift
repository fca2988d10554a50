import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// A leased connection whose every statement has a deadline.
///
/// postgres-nio's queries cannot be cancelled, and one whose backend dies at
/// the wrong moment (terminated during COMMIT) may never complete: without a
/// deadline the batch, and every call waiting on it, would hang. A statement
/// past `timeout` throws ``DeadlineExceeded``, and the connection is closed
/// before that error reaches the caller: its state is unknown (the statement
/// may still be running, or finish later), so it must never serve another
/// statement, and a closed connection is one the pool drops instead of
/// leasing it out again.
struct PostgresSession: Sendable {
    let connection: PostgresConnection
    let timeout: Duration
    let logger: Logger
    /// Database time minus the node's (``PostgresClock``): intent lease times
    /// written to rows get it added, those read from rows subtracted.
    let clockOffset: Int64
    private let closed = NIOLockedValueBox(false)

    init(_ connection: PostgresConnection, timeout: Duration, logger: Logger, clockOffset: Int64 = 0) {
        self.connection = connection
        self.timeout = timeout
        self.logger = logger
        self.clockOffset = clockOffset
    }

    /// A node time as the database's, for a lease column or a bound compared with one.
    func databaseTime(_ milliseconds: Int64) -> Int64 {
        milliseconds == .max || milliseconds == .min ? milliseconds : milliseconds &+ clockOffset
    }

    /// A lease time read from a row, as the node's.
    func nodeTime(_ milliseconds: Int64) -> Int64 { milliseconds &- clockOffset }

    /// Whether a statement timed out and the connection was closed.
    var isAbandoned: Bool { closed.withLockedValue { $0 } }

    /// Runs `query` and collects its rows, all within the deadline: rows stream
    /// in after the statement starts, and the stream can stall as well.
    @discardableResult
    func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
        let connection = connection
        let logger = logger
        do {
            return try await withDeadline(timeout, "running \(Self.summary(query.sql))", timerLoop: connection.eventLoop) {
                try await connection.query(query, logger: logger).collect()
            }
        } catch let error as DeadlineExceeded {
            await abandon(error)
            throw error
        }
    }

    /// Closes the connection, waiting for that at most `timeout` as well (closing
    /// a channel does not hang in practice, but nothing here may wait unbounded).
    private func abandon(_ error: DeadlineExceeded) async {
        closed.withLockedValue { $0 = true }
        logger.warning("closing a PostgreSQL connection after a statement timed out", metadata: ["error": "\(error)"])
        let connection = connection
        _ = try? await withDeadline(timeout, "closing the connection") { try await connection.close() }
    }

    /// The statement's first line, shortened: enough to tell statements apart in logs.
    static func summary(_ sql: String) -> String {
        let line = sql.prefix { $0 != "\n" }
        return line.count > 60 ? "\(line.prefix(60))..." : String(line)
    }
}
