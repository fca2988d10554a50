import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayTestSupport
import Testing

@testable import LiveRelayStore
@testable import LiveRelayStorePostgres
@testable import LiveRelayStoreSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite struct InMemoryChannelStoreTests {
    @Test(arguments: ChannelBehaviourSuite.all)
    func behaviour(_ behaviour: ChannelBehaviour) async throws {
        try await behaviour.run { InMemoryChannelStore() }
    }
}

@Suite struct SQLiteChannelStoreTests {
    @Test(arguments: ChannelBehaviourSuite.all)
    func behaviour(_ behaviour: ChannelBehaviour) async throws {
        let directory = try makeTemporaryDirectory("liverelay-channels-")
        defer { removeDirectory(directory) }
        try await behaviour.run { try SQLiteChannelStore(dataDirectory: directory) }
    }

    @Test func theFileAndItsWALAreOwnerOnlyFromCreation() async throws {
        let directory = try makeTemporaryDirectory("liverelay-channels-")
        defer { removeDirectory(directory) }
        let previous = umask(0o022)
        defer { umask(previous) }
        let store = try SQLiteChannelStore(dataDirectory: directory)
        #expect(store.path == directory + "/channels.sqlite3")
        try await store.create(ChannelBehaviourSuite.channel("AAAA"), limit: 10)
        for file in [store.path, store.path + "-wal", store.path + "-shm"] {
            var info = stat()
            #expect(stat(file, &info) == 0, "\(file) exists while the store is open")
            #expect(info.st_mode & 0o777 == 0o600, "\(file) is \(String(info.st_mode & 0o777, radix: 8))")
        }
        try await store.close()
    }

    @Test func aFileOthersCouldReadIsMadeOwnerOnlyWhenOpened() async throws {
        let directory = try makeTemporaryDirectory("liverelay-channels-")
        defer { removeDirectory(directory) }
        let path = directory + "/" + SQLiteChannelStore.fileName
        leaveReadableByOthers(path)
        let logs = LogRecorder()
        let store = try SQLiteChannelStore(dataDirectory: directory, logger: logs.logger())
        try await store.create(ChannelBehaviourSuite.channel("AAAA"), limit: 10)
        expectMadeOwnerOnly(path, logs: logs)
        try await store.close()
    }

    @Test func reopeningTheFileKeepsEverything() async throws {
        let directory = try makeTemporaryDirectory("liverelay-channels-")
        defer { removeDirectory(directory) }
        let store = try SQLiteChannelStore(dataDirectory: directory)
        #expect(store.openedSchemaVersion == 0)
        let channels = [
            ChannelBehaviourSuite.channel("AAAA", .sandbox, .noStorage, at: t0 + .milliseconds(7)),
            ChannelBehaviourSuite.channel("BBBB"), ChannelBehaviourSuite.channel("CCCC", app: "rides"),
        ]
        for channel in channels { try await store.create(channel, limit: 2) }
        try await store.close()

        let reopened = try SQLiteChannelStore(dataDirectory: directory)
        #expect(reopened.openedSchemaVersion == SQLiteChannelStore.schemaVersion)
        #expect(try await reopened.list(appID: "orders", environment: nil, after: nil, limit: 10) == Array(channels.prefix(2)))
        #expect(try await reopened.channel(appID: "rides", channelID: "CCCC") == channels[2])
        // The limit counts what the file kept.
        try await reopened.create(ChannelBehaviourSuite.channel("DDDD"), limit: 2)
        #expect(
            await ChannelBehaviourSuite.refusal(reopened, ChannelBehaviourSuite.channel("EEEE"), limit: 2)
                == .limitReached(count: 2, limit: 2))
        try await reopened.close()
    }

    @Test func aFileBusyInAnotherConnectionIsUnavailable() async throws {
        let directory = try makeTemporaryDirectory("liverelay-channels-")
        defer { removeDirectory(directory) }
        let store = try SQLiteChannelStore(dataDirectory: directory, busyTimeoutMilliseconds: 50)
        // Another process (a tool) holding the write lock past the busy timeout.
        let other = try SQLiteConnection(path: store.path, create: false)
        try other.execute("BEGIN IMMEDIATE")
        #expect(
            await ChannelBehaviourSuite.refusal(store, ChannelBehaviourSuite.channel("AAAA")).map { error in
                if case .unavailable = error { true } else { false }
            } == true)
        try other.execute("ROLLBACK")
        other.close()
        try await store.create(ChannelBehaviourSuite.channel("AAAA"), limit: 10)
        try await store.close()
    }
}

@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)), .timeLimit(.minutes(3)))
struct PostgresChannelStoreTests {
    static func store(schema: String, node: String = "a") async throws -> PostgresChannelStore {
        var configuration = try PostgresTestDatabase.configuration(schema: schema)
        configuration.applicationName = "lrtest-\(node)-\(schema)"
        return try await PostgresChannelStore(configuration: configuration)
    }

    @Test(arguments: ChannelBehaviourSuite.all)
    func behaviour(_ behaviour: ChannelBehaviour) async throws {
        try await PostgresTestDatabase.withSchema { schema in
            try await behaviour.run { try await Self.store(schema: schema) }
        }
    }

    @Test func twoNodesRacingForTheLastSlotsNeverExceedTheLimit() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let a = try await Self.store(schema: schema, node: "a")
            let b = try await Self.store(schema: schema, node: "b")
            #expect(a.openedSchemaVersion == 0 || b.openedSchemaVersion == 0)
            let outcomes = await withTaskGroup(of: ChannelStoreError?.self) { group in
                for i in 0..<16 {
                    group.addTask {
                        await ChannelBehaviourSuite.refusal(
                            i.isMultiple(of: 2) ? a : b, ChannelBehaviourSuite.channel("race\(i)"), limit: 5)
                    }
                }
                return await group.reduce(into: [ChannelStoreError?]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == nil }.count == 5)
            #expect(try await b.count(appID: "orders", environment: .production) == 5)
            try await a.close()
            try await b.close()
        }
    }

    @Test func theChannelsKeepTheirOwnSchemaVersion() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            try await Self.store(schema: schema).close()
            try await PostgresTestDatabase.store(schema: schema).close()
            let reopened = try await Self.store(schema: schema)
            #expect(reopened.openedSchemaVersion == PostgresChannelStore.schemaVersion)
            try await reopened.close()
            let own = try await PostgresTestDatabase.sql(
                ["SELECT version::text FROM \"\(schema)\".channel_schema_version ORDER BY version"], schema: schema)
            #expect(own == (1...PostgresChannelStore.schemaVersion).map { [String($0)] })
        }
    }
}
