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
/// Measured at open and every ``refreshInterval`` from a round trip (up to
/// ``attempts`` when they are slow): the midpoint of the node's clock around
/// the server's `clock_timestamp()`, wrong by at most half the round trip,
/// changed only when it moves by more than ``hysteresis``: a lease written under one offset and checked
/// under another differs by that change, so small wobbles of the round trip
/// must not move lease boundaries. Nor may a slow round trip (a busy node or
/// database): a sample taking longer than ``maxRoundTrip`` moves the offset
/// only when it is still more exact than the one that set it, so one stalled
/// query cannot shift every lease by its own error.
final class PostgresClock: Sendable {
    static let refreshInterval = Duration.seconds(10)
    /// Moves smaller than this keep the offset: a lease boundary moves by less than that at most.
    static let hysteresis: Int64 = 250
    /// A round trip up to this long places the database's clock within ``hysteresis``.
    static let maxRoundTrip: Int64 = 2 * hysteresis
    /// Round trips one measurement may take to get a sample within ``maxRoundTrip``.
    static let attempts = 3
    static let sql = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8"

    let clock: any WallClock
    /// The offset kept, and the shortest round trip of the samples that agreed with it.
    private let kept = NIOLockedValueBox<(offset: Int64, roundTrip: Int64)?>(nil)

    init(clock: any WallClock) { self.clock = clock }

    /// Database time minus this node's, in milliseconds (0 until measured).
    var offsetMilliseconds: Int64 { kept.withLockedValue { $0?.offset ?? 0 } }

    /// Up to ``attempts`` round trips, until one is within ``maxRoundTrip``; each
    /// sample goes through ``record(database:sentAt:answeredAt:)``. Returns the last
    /// sample's offset.
    @discardableResult
    func measure(on session: PostgresSession) async throws -> Int64 {
        var measured = offsetMilliseconds
        for _ in 0..<Self.attempts {
            let before = clock.now().milliseconds
            let rows = try await session.query(PostgresQuery(unsafeSQL: Self.sql))
            let after = clock.now().milliseconds
            guard let database = try rows.first?.decode(Int64.self) else { break }
            measured = record(database: database, sentAt: before, answeredAt: after)
            if after - before <= Self.maxRoundTrip { break }
        }
        return measured
    }

    /// Takes one sample: the database said `database` between `sentAt` and `answeredAt`
    /// (this node's clock). Returns the sample's offset; the kept one changes as described above.
    @discardableResult
    func record(database: Int64, sentAt: Int64, answeredAt: Int64) -> Int64 {
        let roundTrip = max(0, answeredAt - sentAt)
        let measured = database - (sentAt + roundTrip / 2)
        kept.withLockedValue { kept in
            guard let known = kept else {
                kept = (measured, roundTrip)
                return
            }
            if abs(measured - known.offset) <= Self.hysteresis {
                kept = (known.offset, min(known.roundTrip, roundTrip))
            } else if roundTrip <= Self.maxRoundTrip || roundTrip < known.roundTrip {
                kept = (measured, roundTrip)
            }
        }
        return measured
    }
}
