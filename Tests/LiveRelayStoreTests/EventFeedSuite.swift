import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import LiveRelayStorePostgres
@testable import LiveRelayStoreSQLite

/// The event feed's behaviours, the same for every store: the memory store,
/// SQLite and PostgreSQL run the one list (``EventFeedBehaviours/all``), and
/// each engine adds what only it has (a reopened file, two nodes on one database).
enum EventFeedBehaviours {
    static let all: [StoreBehaviour] = [
        StoreBehaviour(description: "appended events page in order, with more", run: pagesInOrder),
        StoreBehaviour(description: "a reader never sees a new event below a cursor it saw", run: commitOrder),
        StoreBehaviour(description: "an event whose key the feed holds is dropped", run: dedupe),
        StoreBehaviour(description: "each app has its own feed", run: perAppIsolation),
        StoreBehaviour(description: "retention trims by age and by count, and cursors keep growing", run: trim),
        StoreBehaviour(description: "a commit that appends wakes the feed's waiters", run: signalled),
        StoreBehaviour(description: "every field of an event survives the store", run: bodyRoundTrip),
        StoreBehaviour(description: "the last cursor covers every committed event, trimmed ones too", run: lastCursor),
        StoreBehaviour(description: "a page tells the last cursor it looked at", run: scannedThrough),
    ]

    static let other = "com.example.other"

    static func event(_ n: Int, app: String = appID, at time: UnixTime = t0, key: String? = nil) -> FeedEvent {
        FeedEvent(appID: app, kind: .dispatchHeld, time: time, reason: "reason-\(n)", dedupeKey: key)
    }

    static func record(_ store: any ActivityStore, _ events: [FeedEvent], now: UnixTime = t0) async throws {
        try await StoreBehaviourSuite.apply(store, RecordEvents(events), now: now)
    }

    /// Every entry after `cursor`, `pageSize` at a time; checks `more` on the way.
    static func readAll(
        _ store: any ActivityStore, app: String = appID, after cursor: UInt64 = 0, pageSize: Int = 3,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (entries: [FeedEntry], trimmedThrough: UInt64) {
        var entries: [FeedEntry] = []
        var cursor = cursor
        var trimmed: UInt64 = 0
        while true {
            let page = try await store.events(appID: app, after: cursor, limit: pageSize, on: StoreBehaviourSuite.group.any()).get()
            #expect(page.entries.count <= pageSize, sourceLocation: sourceLocation)
            #expect(page.entries.allSatisfy { $0.cursor > cursor && $0.event.appID == app }, sourceLocation: sourceLocation)
            #expect(page.scannedThrough >= page.entries.last?.cursor ?? 0, sourceLocation: sourceLocation)
            trimmed = page.trimmedThrough
            entries += page.entries
            guard page.more else { break }
            #expect(page.scannedThrough > cursor, "a page with more moves the cursor on", sourceLocation: sourceLocation)
            // Past unreadable rows too (a newer build's kinds), which leave a page short.
            cursor = page.scannedThrough
        }
        let cursors = entries.map(\.cursor)
        #expect(cursors == cursors.sorted() && Set(cursors).count == cursors.count, "\(cursors)", sourceLocation: sourceLocation)
        return (entries, trimmed)
    }

    static func pagesInOrder(_ make: StoreFactory) async throws {
        let store = try await make()
        let empty = try await store.events(appID: appID, after: 0, limit: 10, on: StoreBehaviourSuite.group.any()).get()
        #expect(empty == EventPage())
        try await record(store, (0..<5).map { event($0) })
        try await record(store, (5..<8).map { event($0) })
        let first = IntentKey(appID: appID, activityID: "order-1", timestamp: 10)
        let second = IntentKey(appID: appID, activityID: "order-2", timestamp: 11)
        try await StoreBehaviourSuite.apply(
            store,
            SettleIntents([
                SettledIntent(key: first, account: EnqueueResult(delivered: 2)),
                SettledIntent(
                    key: second, account: EnqueueResult(delivered: 1, failures: ["BadDeviceToken": 1]),
                    failedPushes: [FailedPush(target: hex(9), reason: "BadDeviceToken")]),
            ]), now: t0 + .seconds(1))

        let all = try await readAll(store)
        #expect(all.trimmedThrough == 0)
        let expected =
            (0..<8).map { event($0) } + [
                .callSettled(first, account: EnqueueResult(delivered: 2), at: t0 + .seconds(1)),
                .pushFailed(second, token: hex(9), reason: "BadDeviceToken", at: t0 + .seconds(1)),
                .callSettled(second, account: EnqueueResult(delivered: 1, failures: ["BadDeviceToken": 1]), at: t0 + .seconds(1)),
            ]
        #expect(all.entries.map(\.event) == expected)

        // One page with all, one past the end, one from the middle.
        let loop = StoreBehaviourSuite.group.any()
        let whole = try await store.events(appID: appID, after: 0, limit: 100, on: loop).get()
        #expect(whole.entries == all.entries && !whole.more)
        let exact = try await store.events(appID: appID, after: 0, limit: expected.count, on: loop).get()
        #expect(exact.entries == all.entries && !exact.more)
        let past = try await store.events(appID: appID, after: all.entries.last!.cursor, limit: 5, on: loop).get()
        #expect(past.entries.isEmpty && !past.more)
        let middle = try await store.events(appID: appID, after: all.entries[3].cursor, limit: 2, on: loop).get()
        #expect(middle.entries == Array(all.entries[4...5]) && middle.more)
        try await store.close()
    }

    /// Writers append concurrently while a reader reads the whole feed again and again: whatever
    /// the interleaving, each read's new cursors are above every cursor an earlier read saw.
    static func commitOrder(_ make: StoreFactory) async throws {
        let store = try await make()
        try await concurrentAppends(writers: [store, store], reader: store, count: 60)
        try await store.close()
    }

    /// `count` single-event appends spread over `writers`, all at once, checked by a reader of `reader`.
    static func concurrentAppends(
        writers: [any ActivityStore], reader: any ActivityStore, count: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let done = NIOLockedValueBox(false)
        let written = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                var seen = Set<UInt64>()
                var highest: UInt64 = 0
                var reads = 0
                while true {
                    let finished = done.withLockedValue { $0 }
                    let entries = try await readAll(reader, pageSize: 16, sourceLocation: sourceLocation).entries
                    let fresh = entries.filter { !seen.contains($0.cursor) }
                    #expect(fresh.allSatisfy { $0.cursor > highest }, "new events below cursor \(highest)", sourceLocation: sourceLocation)
                    #expect(Set(entries.map(\.cursor)).isSuperset(of: seen), "an event went missing", sourceLocation: sourceLocation)
                    seen.formUnion(entries.map(\.cursor))
                    highest = max(highest, entries.last?.cursor ?? 0)
                    reads += 1
                    if finished { return -reads }
                }
            }
            for i in 0..<count {
                let writer = writers[i % writers.count]
                group.addTask {
                    try await record(writer, [event(i)])
                    return i
                }
            }
            var written: [Int] = []
            for _ in 0..<count { written.append(try await group.next()!) }
            done.withLockedValue { $0 = true }
            _ = try await group.next()
            return written
        }
        #expect(written.count == count)
        let entries = try await readAll(reader, pageSize: 25, sourceLocation: sourceLocation).entries
        #expect(entries.count == count, sourceLocation: sourceLocation)
        #expect(Set(entries.map { $0.event.reason ?? "" }) == Set((0..<count).map { "reason-\($0)" }), sourceLocation: sourceLocation)
    }

    static func dedupe(_ make: StoreFactory) async throws {
        let store = try await make()
        try await record(store, [event(1, key: "once"), event(2, key: "once"), event(3)])
        try await record(store, [event(4, key: "once"), event(5, key: "twice")])
        try await record(store, [event(6, key: "twice")])
        // The same key in another app is another fact.
        try await record(store, [event(7, app: other, key: "once")])
        let key = IntentKey(appID: appID, activityID: "order-1", timestamp: 10)
        for _ in 0..<2 {
            try await StoreBehaviourSuite.apply(store, SettleIntents([SettledIntent(key: key, account: EnqueueResult(delivered: 1))]))
        }
        let entries = try await readAll(store).entries
        #expect(entries.map { $0.event.reason } == ["reason-1", "reason-3", "reason-5", nil])
        #expect(entries.last?.event.kind == .callSettled)
        #expect(try await readAll(store, app: other).entries.map { $0.event.reason } == ["reason-7"])
        try await store.close()
    }

    static func perAppIsolation(_ make: StoreFactory) async throws {
        let store = try await make()
        try await record(store, [event(1), event(2, app: other), event(3)])
        try await record(store, [event(4, app: other)])
        let mine = try await readAll(store)
        let theirs = try await readAll(store, app: other)
        #expect(mine.entries.map { $0.event.reason } == ["reason-1", "reason-3"])
        #expect(theirs.entries.map { $0.event.reason } == ["reason-2", "reason-4"])
        #expect(try await readAll(store, app: "com.example.nobody").entries.isEmpty)
        // Retention by count trims each feed on its own.
        let trimmed = try await store.trimEvents(EventRetention(maxPerApp: 1), now: t0, on: StoreBehaviourSuite.group.any()).get()
        #expect(trimmed == 2)
        let mineAfter = try await readAll(store)
        let theirsAfter = try await readAll(store, app: other)
        #expect(mineAfter.entries == [mine.entries[1]] && mineAfter.trimmedThrough == mine.entries[0].cursor)
        #expect(theirsAfter.entries == [theirs.entries[1]] && theirsAfter.trimmedThrough == theirs.entries[0].cursor)
        try await store.close()
    }

    static func trim(_ make: StoreFactory) async throws {
        let store = try await make()
        let loop = StoreBehaviourSuite.group.any()
        try await record(store, (0..<10).map { event($0, at: t0 + .seconds(Int64($0))) })
        let before = try await readAll(store).entries
        #expect(before.count == 10)
        #expect(try await store.trimEvents(EventRetention(), now: t0 + .seconds(10), on: loop).get() == 0)

        // By age: the events older than t0 + 5 s go.
        let byAge = try await store.trimEvents(EventRetention(maxAge: .seconds(60)), now: t0 + .seconds(65), on: loop).get()
        #expect(byAge == 5)
        let afterAge = try await readAll(store)
        #expect(afterAge.entries == Array(before[5...]))
        #expect(afterAge.trimmedThrough == before[4].cursor)
        // A reader below the mark learns it missed events; one above reads on.
        let behind = try await store.events(appID: appID, after: before[1].cursor, limit: 2, on: loop).get()
        #expect(behind.trimmedThrough == before[4].cursor && behind.entries == Array(before[5...6]) && behind.more)

        // By count: the newest two stay.
        let byCount = try await store.trimEvents(EventRetention(maxPerApp: 2), now: t0 + .seconds(10), on: loop).get()
        #expect(byCount == 3)
        let afterCount = try await readAll(store)
        #expect(afterCount.entries == Array(before[8...]))
        #expect(afterCount.trimmedThrough == before[7].cursor)

        // A later append still goes after everything the feed ever held.
        try await record(store, [event(10, at: t0 + .seconds(20))])
        let appended = try await readAll(store, after: before[9].cursor).entries
        #expect(appended.map { $0.event.reason } == ["reason-10"])
        #expect(appended[0].cursor > before[9].cursor)

        // Everything, then one more: the feed is empty, the mark is its last cursor, and cursors still grow.
        let everything = try await store.trimEvents(EventRetention(maxAge: .seconds(1)), now: t0 + .hours(1), on: loop).get()
        #expect(everything == 3)
        let emptied = try await readAll(store)
        #expect(emptied.entries.isEmpty && emptied.trimmedThrough == appended[0].cursor)
        try await record(store, [event(11, at: t0 + .hours(1))])
        let last = try await readAll(store)
        #expect(last.entries.count == 1 && last.entries[0].cursor > appended[0].cursor)
        #expect(last.trimmedThrough == appended[0].cursor)
        try await store.close()
    }

    static func signalled(_ make: StoreFactory) async throws {
        let store = try await make()
        let loop = StoreBehaviourSuite.group.any()
        let signal = store.eventCommits
        let generation = signal.generation(of: appID)
        let otherGeneration = signal.generation(of: other)
        let woken = signal.wait(appID: appID, after: generation, until: .now() + .seconds(20), on: loop)
        let idle = signal.wait(appID: other, after: otherGeneration, until: .now() + .milliseconds(300), on: loop)
        try await record(store, [event(1)])
        #expect(try await woken.get() == true)
        #expect(signal.generation(of: appID) > generation)
        // What the waiter was woken for is there to read.
        #expect(try await readAll(store).entries.map { $0.event.reason } == ["reason-1"])
        // Another app's waiter is not woken: it times out.
        #expect(try await idle.get() == false)
        #expect(signal.generation(of: other) == otherGeneration)
        // A wait that starts at an old generation returns at once.
        #expect(try await signal.wait(appID: appID, after: generation, until: .now() + .seconds(20), on: loop).get() == true)
        // The signal comes from a mutation's own events too (a settlement).
        let now = signal.generation(of: appID)
        let settled = signal.wait(appID: appID, after: now, until: .now() + .seconds(20), on: loop)
        let key = IntentKey(appID: appID, activityID: "order-1", timestamp: 10)
        try await StoreBehaviourSuite.apply(store, SettleIntents([SettledIntent(key: key, account: EnqueueResult(delivered: 1))]))
        #expect(try await settled.get() == true)
        #expect(signal.waiterCount == 0)
        try await store.close()
    }

    /// Every kind, with every field set, and the same with none of the optional ones.
    static let everyField: [FeedEvent] = FeedEvent.Kind.allCases.flatMap { kind in
        [
            FeedEvent(
                appID: appID, kind: kind, time: t0 + .milliseconds(Int64(kind.rawValue)), activityID: "order-\(kind.rawValue)",
                callTimestamp: 1_700_000_000 + Int64(kind.rawValue),
                account: EnqueueResult(
                    delivered: 3, pruned: 1, superseded: 2, expired: 4, failures: ["BadDeviceToken": 1, "Unregistered \"x\"": 2]),
                token: hex(kind.rawValue), tokenKind: kind.rawValue % 2 == 0 ? .update : .pushToStart, reason: "Why \"not\" ✓",
                invalidSince: UnixTime(milliseconds: 1_699_999_999_123), activityState: .dismissed, channelID: "channel-\(kind.rawValue)",
                dedupeKey: "key \(kind.rawValue)"),
            FeedEvent(appID: appID, kind: kind, time: t0 - .milliseconds(Int64(kind.rawValue))),
        ]
    }

    static func lastCursor(_ make: StoreFactory) async throws {
        let store = try await make()
        let loop = StoreBehaviourSuite.group.any()
        #expect(try await store.lastEventCursor(appID: appID, on: loop).get() == 0, "no event yet")
        try await record(store, (0..<3).map { event($0, at: t0 + .seconds(Int64($0))) })
        try await record(store, [event(3, app: other)])
        let mine = try await readAll(store).entries
        let last = try await store.lastEventCursor(appID: appID, on: loop).get()
        #expect(last == mine.last?.cursor)
        let theirs = try await readAll(store, app: other).entries
        #expect(try await store.lastEventCursor(appID: other, on: loop).get() == theirs.last?.cursor)
        #expect(try await store.lastEventCursor(appID: "com.example.nobody", on: loop).get() == 0)
        // A key the feed holds hands out no cursor.
        try await record(store, [event(4, key: "k"), event(5, key: "k")])
        let keyed = try await store.lastEventCursor(appID: appID, on: loop).get()
        let withKeyed = try await readAll(store).entries
        #expect(keyed > last && keyed == withKeyed.last?.cursor && withKeyed.count == 4)

        // Every event trimmed: still the last cursor, so a reader starting there missed nothing.
        let trimmed = try await store.trimEvents(EventRetention(maxAge: .seconds(1)), now: t0 + .hours(1), on: loop).get()
        #expect(trimmed == 5, "this app's four and the other's one")
        let emptied = try await store.events(appID: appID, after: 0, limit: 10, on: loop).get()
        #expect(emptied.entries.isEmpty && emptied.trimmedThrough == keyed)
        #expect(try await store.lastEventCursor(appID: appID, on: loop).get() == keyed)
        // What is committed after the call has a higher cursor: a reader from it gets exactly that.
        try await record(store, [event(6, at: t0 + .hours(1))])
        let after = try await store.events(appID: appID, after: keyed, limit: 10, on: loop).get()
        #expect(after.entries.map { $0.event.reason } == ["reason-6"] && after.trimmedThrough <= keyed)
        #expect(try await store.lastEventCursor(appID: appID, on: loop).get() == after.entries.last?.cursor)
        try await store.close()
    }

    static func scannedThrough(_ make: StoreFactory) async throws {
        let store = try await make()
        let loop = StoreBehaviourSuite.group.any()
        try await record(store, (0..<5).map { event($0) })
        let all = try await readAll(store).entries
        let full = try await store.events(appID: appID, after: 0, limit: 2, on: loop).get()
        #expect(full.more && full.scannedThrough == all[1].cursor)
        let rest = try await store.events(appID: appID, after: all[1].cursor, limit: 10, on: loop).get()
        #expect(!rest.more && rest.scannedThrough == all[4].cursor)
        let past = try await store.events(appID: appID, after: all[4].cursor, limit: 10, on: loop).get()
        #expect(past.entries.isEmpty && past.scannedThrough == 0, "nothing looked at")
        #expect(past.nextCursor(after: all[4].cursor) == all[4].cursor)
        let none = try await store.events(appID: appID, after: 0, limit: 0, on: loop).get()
        #expect(none.entries.isEmpty && none.more && none.scannedThrough == 0)
        try await store.close()
    }

    /// The app's feed holds reason-1, three rows this build cannot read, then reason-2: a page of
    /// nothing but those rows is empty, and says how far it looked, so a reader moves past them.
    static func pageOfUnreadableRows(_ store: any ActivityStore) async throws {
        let loop = StoreBehaviourSuite.group.any()
        let first = try #require(try await store.events(appID: appID, after: 0, limit: 1, on: loop).get().entries.first)
        #expect(first.event.reason == "reason-1")
        let unreadable = try await store.events(appID: appID, after: first.cursor, limit: 3, on: loop).get()
        #expect(unreadable.entries.isEmpty && unreadable.more)
        #expect(unreadable.scannedThrough > first.cursor)
        #expect(unreadable.nextCursor(after: first.cursor) == unreadable.scannedThrough)
        let rest = try await store.events(appID: appID, after: unreadable.scannedThrough, limit: 3, on: loop).get()
        #expect(rest.entries.map { $0.event.reason } == ["reason-2"] && !rest.more)
        #expect(rest.scannedThrough == rest.entries.last?.cursor)
        #expect(try await store.lastEventCursor(appID: appID, on: loop).get() == rest.entries.last?.cursor)
        #expect(try await readAll(store).entries.map { $0.event.reason } == ["reason-1", "reason-2"])
    }

    static func bodyRoundTrip(_ make: StoreFactory) async throws {
        let store = try await make()
        try await record(store, everyField)
        try await record(store, [FeedEvent(appID: appID, kind: .activityEnded, time: t0, activityState: .expired)])
        let read = try await readAll(store).entries.map(\.event)
        #expect(read == everyField + [FeedEvent(appID: appID, kind: .activityEnded, time: t0, activityState: .expired)])
        try await store.close()
    }
}

@Suite struct EventFeedSuite {
    @Test(arguments: EventFeedBehaviours.all)
    func memory(_ behaviour: StoreBehaviour) async throws {
        try await behaviour.run { InMemoryActivityStore() }
    }

    @Test(arguments: EventFeedBehaviours.all)
    func sqlite(_ behaviour: StoreBehaviour) async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        try await behaviour.run { try SQLiteActivityStore(path: directory + "/store.sqlite3") }
    }

    @Test func memoryAndSQLiteNeedNoPolling() throws {
        #expect(InMemoryActivityStore().eventPollInterval == nil)
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteActivityStore(path: directory + "/store.sqlite3")
        #expect(store.eventPollInterval == nil)
    }

    @Test func sqliteEventsSurviveAReopen() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let loop = StoreBehaviourSuite.group.any()
        let store = try SQLiteActivityStore(path: path)
        try await EventFeedBehaviours.record(store, EventFeedBehaviours.everyField)
        try await EventFeedBehaviours.record(store, (0..<4).map { EventFeedBehaviours.event($0, at: t0 - .hours(1), key: "k\($0)") })
        #expect(try await store.trimEvents(EventRetention(maxAge: .minutes(30)), now: t0, on: loop).get() == 0)
        #expect(try await store.trimEvents(EventRetention(maxPerApp: 10), now: t0, on: loop).get() == 8)
        let before = try await EventFeedBehaviours.readAll(store)
        #expect(before.entries.count == 10 && before.trimmedThrough > 0)
        try await store.close()

        let reopened = try SQLiteActivityStore(path: path)
        let after = try await EventFeedBehaviours.readAll(reopened)
        #expect(after.entries == before.entries && after.trimmedThrough == before.trimmedThrough)
        // The keys the feed holds are still held; cursors go on from where they were.
        try await EventFeedBehaviours.record(reopened, [EventFeedBehaviours.event(9, key: "key 7"), EventFeedBehaviours.event(10)])
        let appended = try await EventFeedBehaviours.readAll(reopened, after: before.entries.last!.cursor).entries
        #expect(appended.map { $0.event.reason } == ["reason-10"])
        try await reopened.close()
    }

    /// Rows a newer build wrote (a kind this one does not know) are skipped, not a failed page.
    @Test func sqliteSkipsUnreadableRowsAndTellsHowFarItLooked() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let store = try SQLiteActivityStore(path: path)
        try await EventFeedBehaviours.record(store, [EventFeedBehaviours.event(1)])
        try await store.close()
        do {
            let db = try SQLiteConnection(path: path, create: false)
            defer { db.close() }
            for _ in 0..<3 {
                try db.execute(#"INSERT INTO feed_events (app_id, time_ms, body) VALUES ('\#(appID)', 0, '{"kind":99}')"#)
            }
        }
        let reopened = try SQLiteActivityStore(path: path)
        try await EventFeedBehaviours.record(reopened, [EventFeedBehaviours.event(2)])
        try await EventFeedBehaviours.pageOfUnreadableRows(reopened)
        try await reopened.close()
    }

    /// A trim larger than one job's share (``ActivityStore/sweepLimit``) is done in several, and counts them all.
    @Test func sqliteTrimsInChunks() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteActivityStore(path: directory + "/store.sqlite3")
        let count = store.sweepLimit * 2 + 17
        for start in stride(from: 0, to: count, by: 5_000) {
            try await EventFeedBehaviours.record(store, (start..<min(count, start + 5_000)).map { EventFeedBehaviours.event($0) })
        }
        let trimmed = try await store.trimEvents(EventRetention(maxPerApp: 3), now: t0, on: StoreBehaviourSuite.group.any()).get()
        #expect(trimmed == count - 3)
        #expect(try await EventFeedBehaviours.readAll(store).entries.map { $0.event.reason } == (count - 3..<count).map { "reason-\($0)" })
        try await store.close()
    }
}

@Suite(.enabled(if: PostgresTestDatabase.enabled, Comment(rawValue: PostgresTestDatabase.skipReason)), .timeLimit(.minutes(3)))
struct EventFeedSuitePostgres {
    @Test(arguments: EventFeedBehaviours.all)
    func postgres(_ behaviour: StoreBehaviour) async throws {
        try await PostgresTestDatabase.withSchema { schema in
            try await behaviour.run { try await PostgresTestDatabase.store(schema: schema) }
        }
    }

    @Test func eventsSurviveAReopenAndOtherNodesArePolled() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let loop = StoreBehaviourSuite.group.any()
            let store = try await PostgresTestDatabase.store(schema: schema)
            #expect(store.eventPollInterval != nil)
            try await EventFeedBehaviours.record(store, EventFeedBehaviours.everyField)
            #expect(try await store.trimEvents(EventRetention(maxPerApp: 10), now: t0, on: loop).get() == 4)
            let before = try await EventFeedBehaviours.readAll(store)
            try await store.close()

            let reopened = try await PostgresTestDatabase.store(schema: schema)
            let after = try await EventFeedBehaviours.readAll(reopened)
            #expect(after.entries == before.entries && after.trimmedThrough == before.trimmedThrough)
            try await EventFeedBehaviours.record(reopened, [EventFeedBehaviours.event(9, key: "key 7"), EventFeedBehaviours.event(10)])
            let appended = try await EventFeedBehaviours.readAll(reopened, after: before.entries.last!.cursor).entries
            #expect(appended.map { $0.event.reason } == ["reason-10"])
            try await reopened.close()
        }
    }

    /// Two nodes append to one app at once, each with two lanes: one feed, unique cursors, and a
    /// reader on either node never sees a new event below a cursor it saw.
    @Test func twoNodesAppendToOneFeedInCommitOrder() async throws {
        try await PostgresRaceTests.twoNodes { a, b in
            try await EventFeedBehaviours.concurrentAppends(writers: [a, b], reader: b, count: 120)
            // Both nodes settle one call (one after its lease ran out on the other): one event.
            let key = IntentKey(appID: appID, activityID: "order-1", timestamp: 10)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for node in [a, b, a, b] {
                    group.addTask {
                        try await StoreBehaviourSuite.apply(
                            node, SettleIntents([SettledIntent(key: key, account: EnqueueResult(delivered: 1))]))
                    }
                }
                try await group.waitForAll()
            }
            let entries = try await EventFeedBehaviours.readAll(a).entries
            #expect(entries.count == 121)
            #expect(entries.filter { $0.event.kind == .callSettled }.count == 1)
        }
    }

    /// Rows a newer build wrote (a kind this one does not know) are skipped, not a failed page.
    @Test func anUnreadableRowIsSkipped() async throws {
        try await PostgresTestDatabase.withSchema { schema in
            let store = try await PostgresTestDatabase.store(schema: schema)
            try await EventFeedBehaviours.record(store, [EventFeedBehaviours.event(1)])
            try await PostgresTestDatabase.sql(
                [
                    """
                    INSERT INTO feed_events (app_id, cursor, time_ms, body)
                    SELECT '\(appID)', nextval('feed_events_cursor'), 0, '{"kind":99}' FROM generate_series(1, 3)
                    """
                ], schema: schema)
            try await EventFeedBehaviours.record(store, [EventFeedBehaviours.event(2)])
            try await EventFeedBehaviours.pageOfUnreadableRows(store)
            try await store.close()
        }
    }
}
