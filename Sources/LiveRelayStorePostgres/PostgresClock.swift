import LiveRelayAPNs
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// How far the PostgreSQL server's clock is ahead of this node's (the clock
/// the rules read), so that intent leases are written and compared in the
/// database's time: nodes sharing the database then agree on when a lease
/// runs out however far apart their own clocks are (a node an hour ahead
/// would otherwise take every other node's live leases as lapsed).
///
/// Rows keep database time in `dispatch_intents.lease_until`; this node's
/// rules and overlays keep its own, and ``PostgresSession`` translates at the
/// boundary (``PostgresIntentOverlay``, ``PostgresTables/claimableIntents``).
/// Measured at open and every ``refreshInterval`` from one round trip
/// (the midpoint of the node's clock around the server's `clock_timestamp()`),
/// and changed only when it moves by more than ``hysteresis``: a lease written
/// under one offset and checked under another differs by that change, so
/// small wobbles of the round trip must not move lease boundaries.
final class PostgresClock: Sendable {
    static let refreshInterval = Duration.seconds(10)
    /// Moves smaller than this keep the offset: a lease boundary moves by less than that at most.
    static let hysteresis: Int64 = 250
    static let sql = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8"

    let clock: any WallClock
    private let offset = NIOLockedValueBox<Int64?>(nil)

    init(clock: any WallClock) { self.clock = clock }

    /// Database time minus this node's, in milliseconds (0 until measured).
    var offsetMilliseconds: Int64 { offset.withLockedValue { $0 ?? 0 } }

    /// One round trip: updates the offset (see ``hysteresis``) and returns the measured one.
    @discardableResult
    func measure(on session: PostgresSession) async throws -> Int64 {
        let before = clock.now().milliseconds
        let rows = try await session.query(PostgresQuery(unsafeSQL: Self.sql))
        let after = clock.now().milliseconds
        guard let database = try rows.first?.decode(Int64.self) else { return offsetMilliseconds }
        let measured = database - (before + (after - before) / 2)
        offset.withLockedValue { current in
            if let known = current, abs(measured - known) <= Self.hysteresis { return }
            current = measured
        }
        return measured
    }
}
