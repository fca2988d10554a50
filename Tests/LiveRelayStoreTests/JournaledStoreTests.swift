import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import Testing

@testable import LiveRelayStore

@Suite struct JournaledStoreTests {
    @Test(arguments: StoreBehaviourSuite.all)
    func behaviour(_ behaviour: StoreBehaviour) async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        try await behaviour.run {
            try JournaledActivityStore(configuration: .init(directory: directory + "/journal-\(UInt64.random(in: 0...UInt64.max))"))
        }
    }

    /// The state as a set of the writes that rebuild it: equal exactly when the states are.
    static func contents(_ state: InMemoryState) -> Set<StoreWrite> {
        var writes = Set<StoreWrite>()
        state.forEachWrite { writes.insert($0) }
        return writes
    }

    static let lease = IntentLease(owner: "node-a")

    /// Registrations, a rotation, a removal, an activity started, updated and ended with
    /// idempotency keys and durable intents: every kind of write the journal carries.
    static func exercise(_ store: any ActivityStore, round: Int) async throws {
        let base = round * 100
        for i in 0..<20 {
            try await StoreBehaviourSuite.apply(
                store, RegisterToken(pushToStart(hex(base + i), device: "device-\(base + i)", user: "user-\(i % 3)")))
        }
        let activity = "order-\(round)"
        try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(base + 50), activity: activity, device: "d1")))
        try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(base + 51), activity: activity, device: "d1")))
        try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(base + 52), activity: activity, device: "d2")))
        try await StoreBehaviourSuite.apply(
            store, RegisterToken(updateToken(hex(base + 52), activity: activity, device: "d2", remove: true)))
        try await StoreBehaviourSuite.apply(
            store, StartActivity(start(activity, key: "s\(round)"), app: app, intents: lease), now: t0 + .seconds(Int64(round)))
        try await StoreBehaviourSuite.apply(
            store, ChangeActivity(update(activity, key: "u\(round)"), app: app, intents: lease), now: t0 + .seconds(Int64(round) + 1))
        if round % 2 == 1 {
            try await StoreBehaviourSuite.apply(
                store, ChangeActivity(endRequest(activity), app: app, intents: lease), now: t0 + .seconds(Int64(round) + 2))
        }
    }

    @Test func aReopenedStoreHasEveryAcknowledgedWrite() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let configuration = JournaledActivityStore.Configuration(directory: directory + "/journal")
        let store = try JournaledActivityStore(configuration: configuration)
        for round in 0..<3 { try await Self.exercise(store, round: round) }
        let before = Self.contents(store.snapshot)
        #expect(store.snapshot.tokenCount > 60)
        #expect(store.snapshot.intentCount > 0)
        try await store.close()

        let reopened = try JournaledActivityStore(configuration: configuration)
        #expect(Self.contents(reopened.snapshot) == before)
        #expect(reopened.statistics.recordsReplayed > 60)
        #expect(reopened.statistics.openedFromSnapshot == 0)
        // It goes on where it stopped: a third open sees the second one's writes too.
        try await Self.exercise(reopened, round: 3)
        let after = Self.contents(reopened.snapshot)
        try await reopened.close()
        let third = try JournaledActivityStore(configuration: configuration)
        #expect(Self.contents(third.snapshot) == after)
        #expect(after != before)
        try await third.close()
    }

    @Test func aSnapshotReplacesTheJournalsBeforeIt() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        // A snapshot as soon as the journals hold anything (and the last snapshot's size).
        let configuration = JournaledActivityStore.Configuration(directory: directory + "/journal", compactAfterBytes: 1)
        let store = try JournaledActivityStore(configuration: configuration)
        for round in 0..<6 { try await Self.exercise(store, round: round) }
        let contents = Self.contents(store.snapshot)
        try await store.close()  // waits for a snapshot being written
        let statistics = store.statistics
        #expect(statistics.snapshots >= 1, "no snapshot was written: \(statistics)")
        #expect(statistics.lastSnapshotError == nil)

        let files = try FileManager.default.contentsOfDirectory(atPath: configuration.directory)
        let snapshots = files.filter { $0.hasPrefix("snapshot-") }
        #expect(snapshots.count == 1, "\(files)")
        let newest = try #require(snapshots.first.flatMap { UInt64($0.dropFirst(9).dropLast(4)) })
        // Nothing older than the newest snapshot is left: its journal and the ones after it.
        #expect(files.filter { $0.hasPrefix("journal-") }.allSatisfy { UInt64($0.dropFirst(8).dropLast(4))! >= newest }, "\(files)")

        let reopened = try JournaledActivityStore(configuration: configuration)
        #expect(reopened.statistics.openedFromSnapshot == newest)
        #expect(Self.contents(reopened.snapshot) == contents)
        try await reopened.close()
    }

    /// A record cut short at the end of the newest journal (a crash during its
    /// write, so never acknowledged) is cut off; what came before it stays.
    @Test func anUnfinishedWriteAtTheTailIsCutOff() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let configuration = JournaledActivityStore.Configuration(directory: directory + "/journal")
        let store = try JournaledActivityStore(configuration: configuration)
        try await Self.exercise(store, round: 0)
        let contents = Self.contents(store.snapshot)
        try await store.close()

        let journal = configuration.directory + "/" + JournalFile.name(.journal, 1)
        let handle = try #require(FileHandle(forWritingAtPath: journal))
        try handle.seekToEnd()
        // A header promising 100 bytes, then 10 of them.
        try handle.write(contentsOf: [100, 0, 0, 0, 1, 2, 3, 4] + [UInt8](repeating: 7, count: 10))
        try handle.close()
        let sizeBefore = try #require(try FileManager.default.attributesOfItem(atPath: journal)[.size] as? Int)

        let reopened = try JournaledActivityStore(configuration: configuration)
        #expect(reopened.statistics.tailBytesCut == 18)
        #expect(Self.contents(reopened.snapshot) == contents)
        #expect(try FileManager.default.attributesOfItem(atPath: journal)[.size] as? Int == sizeBefore - 18)
        try await reopened.close()
    }

    /// A start that writes nothing leaves no file behind: the next start reuses its number.
    @Test func startsWithoutWritesLeaveNoEmptyJournals() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let configuration = JournaledActivityStore.Configuration(directory: directory + "/journal")
        let first = try JournaledActivityStore(configuration: configuration)
        try await StoreBehaviourSuite.apply(first, RegisterToken(pushToStart(hex(1))))
        try await first.close()
        for _ in 0..<3 {
            let store = try JournaledActivityStore(configuration: configuration)
            #expect(store.snapshot.tokenCount == 1)
            try await store.close()
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: configuration.directory).filter { $0 != "lock" }.sorted()
        #expect(files == [JournalFile.name(.journal, 1), JournalFile.name(.journal, 2)])
    }

    /// A failed write or sync: the calls it carried fail, and so does every later
    /// one (the memory is ahead of the disk); a restart keeps what reached the disk.
    @Test func aFailedRoundFailsItsCallsAndEveryLaterOne() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let configuration = JournaledActivityStore.Configuration(directory: directory + "/journal")
        let store = try JournaledActivityStore(configuration: configuration)
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1), device: "d1")))
        store.failNextJournalRoundForTesting(JournalIOError("injected: No space left on device"))
        await #expect(throws: JournalIOError.self) {
            try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(2), device: "d2")))
        }
        await #expect(throws: JournalIOError.self) {
            try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(3), device: "d3")))
        }
        await #expect(throws: JournalIOError.self) {
            _ = try await store.token(TokenKey(appID: appID, hex: hex(1)), on: StoreBehaviourSuite.group.any()).get()
        }
        await #expect(throws: JournalIOError.self) { try await store.close() }

        let reopened = try JournaledActivityStore(configuration: configuration)
        #expect(reopened.snapshot.token(TokenKey(appID: appID, hex: hex(1))) != nil)
        #expect(reopened.snapshot.token(TokenKey(appID: appID, hex: hex(2))) == nil)
        #expect(reopened.snapshot.tokenCount == 1)
        try await reopened.close()
    }

    /// A second store on the same directory (a second server on one data directory) is refused while the first is open.
    @Test func aSecondStoreOnTheSameDirectoryIsRefused() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let configuration = JournaledActivityStore.Configuration(directory: directory + "/journal")
        let first = try JournaledActivityStore(configuration: configuration)
        #expect(throws: JournalOpenError.self) { _ = try JournaledActivityStore(configuration: configuration) }
        try await first.close()
        let second = try JournaledActivityStore(configuration: configuration)
        try await second.close()
    }

    /// Damage anywhere but the newest journal's tail is not a crash's: the store refuses to open.
    @Test func damageBeforeTheNewestJournalRefusesToOpen() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let configuration = JournaledActivityStore.Configuration(directory: directory + "/journal")
        for round in 0..<2 {
            let store = try JournaledActivityStore(configuration: configuration)
            try await Self.exercise(store, round: round)
            try await store.close()
        }
        let first = configuration.directory + "/" + JournalFile.name(.journal, 1)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: first)))
        bytes[JournalFile.headerSize + JournalFile.recordHeaderSize + 5] ^= 0x40  // inside the first record's payload
        try Data(bytes).write(to: URL(fileURLWithPath: first))

        #expect(throws: JournalOpenError.self) { _ = try JournaledActivityStore(configuration: configuration) }
    }

    /// A mutation's answer waits for its record's sync; the writes themselves are
    /// in the journal file by then (checked by reading the file, not the store).
    @Test func anAcknowledgedWriteIsInTheJournalFile() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let configuration = JournaledActivityStore.Configuration(directory: directory + "/journal")
        let store = try JournaledActivityStore(configuration: configuration)
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1))))
        var found: [StoreWrite] = []
        let scan = try JournalFile.scan(configuration.directory + "/" + JournalFile.name(.journal, 1), kind: .journal, number: 1) {
            found += try JournalCodec.decode($0)
        }
        #expect(scan.damage == nil)
        #expect(found.count == 1)
        if case let .putToken(token)? = found.first { #expect(token.hex == hex(1)) } else { Issue.record("found \(found)") }
        try await store.close()
    }
}
