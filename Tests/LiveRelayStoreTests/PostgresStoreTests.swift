import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayStore
import NIOCore
import Testing

@testable import LiveRelayStorePostgres

/// The shared behavioural suite against PostgreSQL, each behaviour in a fresh schema.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)))
struct PostgresStoreTests {
    @Test(arguments: StoreBehaviourSuite.all)
    func behaviour(_ behaviour: StoreBehaviour) async throws {
        try await PostgresTestDatabase.withSchema { schema in
            try await behaviour.run { try await PostgresTestDatabase.store(schema: schema) }
        }
    }

    @Test func reopeningKeepsEverything() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let loop = StoreBehaviourSuite.group.any()
            let store = try await PostgresTestDatabase.store(schema: schema)
            #expect(store.openedSchemaVersion == 0)
            try await StoreBehaviourSuite.apply(
                store, RegisterToken(pushToStart(hex(1), device: "a1", user: "user-a", expiresAt: t0.seconds + 600)))
            let first = try #require(try await StoreBehaviourSuite.apply(store, StartActivity(start(key: "k1"), app: app)).accepted)
            try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(2), device: "a1")), now: t0 + .seconds(1))
            try await store.close()

            let reopened = try await PostgresTestDatabase.store(schema: schema)
            #expect(reopened.openedSchemaVersion == PostgresActivityStore.schemaVersion)
            let token = try await reopened.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get()
            #expect(
                token
                    == Token(
                        kind: .pushToStart, hex: hex(1), environment: .production, appID: appID,
                        attributesType: "DeliveryAttributes", externalUserID: "user-a", deviceID: "a1",
                        createdAt: t0, updatedAt: t0, expiresAt: UnixTime(seconds: t0.seconds + 600)))
            #expect(try await reopened.updateTokens(of: order1, on: loop).get().map(\.hex) == [hex(2)])
            let activity = try #require(try await reopened.activity(order1, on: loop).get())
            #expect(activity.state == .active)
            #expect(activity.lastTimestamp == first.reply.timestamp)
            #expect(activity.lastContentState == #"{"status":"placed"}"#)
            // The idempotency record (with its stored summary) survived: the retry replays.
            let again = try await StoreBehaviourSuite.apply(reopened, StartActivity(start(key: "k1"), app: app), now: t0 + .seconds(5))
            #expect(again.replayed == first.reply)
            try await reopened.close()
        }
    }

    @Test func migrationsAreIdempotentAndSafeWhenNodesStartAtOnce() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let stores = try await withThrowingTaskGroup(of: PostgresActivityStore.self) { group in
                for _ in 0..<4 { group.addTask { try await PostgresTestDatabase.store(schema: schema, lanes: 1) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let opened = stores.map(\.openedSchemaVersion).sorted()
            #expect(opened == [0] + Array(repeating: PostgresActivityStore.schemaVersion, count: 3), "exactly one node migrated")
            for store in stores { try await store.close() }
            let versions = try await PostgresTestDatabase.sql(
                ["SELECT version::text FROM \"\(schema)\".schema_version ORDER BY version"], schema: schema)
            #expect(versions == (1...PostgresActivityStore.schemaVersion).map { [String($0)] })
            let again = try await PostgresTestDatabase.store(schema: schema)
            #expect(again.openedSchemaVersion == PostgresActivityStore.schemaVersion)
            try await again.close()
        }
    }

    @Test func aDatabaseWithANewerSchemaIsRefused() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            try await PostgresTestDatabase.store(schema: schema).close()
            try await PostgresTestDatabase.sql(["INSERT INTO \"\(schema)\".schema_version VALUES (999, 0)"], schema: schema)
            await #expect(throws: PostgresStoreError.newerSchema(found: 999, supported: PostgresActivityStore.schemaVersion)) {
                try await PostgresTestDatabase.store(schema: schema).close()
            }
        }
    }

    @Test func theHotLookupsCanUseTheirIndexes() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            try await PostgresTestDatabase.store(schema: schema).close()
            // With sequential scans priced out, a lookup no index can serve still scans:
            // the plan names an index only if one matches (predicate included).
            let arrays = "'{com.example.app}'::text[]"
            func plan(_ branch: String) async throws -> String {
                let rows = try await PostgresTestDatabase.sql(
                    ["SET enable_seqscan = off", "SET search_path TO \"\(schema)\"", "EXPLAIN " + branch], schema: schema)
                return rows.compactMap { $0.first ?? nil }.joined(separator: "\n")
            }
            let t = PostgresTables.prefixed(PostgresTables.tokenColumns, "t")
            let updateTokens = try await plan(
                "SELECT \(t) FROM unnest(\(arrays), '{order-1}'::text[]) AS k(a, x) JOIN tokens t ON t.kind = 0 AND t.app_id = k.a AND t.activity_id = k.x"
            )
            #expect(updateTokens.contains("tokens_update_slot"), "\(updateTokens)")
            let ofType = try await plan(
                "SELECT \(t) FROM unnest(\(arrays), '{T}'::text[]) AS k(a, ty) JOIN tokens t ON t.kind = 1 AND t.app_id = k.a AND t.attributes_type = k.ty"
            )
            #expect(ofType.contains("tokens_push_to_start_slot"), "\(ofType)")
            let ofUser = try await plan(
                """
                SELECT \(t) FROM unnest(\(arrays), '{u}'::text[], '{T}'::text[]) AS k(a, u, ty) JOIN tokens t ON t.kind = 1
                AND t.external_user_id IS NOT NULL AND t.app_id = k.a AND t.external_user_id = k.u AND t.attributes_type = k.ty
                """)
            #expect(ofUser.contains("tokens_push_to_start_by_user"), "\(ofUser)")
            // The store's own statement, all six branches.
            let all = try await plan(PostgresTables.tokensSQL.replacingBinds())
            for index in ["tokens_pkey", "tokens_update_slot", "tokens_push_to_start_slot", "tokens_push_to_start_by_user"] {
                #expect(all.contains(index), "\(index) unused:\n\(all)")
            }
            // The fan-out reads the slot index alone (its INCLUDE columns), never the table.
            let targets = try await plan(PostgresTables.updateTargetsSQL.replacingBinds())
            #expect(targets.contains("Index Only Scan using tokens_update_slot"), "\(targets)")
            // A start to all devices through the push-to-start slot index (which carries no INCLUDE columns).
            let starts = try await plan(PostgresTables.pushToStartTargetsSQL.replacingBinds())
            #expect(starts.contains("tokens_push_to_start_slot"), "\(starts)")
        }
    }

    @Test func aFailingPlanInABatchLeavesTheOthersAlone() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let store = try await PostgresTestDatabase.store(schema: schema, lanes: 1)
            let loop = StoreBehaviourSuite.group.any()
            try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(100), device: "taken")))
            // Queued together, so usually one batch; the outcome must not depend on how they are batched.
            let good1 = store.apply(RegisterToken(pushToStart(hex(1), device: "a1")), now: t0, on: loop)
            let sees1 = store.apply(Sees(key: TokenKey(appID: appID, hex: hex(1))), now: t0, on: loop)
            let refused = store.apply(
                Writes([.putToken(tokenRow(hex(2), device: "a2"))], refuse: .unknownApp(appID: "x")), now: t0, on: loop)
            // Its second write breaks the slot index: its first must be undone too.
            let halfway = store.apply(
                Writes([.putToken(tokenRow(hex(3), device: "a3")), .putToken(tokenRow(hex(4), device: "taken"))]), now: t0, on: loop)
            let good2 = store.apply(RegisterToken(pushToStart(hex(5), device: "a5")), now: t0, on: loop)
            let invalid = store.apply(RegisterToken(pushToStart(hex(6), device: "a6", expiresAt: t0.seconds)), now: t0, on: loop)

            #expect(try await good1.get().result == .created)
            #expect(try await sees1.get() == true)
            await #expect(throws: DomainError.unknownApp(appID: "x")) { try await refused.get() }
            await #expect(throws: (any Error).self) { try await halfway.get() }
            #expect(try await good2.get().result == .created)
            await #expect(throws: DomainError.self) { try await invalid.get() }
            let present = try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get()
            #expect(Set(present.map(\.hex)) == [hex(100), hex(1), hex(5)])
            try await store.close()
        }
    }

    /// The overlay's settlements: a replay planned in the batch that settles
    /// its call sees the account, whether its record came from the database
    /// or from an earlier plan of the same batch, and so does one after the commit.
    @Test func aReplayInTheBatchThatSettlesItsCallSeesTheAccount() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let store = try await PostgresTestDatabase.store(schema: schema, lanes: 1)
            let loop = StoreBehaviourSuite.group.any()
            let lease = StoreBehaviourSuite.nodeA
            try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(100))))
            try await StoreBehaviourSuite.apply(store, StartActivity(start(), app: app))
            try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(1))))
            let updated = try #require(
                try await StoreBehaviourSuite.apply(
                    store, ChangeActivity(update(key: "u1"), app: app, intents: lease), now: t0 + .seconds(1)
                ).accepted)
            let updateAccount = EnqueueResult(delivered: 1)
            let startAccount = EnqueueResult(failures: ["Unregistered": 1])
            let order2 = IntentKey(appID: appID, activityID: "order-2", timestamp: t0.seconds + 2)

            // Queued together, so usually one batch; the outcome must not depend on how they are batched.
            let now = t0 + .seconds(2)
            let readFirst = store.apply(ChangeActivity(update(key: "u1"), app: app, intents: lease), now: now, on: loop)
            let started = store.apply(StartActivity(start("order-2", key: "s2"), app: app, intents: lease), now: now, on: loop)
            let settled = store.apply(
                SettleIntents([
                    SettledIntent(key: IntentKey(updated.batch), account: updateAccount),
                    SettledIntent(key: order2, account: startAccount),
                ]), now: now, on: loop)
            let updateReplay = store.apply(ChangeActivity(update(key: "u1"), app: app, intents: lease), now: now, on: loop)
            let startReplay = store.apply(StartActivity(start("order-2", key: "s2"), app: app, intents: lease), now: now, on: loop)

            #expect(try await readFirst.get().replayed?.account == nil)
            #expect(try await started.get().accepted?.batch.timestamp == order2.timestamp)
            try await settled.get()
            #expect(try await updateReplay.get().replayed?.account == updateAccount)
            #expect(try await startReplay.get().replayed?.account == startAccount)

            let later = t0 + .seconds(3)
            let updateAgain = try await StoreBehaviourSuite.apply(store, ChangeActivity(update(key: "u1"), app: app), now: later)
            #expect(updateAgain.replayed?.account == updateAccount)
            let startAgain = try await StoreBehaviourSuite.apply(store, StartActivity(start("order-2", key: "s2"), app: app), now: later)
            #expect(startAgain.replayed?.account == startAccount)
            try await store.close()
        }
    }

    @Test func concurrentAppliesShareTransactions() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let store = try await PostgresTestDatabase.store(schema: schema, lanes: 1)
            let before = store.statistics
            let loop = StoreBehaviourSuite.group.any()
            // Issued together (as an event loop's read hands over its calls), not from a thousand
            // tasks, which a loaded machine would start a few at a time.
            let replies = (0..<1000).map { i in store.apply(RegisterToken(pushToStart(hex(i), device: "d\(i)")), now: t0, on: loop) }
            for reply in replies { #expect(try await reply.get().result == .created) }
            let stats = store.statistics
            #expect(stats.mutations - before.mutations == 1000)
            #expect(stats.commits - before.commits <= 250, "1,000 concurrent applies took \(stats.commits - before.commits) transactions")
            try await store.close()
        }
    }

    @Test func closeCommitsWhatIsQueued() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let store = try await PostgresTestDatabase.store(schema: schema)
            let loop = StoreBehaviourSuite.group.any()
            let futures = (0..<500).map { store.apply(RegisterToken(pushToStart(hex($0), device: "d\($0)")), now: t0, on: loop) }
            try await store.close()
            for future in futures { #expect(try await future.get().result == .created) }
            await #expect(throws: ActivityStoreError.closed) { try await store.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get() }
            let reopened = try await PostgresTestDatabase.store(schema: schema)
            #expect(try await reopened.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get().count == 500)
            try await reopened.close()
        }
    }
}

extension String {
    /// The token statement with its 15 array parameters replaced by one-element literals, for EXPLAIN.
    fileprivate func replacingBinds() -> String {
        var sql = self
        for i in stride(from: 15, through: 1, by: -1) { sql = sql.replacing("$\(i)::text[]", with: "'{x}'::text[]") }
        return sql
    }
}
