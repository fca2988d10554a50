import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import LiveRelayTestSupport
import Logging
import NIOCore
import PostgresNIO
import Testing

@testable import LiveRelayStorePostgres

/// Statements that get no answer: the store must fail the calls waiting on
/// them within its statement timeout, never hang, and keep working on fresh
/// connections. A second session holds a lock so that one chosen statement
/// blocks for as long as the test wants, which is what a dead backend looks
/// like to the client, without any timing luck.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)), .timeLimit(.minutes(3)))
struct PostgresTimeoutTests {
    static let logger = Logger(label: "test")

    static func store(schema: String, statementTimeout: Duration) async throws -> PostgresActivityStore {
        var configuration = try PostgresTestDatabase.configuration(schema: schema)
        configuration.lanes = 1
        configuration.maxConnections = 3
        configuration.statementTimeout = statementTimeout
        return try await PostgresActivityStore(configuration: configuration)
    }

    /// The error `future` failed with; nil if it succeeded.
    static func failure<T: Sendable>(_ future: EventLoopFuture<T>) async -> (any Error)? {
        do {
            _ = try await future.get()
            return nil
        } catch {
            return error
        }
    }

    static func isOutcomeUnknown(_ error: (any Error)?) -> Bool {
        if case .outcomeUnknown? = error as? ActivityStoreError { true } else { false }
    }

    static func isUnavailable(_ error: (any Error)?) -> Bool {
        if case .unavailable? = error as? ActivityStoreError { true } else { false }
    }

    @Test func aCommitThatGetsNoAnswerFailsWithAnUnknownOutcomeAndLaterCallsUseFreshConnections() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            // Three seconds: every statement but the held COMMIT must finish within it while the
            // whole test command runs beside this test on two cores.
            let store = try await Self.store(schema: schema, statementTimeout: .seconds(3))
            let loop = StoreBehaviourSuite.group.any()
            let lock = Int64.random(in: 1...Int64.max)
            // A deferred constraint trigger runs inside COMMIT: for the device "stuck" it waits for an
            // advisory lock the test holds, so that the batch's COMMIT, and nothing before it, hangs.
            try await PostgresTestDatabase.sql(
                [
                    """
                    CREATE FUNCTION commit_gate() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF NEW.device_id = 'stuck' THEN PERFORM pg_advisory_xact_lock(\(lock)); END IF;
                        RETURN NULL;
                    END $$
                    """,
                    """
                    CREATE CONSTRAINT TRIGGER commit_gate AFTER INSERT OR UPDATE ON tokens
                    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION commit_gate()
                    """,
                ], schema: schema)
            try await PostgresTestDatabase.withSession(schema: schema) { holder in
                try await holder.query("SELECT pg_advisory_lock(\(lock))", logger: Self.logger)
                let started = ContinuousClock.now
                let error = try await withTimeout(.seconds(120)) {
                    await Self.failure(store.apply(RegisterToken(pushToStart(hex(1), device: "stuck")), now: t0, on: loop))
                }
                #expect(Self.isOutcomeUnknown(error), "\(String(describing: error))")
                #expect(ContinuousClock.now - started >= .seconds(3))
                #expect(store.statistics.timeouts == 1)
                // The store gave up on the COMMIT, not on an earlier statement: its backend still waits in it.
                let waiting = try await PostgresTestDatabase.sql(
                    [
                        """
                        SELECT count(*)::text FROM pg_stat_activity WHERE application_name = 'liverelay-test-\(schema)'
                        AND query = 'COMMIT' AND state = 'active' AND wait_event_type = 'Lock'
                        """
                    ], schema: schema)
                #expect(waiting == [["1"]])
                // While it still hangs, another call commits: the pool dropped the closed connection
                // instead of lending it again (a lane that met it would count a reconnect).
                let reconnects = store.statistics.reconnects
                let other = try await withTimeout(.seconds(120)) {
                    try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(2), device: "free")))
                }
                #expect(other.result == .created)
                #expect(store.statistics.reconnects == reconnects)
                try await holder.query("SELECT pg_advisory_unlock(\(lock))", logger: Self.logger)
            }
            // Unknown meant unknown: once unblocked, the abandoned backend finished the COMMIT.
            try await eventually("the abandoned COMMIT to finish") {
                (try? await store.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get()) != nil
            }
            // Resending the call, as a caller told "may or may not have taken effect" does, is harmless.
            #expect(try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1), device: "stuck"))).result != .created)
            let tokens = try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get()
            #expect(Set(tokens.map(\.hex)) == [hex(1), hex(2)])
            try await store.close()
        }
    }

    @Test func statementsBlockedBeforeCommitAreRetriedOnNewConnectionsThenFailAsUnavailable() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            // Three seconds, not less: after the lock is gone the store must work within its timeout,
            // and the whole test command runs beside this test on two cores.
            let store = try await Self.store(schema: schema, statementTimeout: .seconds(3))
            let loop = StoreBehaviourSuite.group.any()
            try await PostgresTestDatabase.withSession(schema: schema) { holder in
                // Every statement that touches tokens now waits, the batch's first read included.
                try await holder.query("BEGIN", logger: Self.logger)
                try await holder.query("LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE", logger: Self.logger)
                let error = try await withTimeout(.seconds(120)) {
                    await Self.failure(store.apply(RegisterToken(pushToStart(hex(1), device: "blocked")), now: t0, on: loop))
                }
                // COMMIT was never sent, so nothing can have committed: a plain failure, not an unknown outcome.
                #expect(Self.isUnavailable(error), "\(String(describing: error))")
                #expect(store.statistics.timeouts == 4, "the first attempt and three on new connections")
                #expect(store.statistics.reconnects == 3)
                // Reads outside mutations have the same deadline.
                let read = try await withTimeout(.seconds(120)) {
                    await Self.failure(store.token(TokenKey(appID: appID, hex: hex(1)), on: loop))
                }
                #expect(Self.isUnavailable(read), "\(String(describing: read))")
                try await holder.query("ROLLBACK", logger: Self.logger)
            }
            #expect(try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(2), device: "free"))).result == .created)
            #expect(try await store.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get() == nil)
            try await store.close()
        }
    }
}
