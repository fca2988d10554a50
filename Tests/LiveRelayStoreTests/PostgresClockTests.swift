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
