import LiveRelayAPNs
import LiveRelayDomain
import Testing

@testable import LiveRelayStore
@testable import LiveRelayStoreSQLite

/// Rows of `dispatch_intents` that cannot be sent are reported and deleted by
/// the claim that finds them: never retried forever, never a failed claim that
/// would stop the others from resuming.
@Suite struct SQLiteIntentTests {
    @Test(arguments: [
        ("UPDATE dispatch_intents SET version = 99 WHERE timestamp = ?1", "IntentVersionUnknown(99)"),
        ("UPDATE dispatch_intents SET targets = x'01' WHERE timestamp = ?1", "IntentDamaged(targets)"),
        ("UPDATE dispatch_intents SET event = 'bogus' WHERE timestamp = ?1", "IntentDamaged(event bogus)"),
        ("UPDATE dispatch_intents SET payload = zeroblob(4097) WHERE timestamp = ?1", "PayloadTooLarge(4097)"),
    ])
    func aRowThatCannotBeSentIsDroppedWithItsReason(damage: String, reason: String) async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let store = try SQLiteActivityStore(path: path)
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(9))))
        let started = try #require(
            try await StoreBehaviourSuite.apply(store, StartActivity(start(), app: app, intents: StoreBehaviourSuite.nodeA)).accepted)
        let other = try #require(
            try await StoreBehaviourSuite.apply(
                store, StartActivity(start("order-2"), app: app, intents: StoreBehaviourSuite.nodeA)
            ).accepted)
        try await store.close()
        do {
            let db = try SQLiteConnection(path: path, create: false)
            defer { db.close() }
            try db.run(damage) { $0.bind(1, started.batch.timestamp) }
            // Only the row of order-1 is damaged (both starts share a timestamp: narrow by activity).
            try db.run("UPDATE dispatch_intents SET version = 1, targets = ?1, event = 'start' WHERE activity_id = 'order-2'") {
                $0.bind(1, DispatchIntent.encode(other.batch.targets))
            }
            try db.run("UPDATE dispatch_intents SET payload = ?1 WHERE activity_id = 'order-2'") { $0.bind(1, other.batch.payload.bytes) }
        }
        let reopened = try SQLiteActivityStore(path: path)
        let claimed = try await StoreBehaviourSuite.apply(
            reopened, ClaimIntents(lease: StoreBehaviourSuite.nodeB, evenIfLeased: true), now: t0 + .seconds(1))
        #expect(claimed.dropped == [DroppedIntent(key: IntentKey(started.batch), reason: reason)])
        #expect(claimed.batches == [other.batch])
        // Gone, not retried: the next takeover finds only the good one again.
        let again = try await StoreBehaviourSuite.apply(
            reopened, ClaimIntents(lease: StoreBehaviourSuite.nodeA, evenIfLeased: true), now: t0 + .seconds(2))
        #expect(again.dropped.isEmpty && again.batches == [other.batch])
        try await reopened.close()
    }
}
