import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

@testable import LiveRelayStorePostgres

/// Intent leases on PostgreSQL are kept in the database server's time, so two
/// nodes whose clocks are an hour apart still agree on when a lease runs out.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)))
struct PostgresClockTests {
    /// This machine's clock, moved.
    struct Skewed: WallClock {
        var by: UnixTime.Duration
        func now() -> UnixTime { SystemClock().now() + by }
    }

    @Test func aNodeWhoseClockIsAnHourAheadDoesNotTakeAnotherNodesLiveLease() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let configuration = try PostgresTestDatabase.configuration(schema: schema)
            let a = try await PostgresActivityStore(configuration: configuration)
            let b = try await PostgresActivityStore(configuration: configuration, clock: Skewed(by: .hours(1)))
            #expect(abs(a.databaseClock.offsetMilliseconds) < 1_000, "same machine, same clock")
            #expect(abs(b.databaseClock.offsetMilliseconds + 3_600_000) < 1_000, "the database is an hour behind node B")

            let now = SystemClock().now()
            try await StoreBehaviourSuite.apply(a, StartActivity(start(), app: app), now: now)
            try await StoreBehaviourSuite.apply(a, RegisterToken(updateToken(hex(1))), now: now)
            let accepted = try #require(
                try await StoreBehaviourSuite.apply(
                    a, ChangeActivity(update(), app: app, intents: StoreBehaviourSuite.nodeA), now: now
                ).accepted)

            // By node B's clock node A's 30 s lease ran out long ago; by the database's it has 29 s to go.
            let early = try await StoreBehaviourSuite.apply(
                b, ClaimIntents(lease: StoreBehaviourSuite.nodeB), now: now + .hours(1) + .seconds(1))
            #expect(early.isEmpty)
            // Once it has run out by the database's clock, node B claims it.
            let late = try await StoreBehaviourSuite.apply(
                b, ClaimIntents(lease: StoreBehaviourSuite.nodeB), now: now + .hours(1) + .seconds(33))
            #expect(late.batches.map { IntentKey($0) } == [IntentKey(accepted.batch)])
            // And node A, its clock right, sees node B's new lease as live.
            #expect(
                try await StoreBehaviourSuite.apply(
                    a, ClaimIntents(lease: StoreBehaviourSuite.nodeA), now: now + .seconds(40)
                ).isEmpty)
            try await a.close()
            try await b.close()
        }
    }
}

/// How samples of the database's clock move the offset leases are written with: only by
/// more than the hysteresis, and a slow round trip (its midpoint may be off by half of it)
/// only when it is still more exact than what the kept offset rests on.
@Suite struct PostgresClockSampleTests {
    @Test func aSlowRoundTripDoesNotMoveAnOffsetThatAFastOneSet() {
        let clock = PostgresClock(clock: SystemClock())
        // Database 400 ms ahead, measured over a 200 ms round trip.
        #expect(clock.record(database: 10_500, sentAt: 10_000, answeredAt: 10_200) == 400)
        #expect(clock.offsetMilliseconds == 400)
        // 200 ms off: within the hysteresis, kept.
        clock.record(database: 20_700, sentAt: 20_000, answeredAt: 20_200)
        #expect(clock.offsetMilliseconds == 400)
        // A 3 s round trip (a stalled query) whose midpoint says 1,400: kept.
        #expect(clock.record(database: 32_900, sentAt: 30_000, answeredAt: 33_000) == 1_400)
        #expect(clock.offsetMilliseconds == 400)
        // A fast sample 1 s away: the clocks did move.
        clock.record(database: 41_450, sentAt: 40_000, answeredAt: 40_100)
        #expect(clock.offsetMilliseconds == 1_400)
    }

    @Test func aSlowFirstSampleGivesWayToAMoreExactOne() {
        let clock = PostgresClock(clock: SystemClock())
        clock.record(database: 11_500, sentAt: 10_000, answeredAt: 13_000)
        #expect(clock.offsetMilliseconds == 0)
        // Slow too, but more exact than the first, and 600 ms away: taken.
        clock.record(database: 21_100, sentAt: 20_000, answeredAt: 21_000)
        #expect(clock.offsetMilliseconds == 600)
        // Slower than that one: not taken.
        clock.record(database: 32_000, sentAt: 30_000, answeredAt: 32_000)
        #expect(clock.offsetMilliseconds == 600)
        // Within the hysteresis and fast: the offset stays, and now rests on a 100 ms round trip,
        // so a 900 ms one 700 ms away no longer moves it.
        clock.record(database: 40_750, sentAt: 40_000, answeredAt: 40_100)
        clock.record(database: 51_750, sentAt: 50_000, answeredAt: 50_900)
        #expect(clock.offsetMilliseconds == 600)
    }
}
