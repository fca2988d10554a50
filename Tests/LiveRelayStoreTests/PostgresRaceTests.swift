import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import NIOCore
import Testing

@testable import LiveRelayStorePostgres

/// Two LiveRelay nodes on one database: two store instances (each with its
/// own pool and lanes) on one schema, racing on the same rows. Whatever the
/// interleaving, the outcome must be one a single node would have produced.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)), .timeLimit(.minutes(3)))
struct PostgresRaceTests {
    static func twoNodes(_ body: (PostgresActivityStore, PostgresActivityStore) async throws -> Void) async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let a = try await PostgresTestDatabase.store(schema: schema)
            let b = try await PostgresTestDatabase.store(schema: schema)
            do {
                try await body(a, b)
            } catch {
                try? await a.close()
                try? await b.close()
                throw error
            }
            try await a.close()
            try await b.close()
        }
    }

    @Test func twoNodesStartingOneActivity_exactlyOneWins() async throws {
        try await Self.twoNodes { a, b in
            let wins = await withTaskGroup(of: Bool.self) { group in
                for i in 0..<40 {
                    let node = i % 2 == 0 ? a : b
                    group.addTask { (try? await StoreBehaviourSuite.apply(node, StartActivity(start(key: "k\(i)"), app: app))) != nil }
                }
                return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(wins == 1)
            let conflicts = a.statistics.conflicts + b.statistics.conflicts
            let state = try await a.activity(order1, on: StoreBehaviourSuite.group.any()).get()?.state
            #expect(state == .starting, "conflicts: \(conflicts)")
        }
    }

    @Test func twoNodesUpdatingOneActivity_timestampsStayDistinctAndIncreasing() async throws {
        try await Self.twoNodes { a, b in
            try await StoreBehaviourSuite.apply(a, StartActivity(start(), app: app))
            let stamps = try await withThrowingTaskGroup(of: Int64.self) { group in
                for i in 0..<60 {
                    let node = i % 2 == 0 ? a : b
                    group.addTask {
                        try await StoreBehaviourSuite.apply(node, ChangeActivity(update(), app: app)).accepted?.reply.timestamp ?? 0
                    }
                }
                return try await group.reduce(into: [Int64]()) { $0.append($1) }
            }
            #expect(stamps.sorted() == Array(t0.seconds + 1...t0.seconds + 60))
            #expect(try await b.activity(order1, on: StoreBehaviourSuite.group.any()).get()?.lastTimestamp == t0.seconds + 60)
        }
    }

    /// Every registration into one slot, from two nodes: a serial order has one
    /// CREATED and then a chain of rotations, each replacing the token before it.
    @Test(arguments: [Token.Kind.update, .pushToStart])
    func twoNodesFillingOneRotationSlot_noTwoTokensBothWin(_ kind: Token.Kind) async throws {
        try await Self.twoNodes { a, b in
            let count = 30
            let replies = try await withThrowingTaskGroup(of: (String, TokenRegistration.Result).self) { group in
                for i in 0..<count {
                    let node = i % 2 == 0 ? a : b
                    let request = kind == .update ? updateToken(hex(i), device: "phone") : pushToStart(hex(i), device: "phone")
                    group.addTask { (hex(i), try await StoreBehaviourSuite.apply(node, RegisterToken(request)).result) }
                }
                return try await group.reduce(into: [(String, TokenRegistration.Result)]()) { $0.append($1) }
            }
            #expect(replies.filter { $0.1 == .created }.count == 1)
            let replaced = replies.compactMap { reply -> String? in
                if case let .rotated(replacedToken) = reply.1 { replacedToken } else { nil }
            }
            #expect(replaced.count == count - 1, "every other registration rotated")
            #expect(Set(replaced).count == count - 1, "a token was replaced twice: two registrations both took the slot")
            let loop = StoreBehaviourSuite.group.any()
            let holders =
                kind == .update
                ? try await a.updateTokens(of: order1, on: loop).get()
                : try await b.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get()
            #expect(holders.count == 1)
            let holder = try #require(holders.first)
            #expect(!replaced.contains(holder.hex))
            #expect(Set(replaced + [holder.hex]) == Set((0..<count).map(hex)))
        }
    }

    @Test func aKilledConnectionIsReplaced() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let store = try await PostgresTestDatabase.store(schema: schema)
            let loop = StoreBehaviourSuite.group.any()
            for i in 0..<20 { try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(i), device: "d\(i)"))) }
            let killed = try await PostgresTestDatabase.sql(
                [
                    """
                    SELECT pid::text, pg_terminate_backend(pid)::text FROM pg_stat_activity
                    WHERE application_name = 'liverelay-test-\(schema)' AND pid <> pg_backend_pid()
                    """
                ], schema: schema
            ).compactMap { $0.first ?? nil }
            #expect(!killed.isEmpty, "the store had no connection to kill")
            // pg_terminate_backend only signals: wait until the backends are gone, so the
            // store meets connections that are closed, not ones closing under a COMMIT.
            var remaining = killed.count
            for _ in 0..<100 where remaining > 0 {
                let rows = try await PostgresTestDatabase.sql(
                    ["SELECT count(*)::text FROM pg_stat_activity WHERE pid IN (\(killed.joined(separator: ",")))"],
                    schema: schema)
                remaining = Int(rows.first?.first.flatMap { $0 } ?? "0") ?? 0
                if remaining > 0 { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(remaining == 0, "the killed backends did not exit")
            // Every call after the kill still lands: the pool opens new connections and
            // a batch that lost its connection before COMMIT is retried on another.
            for i in 20..<40 {
                #expect(try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(i), device: "d\(i)"))).result == .created)
            }
            #expect(try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get().count == 40)
            try await store.close()
        }
    }
}

@Suite struct PostgresConfigurationTests {
    @Test func aURLIsParsedAndItsPasswordNeverPrinted() throws {
        let c = try PostgresStoreConfiguration(
            url: "postgres://relay:s3cr%40t@db.internal:6543/live?sslmode=require&schema=lr_prod&lanes=3")
        #expect(c.host == "db.internal")
        #expect(c.port == 6543)
        #expect(c.username == "relay")
        #expect(c.password == "s3cr@t")
        #expect(c.database == "live")
        #expect(c.tls == .require)
        #expect(c.schema == "lr_prod")
        #expect(c.lanes == 3)
        #expect(!c.description.contains("s3cr"))
        #expect(c.description.contains("relay:***@db.internal:6543/live"))
    }

    @Test func defaultsFollowLibpq() throws {
        let c = try PostgresStoreConfiguration(url: "postgresql://localhost")
        #expect(c.port == 5432)
        #expect(c.username == "postgres")
        #expect(c.password == nil)
        #expect(c.tls == .prefer)
        #expect(c.schema == "public")
        #expect(c.statementTimeout == .seconds(10))
    }

    @Test func tlsIsRequiredUnlessTheHostIsLoopback() throws {
        #expect(try PostgresStoreConfiguration(url: "postgres://u@db.internal/d").tls == .require)
        #expect(try PostgresStoreConfiguration(url: "postgres://u@10.0.0.7:5432/d").tls == .require)
        #expect(try PostgresStoreConfiguration(url: "postgres://u@127.0.0.1:5432/d").tls == .prefer)
        #expect(try PostgresStoreConfiguration(url: "postgres://u@[::1]:5432/d").tls == .prefer)
        #expect(try PostgresStoreConfiguration(url: "postgres://u@localhost/d").tls == .prefer)
        #expect(try PostgresStoreConfiguration(url: "postgres://u@db.internal/d?sslmode=verify-full").tls == .require)
        // Said by name, plaintext is the operator's choice; a silent fallback to it is not.
        #expect(try PostgresStoreConfiguration(url: "postgres://u@db.internal/d?sslmode=disable").tls == .disable)
        #expect(try PostgresStoreConfiguration(url: "postgres://u@127.0.0.1/d?sslmode=prefer").tls == .prefer)
        for mode in ["prefer", "allow"] {
            #expect {
                try PostgresStoreConfiguration(url: "postgres://u:pw@db.internal/d?sslmode=\(mode)")
            } throws: { error in
                "\(error)".contains("sslmode=\(mode)") && "\(error)".contains("sslmode=require") && !"\(error)".contains("pw")
            }
        }
        #expect(!PostgresStoreConfiguration.isLoopback("127.0.0.1.example.com"))
        #expect(!PostgresStoreConfiguration.isLoopback("128.0.0.1"))
    }

    @Test(arguments: [("2500", Duration.milliseconds(2500)), ("250ms", .milliseconds(250)), ("3s", .seconds(3)), ("2min", .seconds(120))])
    func theStatementTimeoutTakesPostgreSQLsUnits(_ text: String, _ expected: Duration) throws {
        #expect(try PostgresStoreConfiguration(url: "postgres://u@h/d?lanes=2&statement_timeout=\(text)").statementTimeout == expected)
    }

    @Test(arguments: [
        "mysql://x@y/z", "postgres://u@h:99999/d", "postgres://u@h/d?sslmode=maybe", "postgres://u@h/d?schema=Robert');DROP",
        "postgres://u@h/d?colour=blue", "postgres://u:%zz@h/d", "postgres://u@h/d?statement_timeout=0",
        "postgres://u@h/d?statement_timeout=5h", "postgres://u@h/d?statement_timeout=-3s", "postgres://u@h/d?statement_timeout=",
    ])
    func badURLsAreRefusedWithoutEchoingThem(_ url: String) {
        #expect(throws: PostgresStoreError.self) { try PostgresStoreConfiguration(url: url) }
    }
}
