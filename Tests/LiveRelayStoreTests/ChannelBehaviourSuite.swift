import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Testing

/// Makes a fresh, empty channel store for one behaviour.
typealias ChannelStoreFactory = @Sendable () async throws -> any ChannelStore

/// One behaviour every ``ChannelStore`` must have: the memory, SQLite and
/// PostgreSQL tests run ``ChannelBehaviourSuite/all`` with their own factory,
/// as the registries run ``RegistryBehaviourSuite``. Each behaviour closes
/// the store it made.
struct ChannelBehaviour: Sendable, CustomStringConvertible {
    var description: String
    var run: @Sendable (ChannelStoreFactory) async throws -> Void
}

enum ChannelBehaviourSuite {
    static let all: [ChannelBehaviour] = [
        ChannelBehaviour(description: "a created channel reads back whole", run: roundTrip),
        ChannelBehaviour(description: "a taken (app, id) is alreadyExists and changes nothing", run: duplicate),
        ChannelBehaviour(description: "the limit counts the app's channels in one environment", run: limit),
        ChannelBehaviour(description: "another app's channel is invisible and untouchable", run: otherApp),
        ChannelBehaviour(description: "pages come in id order, by environment or not", run: paging),
        ChannelBehaviour(description: "delete says whether it deleted, and frees a slot", run: delete),
        ChannelBehaviour(description: "concurrent creates at the limit never exceed it", run: concurrentCreates),
        ChannelBehaviour(description: "a closed store is unavailable", run: closed),
    ]

    static func channel(
        _ id: String, app: String = "orders", _ environment: APNsEnvironment = .production,
        _ policy: ChannelStoragePolicy = .mostRecentMessage, at time: UnixTime = t0
    ) -> ChannelRecord {
        ChannelRecord(appID: app, id: id, environment: environment, storagePolicy: policy, createdAt: time)
    }

    static func refusal(_ store: any ChannelStore, _ channel: ChannelRecord, limit: Int = 100) async -> ChannelStoreError? {
        do {
            try await store.create(channel, limit: limit)
            return nil
        } catch let error as ChannelStoreError {
            return error
        } catch {
            Issue.record("expected a ChannelStoreError, got \(error)")
            return nil
        }
    }

    static func roundTrip(_ make: ChannelStoreFactory) async throws {
        let store = try await make()
        let sandbox = channel("c2FuZGJveA==", .sandbox, .noStorage, at: t0 + .milliseconds(123))
        let production = channel("cHJvZHVjdGlvbg==", .production, .mostRecentMessage)
        try await store.create(sandbox, limit: 10)
        try await store.create(production, limit: 10)
        #expect(try await store.channel(appID: "orders", channelID: sandbox.id) == sandbox)
        #expect(try await store.channel(appID: "orders", channelID: production.id) == production)
        #expect(try await store.channel(appID: "orders", channelID: "bm9uZQ==") == nil)
        #expect(try await store.count(appID: "orders", environment: nil) == 2)
        #expect(try await store.count(appID: "orders", environment: .sandbox) == 1)
        try await store.close()
    }

    static func duplicate(_ make: ChannelStoreFactory) async throws {
        let store = try await make()
        try await store.create(channel("AAAA"), limit: 10)
        // The same id in the other environment, or with another policy, is still the same channel key.
        #expect(await refusal(store, channel("AAAA", .sandbox, .noStorage, at: t0 + .seconds(5))) == .alreadyExists)
        // A duplicate at the limit is a duplicate: the id is checked first.
        #expect(await refusal(store, channel("AAAA"), limit: 1) == .alreadyExists)
        #expect(try await store.channel(appID: "orders", channelID: "AAAA") == channel("AAAA"))
        #expect(try await store.count(appID: "orders", environment: nil) == 1)
        try await store.close()
    }

    static func limit(_ make: ChannelStoreFactory) async throws {
        let store = try await make()
        for id in ["AAAA", "BBBB", "CCCC"] { try await store.create(channel(id), limit: 3) }
        #expect(await refusal(store, channel("DDDD"), limit: 3) == .limitReached(count: 3, limit: 3))
        #expect(try await store.channel(appID: "orders", channelID: "DDDD") == nil)
        // The other environment and the other apps have their own counts.
        try await store.create(channel("DDDD", .sandbox), limit: 3)
        try await store.create(channel("DDDD", app: "rides"), limit: 3)
        // A lower limit than the count refuses with the count as it is.
        #expect(await refusal(store, channel("EEEE"), limit: 2) == .limitReached(count: 3, limit: 2))
        #expect(await refusal(store, channel("EEEE"), limit: 0) == .limitReached(count: 3, limit: 0))
        #expect(try await store.count(appID: "orders", environment: .production) == 3)
        try await store.close()
    }

    static func otherApp(_ make: ChannelStoreFactory) async throws {
        let store = try await make()
        try await store.create(channel("AAAA", app: "orders"), limit: 10)
        #expect(try await store.channel(appID: "rides", channelID: "AAAA") == nil)
        #expect(try await store.list(appID: "rides", environment: nil, after: nil, limit: 10).isEmpty)
        #expect(try await store.count(appID: "rides", environment: nil) == 0)
        #expect(try await store.delete(appID: "rides", channelID: "AAAA") == false)
        #expect(try await store.channel(appID: "orders", channelID: "AAAA") != nil)
        // The same id is free for another app (APNs ids are per app): each sees its own.
        try await store.create(channel("AAAA", app: "rides", .sandbox), limit: 10)
        #expect(try await store.channel(appID: "rides", channelID: "AAAA")?.environment == .sandbox)
        #expect(try await store.channel(appID: "orders", channelID: "AAAA")?.environment == .production)
        try await store.close()
    }

    static func paging(_ make: ChannelStoreFactory) async throws {
        let store = try await make()
        // Created out of order, with base64's upper, lower, digit and symbol characters (byte order: + / 0-9 = A-Z _ a-z).
        let ids = ["b2", "A1", "+x", "Z9", "_q", "09", "a0", "/y", "B0", "=="]
        for (i, id) in ids.enumerated() {
            try await store.create(channel(id, i.isMultiple(of: 2) ? .production : .sandbox), limit: 100)
        }
        let sorted = ids.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var seen: [String] = []
        var after: String?
        while true {
            let page = try await store.list(appID: "orders", environment: nil, after: after, limit: 3)
            seen += page.map(\.id)
            guard page.count == 3 else { break }
            after = page.last?.id
        }
        #expect(seen == sorted)
        let production = try await store.list(appID: "orders", environment: .production, after: nil, limit: 100)
        #expect(production.map(\.id) == sorted.filter { ids.firstIndex(of: $0)!.isMultiple(of: 2) })
        #expect(production.allSatisfy { $0.environment == .production })
        let sandboxAfter = try await store.list(appID: "orders", environment: .sandbox, after: "A1", limit: 2)
        #expect(sandboxAfter.map(\.id) == Array(sorted.filter { !ids.firstIndex(of: $0)!.isMultiple(of: 2) && $0 > "A1" }.prefix(2)))
        #expect(try await store.list(appID: "orders", environment: nil, after: nil, limit: 0).isEmpty)
        #expect(try await store.list(appID: "orders", environment: nil, after: "b2", limit: 10).isEmpty)
        try await store.close()
    }

    static func delete(_ make: ChannelStoreFactory) async throws {
        let store = try await make()
        for id in ["AAAA", "BBBB"] { try await store.create(channel(id), limit: 2) }
        #expect(await refusal(store, channel("CCCC"), limit: 2) == .limitReached(count: 2, limit: 2))
        #expect(try await store.delete(appID: "orders", channelID: "AAAA") == true)
        #expect(try await store.delete(appID: "orders", channelID: "AAAA") == false)
        #expect(try await store.channel(appID: "orders", channelID: "AAAA") == nil)
        try await store.create(channel("CCCC"), limit: 2)
        // A deleted id may be created again.
        #expect(await refusal(store, channel("AAAA"), limit: 3) == nil)
        #expect(try await store.list(appID: "orders", environment: nil, after: nil, limit: 10).map(\.id) == ["AAAA", "BBBB", "CCCC"])
        try await store.close()
    }

    static func concurrentCreates(_ make: ChannelStoreFactory) async throws {
        let store = try await make()
        try await store.create(channel("base"), limit: 3)
        // Twenty creates race for the two slots left.
        let outcomes = await withTaskGroup(of: ChannelStoreError?.self) { group in
            for i in 0..<20 {
                group.addTask { await refusal(store, channel("race\(i)"), limit: 3) }
            }
            return await group.reduce(into: [ChannelStoreError?]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == nil }.count == 2)
        #expect(outcomes.filter { $0 == .limitReached(count: 3, limit: 3) }.count == 18)
        #expect(try await store.count(appID: "orders", environment: .production) == 3)
        try await store.close()
    }

    static func closed(_ make: ChannelStoreFactory) async throws {
        let store = try await make()
        try await store.close()
        for attempt in [
            { try await store.create(channel("AAAA"), limit: 10) },
            { _ = try await store.channel(appID: "orders", channelID: "AAAA") },
            { _ = try await store.count(appID: "orders", environment: nil) },
        ] as [@Sendable () async throws -> Void] {
            do {
                try await attempt()
                Issue.record("a closed store answered")
            } catch let error as ChannelStoreError {
                guard case .unavailable = error else {
                    Issue.record("expected unavailable, got \(error)")
                    continue
                }
            }
        }
        try await store.close()
    }
}
