import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import Testing

@testable import LiveRelayStore
@testable import LiveRelayStoreSQLite

/// Rows of `dispatch_intents` that can never be sent are reported and deleted by
/// the claim that finds them, their call's account settled failed: never retried
/// forever, never a failed claim that would stop the others from resuming. A row
/// of a format version this build does not read is left for one that does.
@Suite struct SQLiteIntentTests {
    @Test(arguments: [
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
            try await StoreBehaviourSuite.apply(
                store, StartActivity(start(key: "start-1"), app: app, intents: StoreBehaviourSuite.nodeA)
            ).accepted)
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
        // The call's account says it failed, and why: a replay never reports it queued for good.
        let replay = try await StoreBehaviourSuite.apply(
            reopened, StartActivity(start(key: "start-1"), app: app, intents: StoreBehaviourSuite.nodeA), now: t0 + .seconds(3))
        #expect(replay.replayed?.account == EnqueueResult(failures: [reason: 1]), "\(String(describing: replay.replayed))")
        try await reopened.close()
    }

    /// A row another build wrote in a format this one does not read (a rolling upgrade) is not
    /// dropped: the claim leases it for one lease and leaves it, and once that runs out any node
    /// (one that reads it) finds it again.
    @Test func aRowOfAnotherFormatVersionIsLeftForANodeThatReadsIt() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let store = try SQLiteActivityStore(path: path)
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(9))))
        let started = try #require(
            try await StoreBehaviourSuite.apply(store, StartActivity(start(), app: app, intents: StoreBehaviourSuite.nodeA)).accepted)
        try await store.close()
        do {
            let db = try SQLiteConnection(path: path, create: false)
            defer { db.close() }
            try db.run("UPDATE dispatch_intents SET version = 99 WHERE timestamp = ?1") { $0.bind(1, started.batch.timestamp) }
        }
        let reopened = try SQLiteActivityStore(path: path)
        let claimed = try await StoreBehaviourSuite.apply(
            reopened, ClaimIntents(lease: StoreBehaviourSuite.nodeB, evenIfLeased: true), now: t0 + .seconds(1))
        #expect(claimed.left == [IntentKey(started.batch)])
        #expect(claimed.batches.isEmpty && claimed.dropped.isEmpty)
        #expect(
            try await StoreBehaviourSuite.apply(reopened, ClaimIntents(lease: StoreBehaviourSuite.nodeA), now: t0 + .seconds(30)).isEmpty)
        let later = try await StoreBehaviourSuite.apply(
            reopened, ClaimIntents(lease: StoreBehaviourSuite.nodeA), now: t0 + .seconds(31))
        #expect(later.left == [IntentKey(started.batch)], "still there once the lease ran out")
        try await reopened.close()
    }
}
