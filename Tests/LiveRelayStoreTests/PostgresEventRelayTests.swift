import LiveRelayDomain
import LiveRelayStore
import LiveRelayTestSupport
import NIOCore
import Testing

@testable import LiveRelayStorePostgres

/// The payloads nodes send each other: which apps' feeds grew, for which schema, from which node.
@Suite struct PostgresEventRelayPayloadTests {
    @Test func anotherNodesPayloadNamesItsApps() {
        let payloads = PostgresEventRelay.payloads(schema: "s1", node: "n1", appIDs: ["b.app", "a.app"])
        #expect(payloads == ["s1\nn1\na.app\nb.app"])
        #expect(PostgresEventRelay.appIDs(fromPayload: payloads[0], schema: "s1", skippingNode: "n2") == ["a.app", "b.app"])
    }

    @Test func ownNodesOtherSchemasAndMalformedPayloadsNameNothing() {
        let payload = PostgresEventRelay.payloads(schema: "s1", node: "n1", appIDs: ["a.app"])[0]
        #expect(PostgresEventRelay.appIDs(fromPayload: payload, schema: "s1", skippingNode: "n1") == nil)
        #expect(PostgresEventRelay.appIDs(fromPayload: payload, schema: "s2", skippingNode: "n2") == nil)
        #expect(PostgresEventRelay.appIDs(fromPayload: "s1:7", schema: "s1", skippingNode: "n2") == nil)
        #expect(PostgresEventRelay.appIDs(fromPayload: "", schema: "s1", skippingNode: "n2") == nil)
        #expect(PostgresEventRelay.payloads(schema: "s1", node: "n1", appIDs: []).isEmpty)
    }

    /// Many apps at once (a sweep's expiries) go in several notifications, each under PostgreSQL's limit.
    @Test func manyAppsAreSplitBelowThePayloadLimit() {
        let appIDs = Set((0..<200).map { "app-\($0)-" + String(repeating: "x", count: 100) })
        let payloads = PostgresEventRelay.payloads(schema: "s1", node: "n1", appIDs: appIDs)
        #expect(payloads.count > 1)
        #expect(payloads.allSatisfy { $0.utf8.count <= PostgresEventRelay.maxPayloadBytes })
        let named = payloads.map { PostgresEventRelay.appIDs(fromPayload: $0, schema: "s1", skippingNode: "n2") ?? [] }
        #expect(named.reduce(into: Set<String>()) { $0.formUnion($1) } == appIDs)
        #expect(named.map(\.count).reduce(0, +) == appIDs.count, "no app in two notifications")
    }
}

@Suite struct EventCommitSignalWakeAllTests {
    /// After a gap in which commits may have gone unheard, every waiter reads again, and a
    /// reader that took its generation before the gap does not wait at all.
    @Test func wakeAllWakesEveryWaiterAndMovesEveryGeneration() async throws {
        let signal = EventCommitSignal()
        let loop = StoreBehaviourSuite.group.any()
        signal.committed(appIDs: ["a"])
        let a = signal.generation(of: "a")
        let never = signal.generation(of: "never-signalled")
        let waiting = [
            signal.wait(appID: "a", after: a, until: .now() + .seconds(60), on: loop),
            signal.wait(appID: "b", after: signal.generation(of: "b"), until: .now() + .seconds(60), on: loop),
        ]
        #expect(signal.waiterCount == 2)
        signal.wakeAll()
        for wait in waiting { #expect(try await wait.get() == true) }
        #expect(signal.waiterCount == 0)
        #expect(signal.generation(of: "a") > a)
        #expect(try await signal.wait(appID: "never-signalled", after: never, until: .now() + .seconds(60), on: loop).get() == true)
    }
}

/// Two nodes on one database: a reader waiting on one is woken by the other's commit, not by a poll.
@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)), .timeLimit(.minutes(3)))
struct PostgresEventRelayTests {
    static func store(schema: String, node: String) async throws -> PostgresActivityStore {
        var configuration = try PostgresTestDatabase.configuration(schema: schema)
        configuration.applicationName = "lrtest-relay-\(node)-\(schema)"
        return try await PostgresActivityStore(configuration: configuration)
    }

    /// A wait of a minute: far past the store's poll, which the waits here never use (only the
    /// store's readers poll), so a wait that ends true was woken by a signal.
    static func wait(_ store: PostgresActivityStore, after generation: UInt64) -> EventLoopFuture<Bool> {
        store.eventCommits.wait(appID: appID, after: generation, until: .now() + .seconds(60), on: StoreBehaviourSuite.group.any())
    }

    @Test func anotherNodesCommitWakesAReaderHereAndItsListenerComesBackAfterItsConnectionIsKilled() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let a = try await Self.store(schema: schema, node: "a")
            let b = try await Self.store(schema: schema, node: "b")
            try await eventually("node b listening") { b.eventRelay.listens == 1 }
            let first = Self.wait(b, after: b.eventCommits.generation(of: appID))
            try await EventFeedBehaviours.record(a, [EventFeedBehaviours.event(1)])
            #expect(try await first.get() == true)
            #expect(try await EventFeedBehaviours.readAll(b).entries.map { $0.event.reason } == ["reason-1"])

            // Node b's listening connection dies: b listens again and wakes every reader, since
            // what a commit told meanwhile went unheard.
            let beforeKill = b.eventCommits.generation(of: appID)
            let killed = try await PostgresTestDatabase.sql(
                [
                    """
                    SELECT pg_terminate_backend(pid)::text FROM pg_stat_activity
                    WHERE application_name = 'lrtest-relay-b-\(schema)' AND (query LIKE 'LISTEN%' OR query = 'SELECT 1')
                    """
                ], schema: schema)
            #expect(killed.count == 1, "node b's listener was found")
            #expect(try await Self.wait(b, after: beforeKill).get() == true)
            try await eventually("node b listening again") { b.eventRelay.listens == 2 }
            // Listening again, not only woken once: the next commit of node a arrives too.
            let again = Self.wait(b, after: b.eventCommits.generation(of: appID))
            try await EventFeedBehaviours.record(a, [EventFeedBehaviours.event(2)])
            #expect(try await again.get() == true)
            #expect(b.eventRelay.listens == 2)
            try await a.close()
            try await b.close()
        }
    }

    /// Stores of another schema share the channel: their notifications wake no reader here.
    @Test func anotherSchemasCommitsWakeNoReaderHere() async throws {
        try await PostgresTestDatabase.withSchema { other in
            try await PostgresTestDatabase.withSchema { schema in
                let elsewhere = try await Self.store(schema: other, node: "x")
                let a = try await Self.store(schema: schema, node: "a")
                try await eventually("node a listening") { a.eventRelay.listens == 1 }
                let start = a.eventCommits.generation(of: appID)
                let idle = a.eventCommits.wait(
                    appID: appID, after: start, until: .now() + .seconds(2), on: StoreBehaviourSuite.group.any())
                try await EventFeedBehaviours.record(elsewhere, [EventFeedBehaviours.event(1)])
                #expect(try await idle.get() == false, "another schema's commit woke a reader of this one")
                #expect(a.eventCommits.generation(of: appID) == start)
                try await elsewhere.close()
                try await a.close()
            }
        }
    }
}
