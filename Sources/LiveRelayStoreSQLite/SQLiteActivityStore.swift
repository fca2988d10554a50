import CSQLite
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The embedded default store: one SQLite file (e.g. `<data dir>/liverelay.sqlite3`).
///
/// ## Why the system libsqlite3
/// Debian's libsqlite3 (3.40) through the `CSQLite` system-library module: no
/// extra Swift package to build, security fixes arrive with the OS, and the
/// store needs only a thin layer (prepared statements, one writer thread with
/// group commit), not a library with its own concurrency model (GRDB's
/// queues and pools would sit between the batching and SQLite).
///
/// ## Threads and durability
/// - One writer thread owns the only write connection. ``apply(_:now:on:)``
///   queues the mutation; the writer takes everything queued (up to
///   ``Configuration/maxBatch``), runs `BEGIN IMMEDIATE`, plans each mutation
///   against a ``StateReader`` of prepared SELECTs inside that transaction (so
///   each plan sees the earlier plans' writes), writes each plan inside its own
///   SAVEPOINT (a plan that fails writes nothing and fails only its future; a
///   one-statement plan needs none) and `COMMIT`s once. Concurrent
///   RegisterToken calls thus share one fsync. (An I/O error that makes SQLite
///   roll back the whole transaction fails the whole batch.)
/// - `journal_mode=WAL`. Futures are completed only by the durability thread
///   (``SQLiteDurability``), in commit order, once the commit is on stable
///   storage, with one `execute` per caller event loop and batch. By default
///   (``Durability/pipelined``) the writer commits with `synchronous=NORMAL` and
///   that thread `fdatasync`s the WAL, while the writer already plans the next
///   batch and keeps adding the calls that arrive until the sync is done; reads
///   are held back until what they saw is durable too. ``SQLiteDurability``
///   argues why that is exactly as durable as `synchronous=FULL` (which
///   ``Durability/fullSync`` still offers): an acknowledged write survives a
///   process crash *and* power loss. Batches with no writes (replays, unchanged
///   registrations) commit an empty transaction: no I/O, no fsync.
/// - Checkpoints run on their own thread and connection, with a bound on the
///   WAL (``SQLiteCheckpointer``), not inside the writer's commits.
/// - Reads outside mutations (``token(_:on:)`` and the lookups) run on
///   ``Configuration/readers`` reader threads, each with its own `query_only`
///   connection; WAL lets them read a committed snapshot while the writer writes.
/// - ``close()`` refuses new calls, lets the writer commit (and sync) everything
///   queued before it, closes the connections (SQLite checkpoints the WAL into
///   the main file) and returns when every thread has exited.
public final class SQLiteActivityStore: ActivityStore, @unchecked Sendable {
    /// The schema version this build writes.
    public static var schemaVersion: Int { SQLiteSchema.current }

    /// The SQLite library's version (the system libsqlite3 linked at run time).
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }

    /// The file's path.
    public let path: String
    /// The schema version the file had when opened (0 for a new file).
    public let openedSchemaVersion: Int

    private let configuration: Configuration
    private let writes = SQLiteJobQueue<WriteJob>()
    private let reads = SQLiteJobQueue<ReadJob>()
    private let latch: SQLiteExitLatch
    private let counters = SQLiteCounters()
    /// Internal for tests (its sync hook).
    let durability: SQLiteDurability
    private let checkpointer: SQLiteCheckpointer?
    /// Signalled by the durability thread once a commit that added events is on stable storage.
    public let eventCommits = EventCommitSignal()

    /// Opens (creating if needed) the store at `path` and migrates it to ``schemaVersion``.
    ///
    /// Throws ``SQLiteError`` when the file cannot be opened, is not a SQLite
    /// database, cannot switch to WAL, or has a newer schema. `logger` hears
    /// of a file it found readable by others and made owner-only.
    public init(
        path: String, configuration: Configuration = Configuration(), logger: Logger = Logger(label: "liverelay.sqlite")
    ) throws {
        self.path = path
        self.configuration = configuration
        _ = Self.libraryConfigured
        let writer = try SQLiteConnection(path: path, create: true, logger: logger)
        try Self.configure(writer, configuration, role: .writer)
        openedSchemaVersion = try SQLiteSchema.migrate(writer, now: SystemClock().now().milliseconds)
        var readers: [SQLiteConnection] = []
        for _ in 0..<configuration.readers {
            let reader = try SQLiteConnection(path: path, create: false)
            try Self.configure(reader, configuration, role: .reader)
            readers.append(reader)
        }
        if configuration.checkpointFrames > 0 {
            let connection = try SQLiteConnection(path: path, create: false)
            try Self.configure(connection, configuration, role: .checkpointer)
            checkpointer = SQLiteCheckpointer(
                db: connection, softFrames: configuration.checkpointFrames,
                hardFrames: configuration.walLimitFrames)
        } else {
            checkpointer = nil
        }
        durability = SQLiteDurability(databasePath: path)
        if configuration.durability == .pipelined { try durability.openWAL() }
        latch = SQLiteExitLatch(count: 2 + readers.count + (checkpointer == nil ? 0 : 1))

        let writeSession = Unchecked(SQLiteWriteSession(db: writer, eventCommits: eventCommits))
        do {
            try startThreads(writeSession: writeSession, readers: readers)
        } catch {
            // Threads already started drain their (empty) queues, close their connections and exit.
            writes.close()
            reads.close()
            durability.close()
            checkpointer?.close()
            throw error
        }
    }

    private func startThreads(writeSession: Unchecked<SQLiteWriteSession>, readers: [SQLiteConnection]) throws {
        let writer = SQLiteWriter(
            session: writeSession.value, writes: writes, durability: durability, checkpointer: checkpointer,
            counters: counters, maxBatch: configuration.maxBatch, pipelined: configuration.durability == .pipelined)
        let writerBox = Unchecked(writer)
        durability.onTaken = { [writes] in writes.poke() }
        try startSQLiteThread(name: "sqlite-durability") { [durability, latch] in
            durability.run()
            latch.threadExited()
        }
        if let checkpointer {
            try startSQLiteThread(name: "sqlite-checkpointer") { [latch] in
                checkpointer.run()
                latch.threadExited()
            }
        }
        try startSQLiteThread(name: "sqlite-writer") { [latch] in
            writerBox.value.run()
            latch.threadExited()
        }
        for (i, reader) in readers.enumerated() {
            let connection = Unchecked(reader)
            try startSQLiteThread(name: "sqlite-reader-\(i)") { [reads, latch] in
                let tables = SQLiteTables(db: connection.value)
                while let jobs = reads.take(max: 1) {
                    for job in jobs { job(tables) }
                }
                connection.value.close()
                latch.threadExited()
            }
        }
    }

    /// Process-wide SQLite settings, once, before the first connection opens.
    private static let libraryConfigured: Bool = {
        lr_sqlite3_config_memstatus(0) == SQLITE_OK
    }()

    private enum Role { case writer, reader, checkpointer }

    private static func configure(_ db: SQLiteConnection, _ configuration: Configuration, role: Role) throws(SQLiteError) {
        sqlite3_busy_timeout(db.handle, configuration.busyTimeoutMilliseconds)
        if role == .writer {
            // Only takes effect on a new, empty file; before WAL mode, which fixes it.
            try db.execute("PRAGMA page_size = \(configuration.pageSize)")
            let mode = try db.pragma("PRAGMA journal_mode = WAL")
            guard mode?.lowercased() == "wal" else {
                throw SQLiteError(code: 1, message: "cannot switch to WAL (journal_mode is \(mode ?? "unknown"))", context: db.path)
            }
        }
        // The writer in pipelined mode leaves the WAL's fsync to the durability
        // thread; everything else (and every checkpoint) syncs as FULL.
        let synchronous = role == .writer && configuration.durability == .pipelined ? "NORMAL" : "FULL"
        try db.execute(
            """
            PRAGMA synchronous = \(synchronous);
            PRAGMA foreign_keys = OFF;
            PRAGMA temp_store = MEMORY;
            PRAGMA cache_size = -\(role == .checkpointer ? 2048 : configuration.cacheKiB);
            """ + (role == .reader ? "PRAGMA query_only = ON; PRAGMA mmap_size = \(configuration.readerMmapBytes);" : ""))
        if role == .writer && configuration.checkpointFrames > 0 {
            try db.execute("PRAGMA wal_autocheckpoint = 0")
        }
    }

    /// The counters so far.
    public var statistics: Statistics { counters.snapshot(durability: durability, checkpointer: checkpointer) }

    /// A failed fsync poisons the store until the file is reopened (``SQLiteDurability``).
    public var permanentFailure: String? { durability.currentFailure.map { "fsync of the WAL failed: \($0)" } }

    /// What a caller sees of a SQLite failure: the disk or the file system refusing (full, an I/O
    /// error, no descriptor left, busy) is the store being unavailable, which a resend may get past;
    /// anything else stays itself (a bug, reported as internal).
    static func callerError(_ error: any Error) -> any Error {
        guard let error = error as? SQLiteError else { return error }
        switch error.code {
        case 5, 6, 7, 8, 10, 13, 14:  // BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN
            return ActivityStoreError.unavailable(error.description)
        default:
            return error
        }
    }

    // MARK: ActivityStore

    public func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        let promise = eventLoop.makePromise(of: M.Outcome.self)
        let job = WriteJob(
            eventLoop: eventLoop,
            run: { session in
                let result = session.plan(mutation, now: now)
                return { commit in
                    switch (result, commit) {
                    case let (.success(outcome), .success): promise.succeed(outcome)
                    case let (.failure(error), _): promise.fail(Self.callerError(error))
                    case let (.success, .failure(error)): promise.fail(Self.callerError(error))
                    }
                }
            },
            fail: { promise.fail(Self.callerError($0)) })
        if !writes.push(job) { promise.fail(ActivityStoreError.closed) }
        return promise.futureResult
    }

    private func read<T: Sendable>(
        on eventLoop: any EventLoop, _ body: @escaping @Sendable (SQLiteTables) throws(SQLiteError) -> T
    ) -> EventLoopFuture<T> {
        let promise = eventLoop.makePromise(of: T.self)
        let queued = reads.push { [durability] tables in
            do throws(SQLiteError) {
                let value = try body(tables)
                // The snapshot may hold commits that are not synced yet: answer once they are.
                durability.deliverRead { failure in
                    if let failure { promise.fail(Self.callerError(failure)) } else { promise.succeed(value) }
                }
            } catch {
                promise.fail(Self.callerError(error))
            }
        }
        if !queued { promise.fail(ActivityStoreError.closed) }
        return promise.futureResult
    }

    /// ``read(on:_:)`` in one read transaction: every statement of `body` sees one snapshot.
    private func readSnapshot<T: Sendable>(
        on eventLoop: any EventLoop, _ body: @escaping @Sendable (SQLiteTables) throws(SQLiteError) -> T
    ) -> EventLoopFuture<T> {
        read(on: eventLoop) { tables throws(SQLiteError) in
            try tables.db.execute("BEGIN")
            do throws(SQLiteError) {
                let value = try body(tables)
                try tables.db.execute("COMMIT")
                return value
            } catch {
                try? tables.db.execute("ROLLBACK")
                throw error
            }
        }
    }

    public func token(_ key: TokenKey, on eventLoop: any EventLoop) -> EventLoopFuture<Token?> {
        read(on: eventLoop) { tables throws(SQLiteError) in try tables.token(key) }
    }

    public func activity(_ key: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<Activity?> {
        read(on: eventLoop) { tables throws(SQLiteError) in try tables.activity(key) }
    }

    public func updateTokens(of activity: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]> {
        read(on: eventLoop) { tables throws(SQLiteError) in try tables.updateTokens(of: activity) }
    }

    public func pushToStartTokens(appID: String, attributesType: String, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]> {
        read(on: eventLoop) { tables throws(SQLiteError) in try tables.pushToStartTokens(appID: appID, attributesType: attributesType) }
    }

    public func pushToStartTokens(
        appID: String, externalUserIDs: [String], attributesType: String, on eventLoop: any EventLoop
    ) -> EventLoopFuture<[Token]> {
        // One snapshot for all the users.
        readSnapshot(on: eventLoop) { tables throws(SQLiteError) in
            var seen = Set<String>()
            var tokens: [Token] = []
            for user in externalUserIDs {
                for token in try tables.pushToStartTokens(appID: appID, externalUserID: user, attributesType: attributesType)
                where seen.insert(token.hex).inserted {
                    tokens.append(token)
                }
            }
            return tokens
        }
    }

    public func usage(of appIDs: [String], now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<[String: AppUsage]> {
        // One snapshot for every app.
        readSnapshot(on: eventLoop) { tables throws(SQLiteError) in
            var usage: [String: AppUsage] = [:]
            for appID in appIDs { usage[appID] = try tables.usage(of: appID, at: now) }
            return usage
        }
    }

    /// The entries and the retention mark of one snapshot.
    public func events(appID: String, after cursor: UInt64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<EventPage> {
        readSnapshot(on: eventLoop) { tables throws(SQLiteError) in try tables.events(appID: appID, after: cursor, limit: limit) }
    }

    /// The newest event and the retention mark of one snapshot. A commit not in that snapshot yet
    /// takes a higher cursor (the writer hands them out in commit order).
    public func lastEventCursor(appID: String, on eventLoop: any EventLoop) -> EventLoopFuture<UInt64> {
        readSnapshot(on: eventLoop) { tables throws(SQLiteError) in try tables.lastEventCursor(appID: appID) }
    }

    /// On the writer, ``sweepLimit`` events per job: each job is part of one batch's transaction, so
    /// a large trim never holds the writer (and every call queued behind it) for long; the next
    /// job is queued once the one before is durable, behind the calls that came meanwhile.
    public func trimEvents(_ retention: EventRetention, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<Int> {
        let promise = eventLoop.makePromise(of: Int.self)
        trimEvents(before: now - retention.maxAge, keep: retention.maxPerApp, trimmed: 0, on: eventLoop, promise: promise)
        return promise.futureResult
    }

    private func trimEvents(before: UnixTime, keep: Int, trimmed: Int, on eventLoop: any EventLoop, promise: EventLoopPromise<Int>) {
        let limit = sweepLimit
        let job = WriteJob(
            eventLoop: eventLoop,
            run: { session in
                let result = session.perform { tables throws(SQLiteError) in
                    let deleted = try tables.trimEvents(before: before, keep: keep, limit: limit)
                    return (deleted, deleted > 0)
                }
                return { commit in
                    switch (result, commit) {
                    case let (.success(deleted), .success) where deleted < limit: promise.succeed(trimmed + deleted)
                    case let (.success(deleted), .success):
                        self.trimEvents(before: before, keep: keep, trimmed: trimmed + deleted, on: eventLoop, promise: promise)
                    case let (.failure(error), _): promise.fail(Self.callerError(error))
                    case let (.success, .failure(error)): promise.fail(Self.callerError(error))
                    }
                }
            },
            fail: { promise.fail(Self.callerError($0)) })
        if !writes.push(job) { promise.fail(ActivityStoreError.closed) }
    }

    /// Refuses new calls, commits what is queued, closes the file; idempotent.
    public func close() async throws {
        writes.close()
        reads.close()
        await latch.wait()
        // The last connection to close folds the WAL into the file and deletes it, but the
        // store's connections close on their own threads: two closing at once can each see
        // the other still open, and neither does. One more connection, alone now, does.
        if let last = try? SQLiteConnection(path: path, create: false) {
            _ = try? last.pragma("PRAGMA wal_checkpoint(TRUNCATE)")
            last.close()
        }
    }

    deinit {
        // Threads hold the queues, not the store; closing lets them exit.
        writes.close()
        reads.close()
    }
}

/// One queued apply, type-erased: `run` plans and writes inside the writer's
/// transaction and returns how to complete the future once the commit is known.
struct WriteJob: Sendable {
    /// The caller's loop: completions are handed to each loop in one `execute`.
    var eventLoop: any EventLoop
    var run: @Sendable (SQLiteWriteSession) -> @Sendable (Result<Void, SQLiteError>) -> Void
    /// Fails the future without running (the batch's BEGIN failed).
    var fail: @Sendable (any Error) -> Void
}

typealias ReadJob = @Sendable (SQLiteTables) -> Void

/// A value handed to exactly one thread (a connection to its owner).
struct Unchecked<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}
