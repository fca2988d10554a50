import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import Logging
import NIOCore
import Testing

@testable import LiveRelayStore
@testable import LiveRelayStoreSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plan that writes one token and counts how many such plans have run.
struct CountedWrite: StoreMutation {
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func increment() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }

    var token: Token
    var counter: Counter

    func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Void> {
        counter.increment()
        return MutationPlan(writes: [.putToken(token)], outcome: ())
    }
}

/// Whether a future has completed, without waiting for it.
final class Completion: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    init<T>(_ future: EventLoopFuture<T>) { future.whenComplete { _ in self.lock.withLock { self.done = true } } }
    var isDone: Bool { lock.withLock { done } }
}

/// Polls `condition` (a state the code under test reaches by itself, not a
/// timing guess); the test's time limit bounds it.
func waitUntil(_ condition: () -> Bool) async {
    while !condition() { try? await Task.sleep(nanoseconds: 1_000_000) }
}

/// The pipelined durability stage (SQLiteDurability) and the checkpoint thread (SQLiteCheckpointer).
@Suite struct SQLitePipelineTests {
    @Test(arguments: StoreBehaviourSuite.all)
    func behaviourWithFullSync(_ behaviour: StoreBehaviour) async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let configuration = SQLiteActivityStore.Configuration(durability: .fullSync, checkpointFrames: 0)
        try await behaviour.run { try SQLiteActivityStore(path: directory + "/store.sqlite3", configuration: configuration) }
    }

    @Test(.timeLimit(.minutes(1)))
    func acknowledgementsAndReadsWaitForTheFsync() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let store = try SQLiteActivityStore(path: path)
        let loop = StoreBehaviourSuite.group.any()
        let gate = Gate()
        store.durability.setSyncHookForTesting {
            gate.enter(); return nil
        }

        let write = store.apply(RegisterToken(pushToStart(hex(1), device: "a1")), now: t0, on: loop)
        let written = Completion(write)
        await gate.waitUntilEntered()
        // Committed (another connection sees it) but not synced: not acknowledged yet.
        let other = try SQLiteConnection(path: path, create: false)
        defer { other.close() }
        #expect(try other.queryFirst("SELECT count(*) FROM tokens WHERE hex = ?", { $0.bind(1, hex(1)) }) { $0.int64(0) } == 1)
        #expect(!written.isDone)
        // A read whose snapshot holds that commit is held back too.
        let read = store.token(TokenKey(appID: appID, hex: hex(1)), on: loop)
        let readDone = Completion(read)
        await waitUntil { store.durability.waitingReads == 1 || readDone.isDone }
        #expect(!readDone.isDone, "a read answered with data that was not durable yet")
        #expect(!written.isDone)

        gate.release()
        #expect(try await write.get().result == .created)
        #expect(try await read.get()?.hex == hex(1))
        #expect(store.statistics.syncs >= 1)
        try await store.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func callsArrivingDuringAnFsyncShareTheNextCommit() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteActivityStore(path: directory + "/store.sqlite3")
        let loop = StoreBehaviourSuite.group.any()
        let gate = Gate()
        store.durability.setSyncHookForTesting {
            gate.enter(); return nil
        }
        let counter = CountedWrite.Counter()
        let before = store.statistics

        // A: its fsync is held. B: committed at once and queued behind A.
        let a = store.apply(CountedWrite(token: tokenRow(hex(1), device: "a"), counter: counter), now: t0, on: loop)
        await gate.waitUntilEntered()
        let b = store.apply(CountedWrite(token: tokenRow(hex(2), device: "b"), counter: counter), now: t0, on: loop)
        await waitUntil { store.statistics.commits == before.commits + 2 }
        // C: 100 calls, planned into one open transaction while A syncs and B waits.
        let c = (0..<100).map {
            store.apply(CountedWrite(token: tokenRow(hex(10 + $0), device: "c\($0)"), counter: counter), now: t0, on: loop)
        }
        await waitUntil { counter.value == 102 }
        #expect(store.statistics.commits == before.commits + 2, "C committed before there was room")

        gate.release()
        try await a.get()
        try await b.get()
        for future in c { try await future.get() }
        let after = store.statistics
        #expect(after.commits == before.commits + 3)
        #expect(after.largestBatch >= 100)
        #expect(try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get().count == 102)
        try await store.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func aFailedFsyncFailsItsBatchAndEverythingAfter() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let store = try SQLiteActivityStore(path: path)
        let loop = StoreBehaviourSuite.group.any()
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1), device: "a1")))
        let injected = SQLiteError(code: 10, message: "injected fsync failure")
        store.durability.setSyncHookForTesting { injected }

        #expect(store.permanentFailure == nil)
        let unavailable = ActivityStoreError.unavailable(injected.description)
        await #expect(throws: unavailable) { try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(2), device: "a2"))) }
        store.durability.setSyncHookForTesting(nil)
        // Poisoned: the disk may have lost it while the page cache still shows it. Callers are told the
        // store is unavailable (never an internal error), and the store says only a restart recovers it.
        await #expect(throws: unavailable) { try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(3), device: "a3"))) }
        await #expect(throws: unavailable) { try await store.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get() }
        #expect(store.permanentFailure?.contains("injected fsync failure") == true)
        // Its service stops (closing it), which shuts the server down for a restart.
        await #expect(throws: StoreFailedPermanently.self) {
            try await ActivityStoreService(store, logger: Logger(label: "store-test"), checkEvery: .milliseconds(10)).run()
        }

        // Reopening starts from what is in the file (here the fsync did not really fail).
        let reopened = try SQLiteActivityStore(path: path)
        #expect(try await reopened.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get() != nil)
        try await StoreBehaviourSuite.apply(reopened, RegisterToken(pushToStart(hex(4), device: "a4")))
        try await reopened.close()
    }

    /// Soft mark 64 frames (a PASSIVE checkpoint beside the writer), hard limit `limit`
    /// (the writer waits for a RESTART). Whether PASSIVE checkpoints alone keep up depends
    /// on how fast this machine writes, so only a hard limit at the soft mark makes the
    /// RESTART certain: the first commit that reaches 64 frames must be followed by one.
    @Test(.timeLimit(.minutes(2)), arguments: [256, 64])
    func theCheckpointThreadKeepsTheWALBounded(limit: Int) async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        var configuration = SQLiteActivityStore.Configuration()
        configuration.checkpointFrames = 64
        configuration.walLimitFrames = limit
        configuration.maxBatch = 32
        let store = try SQLiteActivityStore(path: path, configuration: configuration)
        let loop = StoreBehaviourSuite.group.any()
        // 64 callers keep the writer busy: without the RESTART at the limit the
        // WAL would never start over (a PASSIVE checkpoint cannot restart it).
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<64 {
                group.addTask {
                    for i in stride(from: caller, to: 6000, by: 64) {
                        let reply = try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(i), device: "d\(i)")))
                        #expect(reply.result == .created)
                    }
                }
            }
            try await group.waitForAll()
        }
        let stats = store.statistics
        #expect(stats.checkpoints >= 1)
        if limit == configuration.checkpointFrames { #expect(stats.walRestarts >= 1) }
        // The limit, plus what one batch of at most 32 tokens can add (a few pages per token).
        let bound = limit + 32 * 8
        #expect(stats.largestWALFrames <= bound, "largest WAL \(stats.largestWALFrames) frames")
        var info = stat()
        #expect(stat(path + "-wal", &info) == 0)
        #expect(Int(info.st_size) <= 32 + bound * (4096 + 24), "WAL file of \(info.st_size) bytes")
        #expect(try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get().count == 6000)
        try await store.close()
    }
}
