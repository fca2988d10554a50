import LiveRelayBackoff
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// How the PostgreSQL stores wait and try again after a failure: every wait
/// is a ``Backoff`` (the one rule for waits after a failure), and the tenant
/// registry and the channel store run their statements through one retry
/// loop, ``withSession(client:timeout:logger:subject:checkOpen:_:giveUp:)``.
enum PostgresRetry {
    /// Between a batch's attempts after a lost race or connection: growing
    /// with the attempt, and jittered over the whole wait so that racing
    /// nodes do not retry in lockstep.
    static let batch = Backoff(initial: .milliseconds(4), maximum: .milliseconds(128), jitter: 1)
    /// Between the attempts of a registry or channel statement.
    static let session = Backoff(initial: .milliseconds(10), maximum: .milliseconds(40), jitter: 1)
    /// Between the registry listener's connections while the database is unreachable.
    static let listener = Backoff(initial: .milliseconds(100), maximum: .milliseconds(1_600))
    /// Tries of one registry or channel statement that lost its connection, or deadlocked, before COMMIT.
    static let sessionAttempts = 4

    /// Sleeps `backoff`'s wait after `failures` consecutive failures; a
    /// cancelled task stops waiting at once.
    static func wait(_ backoff: Backoff, after failures: Int) async {
        let delay = backoff.delay(after: failures, random: Double.random(in: 0...1))
        try? await Task.sleep(for: .nanoseconds(delay.nanoseconds))
    }

    /// Runs `body` on a pooled connection with statement deadlines, again on a
    /// new connection (after a ``session`` wait, at most ``sessionAttempts``
    /// times) when it deadlocked or lost its own before COMMIT was sent, which
    /// `body` says through its second argument. `checkOpen` throws once the
    /// store is closed; `giveUp` makes the error the caller sees of one that
    /// is not tried again. `subject` names the store in log lines.
    static func withSession<T: Sendable>(
        client: PostgresClient, timeout: Duration, logger: Logger, subject: String,
        checkOpen: () throws -> Void,
        _ body: @escaping @Sendable (PostgresSession, NIOLockedValueBox<Bool>) async throws -> T,
        giveUp: (any Error, PostgresBatchRunner.Failure) -> any Error
    ) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            try checkOpen()
            let commitSent = NIOLockedValueBox(false)
            do {
                return try await client.withConnection { connection in
                    try await body(PostgresSession(connection, timeout: timeout, logger: logger), commitSent)
                }
            } catch {
                let failure = PostgresBatchRunner.classify(error, commitSent: commitSent.withLockedValue { $0 })
                switch failure {
                case .conflict where attempt < sessionAttempts, .connectionLost where attempt < sessionAttempts:
                    logger.debug(
                        "\(subject) statement retried", metadata: ["attempt": "\(attempt)", "error": "\(String(reflecting: error))"])
                    await wait(session, after: attempt)
                case .outcomeUnknown:
                    logger.warning(
                        "a \(subject) change's COMMIT got no answer: it may or may not have taken effect", metadata: ["error": "\(error)"])
                    throw giveUp(error, failure)
                default:
                    throw giveUp(error, failure)
                }
            }
        }
    }
}
