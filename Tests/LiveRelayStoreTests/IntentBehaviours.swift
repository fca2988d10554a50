import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import Testing

/// The dispatch intent behaviours every store must have (docs/PROTOCOL.md,
/// "Delivery guarantees"), part of ``StoreBehaviourSuite/all``.
extension StoreBehaviourSuite {
    static let nodeA = IntentLease(owner: "node-a", duration: .seconds(30))
    static let nodeB = IntentLease(owner: "node-b", duration: .seconds(30))

    static let intentBehaviours: [StoreBehaviour] = [
        StoreBehaviour(description: "an accepted call leaves one intent, rebuilt as it was sent", run: intentsAreRecordedAndRebuilt),
        StoreBehaviour(description: "leases keep intents from other nodes until they run out", run: leasesHoldUntilTheyRunOut),
        StoreBehaviour(description: "a settled intent is gone; an expired one is dropped", run: settledAndExpiredIntents),
        StoreBehaviour(description: "an end's intent keeps the tokens the end deleted", run: anEndKeepsItsTargets),
        StoreBehaviour(description: "a newer update leaves another live node's older intent alone", run: anotherNodesIntentIsLeftAlone),
        StoreBehaviour(description: "a replay reports the account its settled intent left", run: replaysReportTheSettledAccount),
        StoreBehaviour(description: "a renewal extends the leases it names, and no other", run: aRenewalExtendsOnlyTheLeasesItNames),
        StoreBehaviour(description: "a node claims its own row once its lease runs out", run: aNodeClaimsItsOwnLapsedRow),
    ]

    /// Two intents of node A; its renewal names only the first (the one its dispatcher holds):
    /// once the leases run out node B claims the second alone.
    static func aRenewalExtendsOnlyTheLeasesItNames(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, StartActivity(start("order-2"), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1))))
        try await apply(store, RegisterToken(updateToken(hex(2), activity: "order-2", device: "device-2")))
        let first = try #require(
            try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(1)).accepted)
        let second = try #require(
            try await apply(store, ChangeActivity(update("order-2"), app: app, intents: nodeA), now: t0 + .seconds(1))
                .accepted)
        try await apply(store, RenewIntents(lease: nodeA, keys: [IntentKey(first.batch)]), now: t0 + .seconds(20))
        let claimed = try await apply(store, ClaimIntents(lease: nodeB), now: t0 + .seconds(31))
        #expect(claimed.batches.map { IntentKey($0) } == [IntentKey(second.batch)])
        #expect(
            try await apply(store, ClaimIntents(lease: nodeB), now: t0 + .seconds(50)).batches.map { IntentKey($0) } == [
                IntentKey(first.batch)
            ])
        try await store.close()
    }

    /// A row node A leased and does not hold (the call's COMMIT had an unknown outcome, so the
    /// call failed and nothing was handed to the dispatcher, yet the row landed) is not renewed,
    /// and node A itself claims it once the lease runs out: its pushes are sent while A lives.
    static func aNodeClaimsItsOwnLapsedRow(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1))))
        let landed = try #require(
            try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(1)).accepted)
        try await apply(store, RenewIntents(lease: nodeA, keys: []), now: t0 + .seconds(20))
        #expect(try await apply(store, ClaimIntents(lease: nodeA), now: t0 + .seconds(30)).isEmpty, "leased until t0 + 31 s")
        let claimed = try await apply(store, ClaimIntents(lease: nodeA), now: t0 + .seconds(31))
        #expect(claimed.batches.map { IntentKey($0) } == [IntentKey(landed.batch)])
        // Claimed again by A: its new lease holds, against A's own claims too.
        #expect(try await apply(store, ClaimIntents(lease: nodeA), now: t0 + .seconds(40)).isEmpty)
        try await store.close()
    }

    /// A start, two updates of 3 tokens (the second supersedes the first) and
    /// a call without intents: a takeover finds exactly the start and the
    /// second update, with their first payloads and timestamps.
    static func intentsAreRecordedAndRebuilt(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, RegisterToken(pushToStart(hex(100))))
        let started = try #require(try await apply(store, StartActivity(start(), app: app, intents: nodeA)).accepted)
        #expect(started.batch.durable)
        for n in 1...3 { try await apply(store, RegisterToken(updateToken(hex(n), device: "d\(n)"))) }
        try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(1))
        let second = try #require(
            try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(2)).accepted)
        let untracked = try #require(try await apply(store, ChangeActivity(update(), app: app), now: t0 + .seconds(3)).accepted)
        #expect(!untracked.batch.durable)

        // Node A holds them: node B finds nothing until it takes over.
        #expect(try await apply(store, ClaimIntents(lease: nodeB), now: t0 + .seconds(4)).isEmpty)
        let claimed = try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: t0 + .seconds(4))
        #expect(claimed.expired.isEmpty && claimed.dropped.isEmpty)
        let batches = claimed.batches.sorted { $0.timestamp < $1.timestamp }
        #expect(batches.map(\.timestamp) == [started.batch.timestamp, second.batch.timestamp])
        guard batches.count == 2 else { return }
        #expect(batches[0] == started.batch)
        var rebuilt = second.batch
        rebuilt.targets.sort { $0.token < $1.token }
        var resumed = batches[1]
        resumed.targets.sort { $0.token < $1.token }
        #expect(resumed == rebuilt)
        #expect(resumed.targets.map(\.token) == [hex(1), hex(2), hex(3)])
        // Now node B's: a second takeover by B finds nothing, node A (restarted) everything.
        #expect(try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: t0 + .seconds(5)).isEmpty)
        #expect(try await apply(store, ClaimIntents(lease: nodeA, evenIfLeased: true), now: t0 + .seconds(5)).batches.count == 2)
        try await store.close()
    }

    static func leasesHoldUntilTheyRunOut(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1))))
        let updated = try #require(
            try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(1)).accepted)
        let held = [IntentKey(updated.batch)]
        // Leased until t0 + 31 s; renewed at t0 + 20 s until t0 + 50 s.
        #expect(try await apply(store, ClaimIntents(lease: nodeB), now: t0 + .seconds(30)).isEmpty)
        try await apply(store, RenewIntents(lease: nodeA, keys: held), now: t0 + .seconds(20))
        #expect(try await apply(store, ClaimIntents(lease: nodeB), now: t0 + .seconds(45)).isEmpty)
        let claimed = try await apply(store, ClaimIntents(lease: nodeB), now: t0 + .seconds(50))
        #expect(claimed.batches.map(\.targets.count) == [1])
        // B's lease now: A's renewal no longer touches it, and A cannot claim it back before it runs out.
        try await apply(store, RenewIntents(lease: nodeA, keys: held), now: t0 + .seconds(60))
        #expect(try await apply(store, ClaimIntents(lease: nodeA), now: t0 + .seconds(79)).isEmpty)
        #expect(try await apply(store, ClaimIntents(lease: nodeA), now: t0 + .seconds(80)).batches.count == 1)
        try await store.close()
    }

    static func settledAndExpiredIntents(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1))))
        let first = try #require(try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(1)).accepted)
        try await apply(store, SettleIntents([SettledIntent(key: IntentKey(first.batch), account: EnqueueResult(delivered: 1))]))
        #expect(try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: t0 + .seconds(2)).isEmpty)
        // An update expires with its activity (8 hours).
        let second = try #require(
            try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(3)).accepted)
        let late = try #require(second.batch.expiresAt) + .seconds(1)
        let claimed = try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: late)
        #expect(claimed.batches.isEmpty)
        #expect(claimed.expired == [IntentKey(second.batch)])
        #expect(try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: late).isEmpty)
        try await store.close()
    }

    static func anEndKeepsItsTargets(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        for n in 1...2 { try await apply(store, RegisterToken(updateToken(hex(n), device: "d\(n)"))) }
        try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(1))
        let end = try #require(
            try await apply(store, ChangeActivity(endRequest(), app: app, intents: nodeA), now: t0 + .seconds(2)).accepted)
        #expect(try await store.updateTokens(of: order1, on: group.any()).get().isEmpty)
        let claimed = try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: t0 + .seconds(3))
        // The update before it is superseded; the end goes to the tokens it had.
        #expect(claimed.batches == [end.batch])
        try await store.close()
    }

    static func anotherNodesIntentIsLeftAlone(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1))))
        let first = try #require(try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(1)).accepted)
        #expect(try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: t0 + .seconds(2)).batches.count == 1)
        let second = try #require(
            try await apply(store, ChangeActivity(update(), app: app, intents: nodeA), now: t0 + .seconds(3)).accepted)
        let observer = IntentLease(owner: "observer")
        let all = try await apply(store, ClaimIntents(lease: observer, evenIfLeased: true), now: t0 + .seconds(4))
        #expect(all.batches.map(\.timestamp).sorted() == [first.batch.timestamp, second.batch.timestamp])
        // Once node B's lease has run out, a newer update deletes it.
        let third = try #require(
            try await apply(store, ChangeActivity(update(), app: app, intents: observer), now: t0 + .seconds(40)).accepted)
        let left = try await apply(store, ClaimIntents(lease: nodeA, evenIfLeased: true), now: t0 + .seconds(41))
        #expect(left.batches.map(\.timestamp) == [third.batch.timestamp])
        try await store.close()
    }

    /// A start and two updates with idempotency keys: each replays its plan
    /// (no account) until its intent is settled, then the account it was
    /// settled with; the first update's intent, superseded by the second's,
    /// still takes the account the dispatcher reports for it; an intent found
    /// past its expiry settles its call as every push expired.
    static func replaysReportTheSettledAccount(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, RegisterToken(pushToStart(hex(100))))
        let started = try #require(try await apply(store, StartActivity(start(key: "s1"), app: app, intents: nodeA)).accepted)
        for n in 1...2 { try await apply(store, RegisterToken(updateToken(hex(n), device: "d\(n)"))) }
        let first = try #require(
            try await apply(store, ChangeActivity(update(key: "u1"), app: app, intents: nodeA), now: t0 + .seconds(1)).accepted)
        let second = try #require(
            try await apply(store, ChangeActivity(update(key: "u2"), app: app, intents: nodeA), now: t0 + .seconds(2)).accepted)
        func replay(start key: String) async throws -> StoredReply? {
            try await apply(store, StartActivity(start(key: key), app: app, intents: nodeA), now: t0 + .seconds(3)).replayed
        }
        func replay(update key: String, at now: UnixTime = t0 + .seconds(3)) async throws -> StoredReply? {
            try await apply(store, ChangeActivity(update(key: key), app: app, intents: nodeA), now: now).replayed
        }
        #expect(try await replay(start: "s1") == started.reply)
        #expect(try await replay(update: "u1")?.account == nil)

        let startAccount = EnqueueResult(delivered: 1)
        let firstAccount = EnqueueResult(delivered: 1, pruned: 1, failures: ["BadExpirationDate": 0, "Say \"hi\"": 2])
        try await apply(
            store,
            SettleIntents([
                SettledIntent(key: IntentKey(started.batch), account: startAccount),
                SettledIntent(key: IntentKey(first.batch), account: firstAccount),
            ]), now: t0 + .seconds(3))
        var settledStart = started.reply
        settledStart.account = startAccount
        #expect(try await replay(start: "s1") == settledStart)
        #expect(try await replay(update: "u1")?.account == firstAccount)
        #expect(try await replay(update: "u2") == second.reply)
        // The second update's intent is left, and never resumed: found past its expiry, it is the call's account.
        let late = try #require(second.batch.expiresAt) + .seconds(1)
        let claimed = try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: late)
        #expect(claimed.expired == [IntentKey(second.batch)])
        #expect(try await replay(update: "u2", at: late)?.account == EnqueueResult(expired: 2))
        #expect(try await replay(update: "u1", at: late)?.account == firstAccount)
        try await store.close()
    }
}
