import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import LiveRelayStore
@testable import LiveRelayStoreSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh temporary directory per call; the caller removes it.
func makeTemporaryDirectory(_ prefix: String = "liverelay-sqlite-") throws -> String {
    var template = Array((NSTemporaryDirectory() + prefix + "XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard made != nil else { throw SQLiteError(code: 1, message: "mkdtemp failed (\(errno))") }
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func removeDirectory(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

/// A database file, its -wal and its -shm as a build that let SQLite create
/// them left them: readable by everyone (0644 whatever the umask), and empty,
/// which SQLite opens as a new database.
func leaveReadableByOthers(_ path: String) {
    for file in [path, path + "-wal", path + "-shm"] {
        let fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        if fd >= 0 { close(fd) }
        chmod(file, 0o644)
    }
}

/// Expects `path`, its -wal and its -shm to be 0600, and `logs` to hold exactly
/// one notice, which names the files it tightened.
func expectMadeOwnerOnly(_ path: String, logs: LogRecorder, sourceLocation: SourceLocation = #_sourceLocation) {
    for file in [path, path + "-wal", path + "-shm"] {
        var info = stat()
        #expect(stat(file, &info) == 0, "\(file) exists while the store is open", sourceLocation: sourceLocation)
        #expect(
            info.st_mode & 0o777 == 0o600, "\(file) is \(String(info.st_mode & 0o777, radix: 8))", sourceLocation: sourceLocation)
    }
    let notices = logs.lines.filter { $0.level >= .notice }
    #expect(notices.count == 1, "\(notices)", sourceLocation: sourceLocation)
    #expect(notices.first?.metadata["files"]?.contains(path + "-wal") == true, "\(notices)", sourceLocation: sourceLocation)
}

@Suite struct SQLiteStoreTests {
    @Test(arguments: StoreBehaviourSuite.all)
    func behaviour(_ behaviour: StoreBehaviour) async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        try await behaviour.run { try SQLiteActivityStore(path: directory + "/store.sqlite3") }
    }

    @Test func theDatabaseAndItsWALAreOwnerOnlyFromCreation() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        // A permissive umask, as a service manager might leave: the files must not depend on it.
        let previous = umask(0o022)
        defer { umask(previous) }
        let path = directory + "/store.sqlite3"
        let store = try SQLiteActivityStore(path: path)
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1), device: "a1", user: "user-a")))
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            #expect(stat(file, &info) == 0, "\(file) exists while the store is open")
            #expect(info.st_mode & 0o777 == 0o600, "\(file) is \(String(info.st_mode & 0o777, radix: 8))")
        }
        try await store.close()
    }

    @Test func aFileOthersCouldReadIsMadeOwnerOnlyWhenOpened() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        leaveReadableByOthers(path)
        let logs = LogRecorder()
        let store = try SQLiteActivityStore(path: path, logger: logs.logger())
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1), device: "a1", user: "user-a")))
        expectMadeOwnerOnly(path, logs: logs)
        try await store.close()
        // Owner-only now: opening it again has nothing to tighten and says nothing.
        let reopened = try SQLiteActivityStore(path: path, logger: logs.logger())
        try await reopened.close()
        #expect(logs.lines.filter { $0.level >= .notice }.count == 1)
    }

    @Test func reopeningAFileKeepsEverything() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let loop = StoreBehaviourSuite.group.any()

        let store = try SQLiteActivityStore(path: path)
        try await StoreBehaviourSuite.apply(
            store, RegisterToken(pushToStart(hex(1), device: "a1", user: "user-a", expiresAt: t0.seconds + 600)))
        let first = try #require(try await StoreBehaviourSuite.apply(store, StartActivity(start(key: "k1"), app: app)).accepted)
        try await StoreBehaviourSuite.apply(store, RegisterToken(updateToken(hex(2), device: "a1")), now: t0 + .seconds(1))
        try await store.close()

        let reopened = try SQLiteActivityStore(path: path)
        #expect(reopened.openedSchemaVersion == SQLiteActivityStore.schemaVersion)
        let token = try await reopened.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get()
        #expect(
            token
                == Token(
                    kind: .pushToStart, hex: hex(1), environment: .production, appID: appID,
                    attributesType: "DeliveryAttributes", externalUserID: "user-a", deviceID: "a1",
                    createdAt: t0, updatedAt: t0, expiresAt: UnixTime(seconds: t0.seconds + 600)))
        #expect(
            try await reopened.pushToStartTokens(appID: appID, externalUserIDs: ["user-a"], attributesType: "DeliveryAttributes", on: loop)
                .get().map(\.hex) == [hex(1)])
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

    @Test func anEmptyFileIsMigratedAndReopeningIsIdempotent() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))

        let store = try SQLiteActivityStore(path: path)
        #expect(store.openedSchemaVersion == 0)
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1))))
        try await store.close()

        for _ in 0..<2 {
            let again = try SQLiteActivityStore(path: path)
            #expect(again.openedSchemaVersion == SQLiteActivityStore.schemaVersion)
            #expect(try await again.token(TokenKey(appID: appID, hex: hex(1)), on: StoreBehaviourSuite.group.any()).get() != nil)
            try await again.close()
        }
        // One row per migration, applied once.
        let db = try SQLiteConnection(path: path, create: false)
        defer { db.close() }
        let versions = try db.query("SELECT version FROM schema_version ORDER BY version") { $0.int64(0) }
        #expect(versions == (1...Int64(SQLiteSchema.current)).map { $0 })
        #expect(try db.pragma("PRAGMA journal_mode") == "wal")
    }

    /// Schema version 2 keeps the domain's reply record; a record written by
    /// version 1 (a wire DeliverySummary in reply_summary) still replays.
    @Test func anIdempotencyRecordOfSchemaVersion1StillReplays() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let store = try SQLiteActivityStore(path: path)
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1))))
        let first = try #require(try await StoreBehaviourSuite.apply(store, StartActivity(start(key: "k1"), app: app)).accepted)
        #expect(first.reply.targeted == 1)
        try await store.close()
        do {
            // Rewrite the row as version 1 wrote it.
            let db = try SQLiteConnection(path: path, create: false)
            defer { db.close() }
            let legacy = DeliverySummary(
                targeted: 7, queued: 7,
                unresolved: [
                    UnresolvedTarget(kind: .externalUserID, value: "user \"9\"", reason: "no push-to-start token registered")
                ])
            try db.run("UPDATE idempotency_records SET reply_targets = NULL, reply_summary = ?1") {
                $0.bind(1, legacy.serializedBytes())
            }
        }
        let reopened = try SQLiteActivityStore(path: path)
        guard case let .replayed(reply) = try await StoreBehaviourSuite.apply(reopened, StartActivity(start(key: "k1"), app: app)) else {
            Issue.record("expected a replay"); return
        }
        #expect(
            reply
                == StoredReply(
                    timestamp: first.reply.timestamp, state: .starting, targeted: 7,
                    unresolved: [
                        UnresolvedStartTarget(kind: .externalUserID, value: "user \"9\"", reason: "no push-to-start token registered")
                    ]))
        try await reopened.close()
    }

    @Test func aFileWithANewerSchemaIsRefused() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        try await SQLiteActivityStore(path: path).close()
        do {
            let db = try SQLiteConnection(path: path, create: false)
            try db.execute("INSERT INTO schema_version (version, applied_at) VALUES (\(SQLiteSchema.current + 1), 0)")
            db.close()
        }
        #expect(throws: SQLiteError.self) { try SQLiteActivityStore(path: path) }
    }

    @Test func notADatabaseIsRefused() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x41, count: 4096)))
        #expect(throws: SQLiteError.self) { try SQLiteActivityStore(path: path) }
    }

    @Test func theHotLookupsUseTheirIndexes() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let db = try SQLiteConnection(path: path, create: true)
        defer { db.close() }
        _ = try SQLiteSchema.migrate(db, now: 0)
        func plan(_ sql: String) throws -> String {
            try db.query("EXPLAIN QUERY PLAN " + sql) { $0.string(3) }.joined(separator: "; ")
        }
        typealias SQL = SQLiteTables.SQL
        let expectations: [(SQLiteQuery, String)] = [
            (SQL.updateTokens, "tokens_update_targets"),
            (SQL.updateSlot, "tokens_update_targets"),
            (SQL.updateTargets, "COVERING INDEX tokens_update_targets"),
            (SQL.pushToStartOfType, "tokens_push_to_start_slot"),
            (SQL.pushToStartTargets, "tokens_push_to_start_slot"),
            (SQL.pushToStartSlot, "tokens_push_to_start_slot"),
            (SQL.pushToStartOfUser, "tokens_push_to_start_by_user"),
            (SQL.tokensExpired, "tokens_expiring"),
            (SQL.activitiesDue, "activities_sweep_deadline"),
            (SQL.token, "PRIMARY KEY"),
            (SQL.activity, "PRIMARY KEY"),
            (SQL.record, "PRIMARY KEY"),
            (SQL.settleRecord, "idempotency_records_timestamp"),
            (SQL.evictRecords, "idempotency_records_timestamp"),
        ]
        for (query, index) in expectations {
            let sql = query.text
            let detail = try plan(sql)
            #expect(detail.contains("USING") && detail.contains(index), "\(sql)\n-> \(detail)")
            #expect(!detail.contains("SCAN"), "\(sql)\n-> \(detail)")
        }
    }

    @Test func aSecondTokenInATakenSlotIsAConstraintErrorNotASilentDelete() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteActivityStore(path: directory + "/store.sqlite3")
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(1), device: "a1")))
        // A (buggy) plan that puts another token in the same slot without deleting the occupant.
        let intruder = Token(
            kind: .pushToStart, hex: hex(2), environment: .production, appID: appID,
            attributesType: "DeliveryAttributes", deviceID: "a1", createdAt: t0, updatedAt: t0)
        await #expect(throws: SQLiteError.self) { try await StoreBehaviourSuite.apply(store, Writes([.putToken(intruder)])) }
        let loop = StoreBehaviourSuite.group.any()
        #expect(try await store.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get() != nil)
        #expect(try await store.token(TokenKey(appID: appID, hex: hex(2)), on: loop).get() == nil)
        try await store.close()
    }
}

// MARK: - Group commit

/// A mutation with fixed writes (and optionally a refusal), for batch tests.
struct Writes: StoreMutation {
    var writes: [StoreWrite]
    var refuse: DomainError? = nil

    init(_ writes: [StoreWrite], refuse: DomainError? = nil) {
        self.writes = writes
        self.refuse = refuse
    }

    func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Int> {
        if let refuse { throw refuse }
        return MutationPlan(writes: writes, outcome: writes.count)
    }
}

/// Reports whether the token was visible when the plan ran.
struct Sees: StoreMutation {
    var key: TokenKey
    func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Bool> {
        MutationPlan(outcome: state.token(key) != nil)
    }
}

/// Holds the writer thread inside its plan until released, so that the
/// mutations queued meanwhile all land in the next batch.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var entered = false
    private var released = false

    func enter() {
        lock.withLock { entered = true }
        while !lock.withLock({ released }) { usleep(1000) }
    }

    func waitUntilEntered() async {
        while !lock.withLock({ entered }) { try? await Task.sleep(nanoseconds: 1_000_000) }
    }

    func release() { lock.withLock { released = true } }
}

struct Hold: StoreMutation {
    var gate: Gate
    func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<Void> {
        gate.enter()
        return MutationPlan(outcome: ())
    }
}

@Suite struct SQLiteGroupCommitTests {
    @Test func concurrentAppliesShareCommits() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteActivityStore(path: directory + "/store.sqlite3")
        let loop = StoreBehaviourSuite.group.any()
        let before = store.statistics
        // Issued together from this thread (as an event loop's read hands over its calls), not
        // from a thousand tasks, which a loaded machine would start a few at a time.
        let replies = (0..<1000).map { i in store.apply(RegisterToken(pushToStart(hex(i), device: "d\(i)")), now: t0, on: loop) }
        for reply in replies { #expect(try await reply.get().result == .created) }
        let stats = store.statistics
        let commits = stats.commits - before.commits
        #expect(stats.mutations - before.mutations == 1000)
        #expect(commits >= 1)
        #expect(commits <= 250, "1,000 concurrent applies took \(commits) commits (largest batch \(stats.largestBatch))")
        let all = try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get()
        #expect(all.count == 1000)
        // Unchanged registrations write nothing: no commit.
        let commitsBefore = store.statistics.commits
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(7), device: "d7")))
        #expect(store.statistics.commits == commitsBefore)
        try await store.close()
    }

    @Test func aFailingPlanInABatchLeavesTheOthersAlone() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let store = try SQLiteActivityStore(path: directory + "/store.sqlite3")
        let loop = StoreBehaviourSuite.group.any()
        try await StoreBehaviourSuite.apply(store, RegisterToken(pushToStart(hex(100), device: "taken")))

        let gate = Gate()
        let held = store.apply(Hold(gate: gate), now: t0, on: loop)
        await gate.waitUntilEntered()
        // All of these queue while the writer is held: one batch.
        let good1 = store.apply(RegisterToken(pushToStart(hex(1), device: "a1")), now: t0, on: loop)
        let sees1 = store.apply(Sees(key: TokenKey(appID: appID, hex: hex(1))), now: t0, on: loop)
        let refused = store.apply(Writes([.putToken(tokenRow(hex(2), device: "a2"))], refuse: .unknownApp(appID: "x")), now: t0, on: loop)
        // Its first write succeeds, its second breaks the slot index: the first must be undone too.
        let halfway = store.apply(
            Writes([.putToken(tokenRow(hex(3), device: "a3")), .putToken(tokenRow(hex(4), device: "taken"))]), now: t0, on: loop)
        let sees3 = store.apply(Sees(key: TokenKey(appID: appID, hex: hex(3))), now: t0, on: loop)
        let good2 = store.apply(RegisterToken(pushToStart(hex(5), device: "a5")), now: t0, on: loop)
        let invalid = store.apply(RegisterToken(pushToStart(hex(6), device: "a6", expiresAt: t0.seconds)), now: t0, on: loop)
        let batchesBefore = store.statistics.batches
        gate.release()
        try await held.get()

        #expect(try await good1.get().result == .created)
        #expect(try await sees1.get() == true)
        await #expect(throws: DomainError.unknownApp(appID: "x")) { try await refused.get() }
        await #expect(throws: SQLiteError.self) { try await halfway.get() }
        #expect(try await sees3.get() == false)
        #expect(try await good2.get().result == .created)
        await #expect(throws: DomainError.self) { try await invalid.get() }
        let stats = store.statistics
        #expect(stats.batches == batchesBefore + 2, "the held plan's batch, then one batch for the 7 queued")
        #expect(stats.largestBatch >= 7)

        let present = try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get()
        #expect(Set(present.map(\.hex)) == [hex(100), hex(1), hex(5)])
        try await store.close()
    }

    @Test func closeCommitsWhatIsQueued() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        let path = directory + "/store.sqlite3"
        let store = try SQLiteActivityStore(path: path)
        let loop = StoreBehaviourSuite.group.any()
        let futures = (0..<500).map { store.apply(RegisterToken(pushToStart(hex($0), device: "d\($0)")), now: t0, on: loop) }
        try await store.close()
        for future in futures { _ = try await future.get() }
        await #expect(throws: ActivityStoreError.closed) { try await store.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get() }
        try await store.close()  // idempotent

        let reopened = try SQLiteActivityStore(path: path)
        #expect(try await reopened.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get().count == 500)
        try await reopened.close()
        // Closing the last connection checkpointed the WAL into the main file.
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }
}

func tokenRow(_ hex: String, device: String) -> Token {
    Token(
        kind: .pushToStart, hex: hex, environment: .production, appID: appID, attributesType: "DeliveryAttributes",
        deviceID: device, createdAt: t0, updatedAt: t0)
}
