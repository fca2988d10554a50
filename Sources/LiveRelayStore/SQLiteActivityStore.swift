import CSQLite
import LiveRelayDomain
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
///   one-statement plan needs none), `COMMIT`s once, and only then completes
///   the futures, with one `execute` per caller event loop and batch.
///   Concurrent RegisterToken calls thus share one fsync. (An I/O error that
///   makes SQLite roll back the whole transaction fails the whole batch.)
/// - `journal_mode=WAL` with `synchronous=FULL`: in WAL mode FULL fsyncs the
///   WAL at every commit, so a commit is durable (process crash *and* power
///   loss) when `COMMIT` returns, and an acknowledged write survives a crash.
///   (NORMAL would only fsync at checkpoints: safe from a process crash, not
///   from power loss.) Batches with no writes (replays, unchanged
///   registrations) commit an empty transaction: no I/O, no fsync.
/// - Reads outside mutations (``token(_:on:)`` and the lookups) run on
///   ``Configuration/readers`` reader threads, each with its own `query_only`
///   connection; WAL lets them read a committed snapshot while the writer writes.
/// - ``close()`` refuses new calls, lets the writer commit everything queued
///   before it, closes the connections (SQLite checkpoints the WAL into the
///   main file) and returns when every thread has exited.
public final class SQLiteActivityStore: ActivityStore, @unchecked Sendable {
    public struct Configuration: Sendable {
        /// Reader threads (and read connections) for the lookups outside mutations.
        public var readers: Int
        /// The most mutations committed in one transaction.
        public var maxBatch: Int
        /// How long a connection waits for a lock held by another process before SQLITE_BUSY.
        public var busyTimeoutMilliseconds: Int32
        /// SQLite's page cache per connection, in KiB.
        public var cacheKiB: Int

        public init(readers: Int = 2, maxBatch: Int = 4096, busyTimeoutMilliseconds: Int32 = 5000, cacheKiB: Int = 16 * 1024) {
            self.readers = max(1, readers)
            self.maxBatch = max(1, maxBatch)
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
            self.cacheKiB = cacheKiB
        }
    }

    /// Counters for tests and diagnostics.
    public struct Statistics: Hashable, Sendable {
        /// Transactions the writer committed that wrote something (one fsync each).
        public var commits: Int
        /// Transactions (batches) the writer ran, with or without writes.
        public var batches: Int
        /// Mutations planned (successful or refused).
        public var mutations: Int
        /// The largest batch so far.
        public var largestBatch: Int
    }

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
    private let counters = Counters()

    /// Opens (creating if needed) the store at `path` and migrates it to ``schemaVersion``.
    ///
    /// Throws ``SQLiteError`` when the file cannot be opened, is not a SQLite
    /// database, cannot switch to WAL, or has a newer schema.
    public init(path: String, configuration: Configuration = Configuration()) throws {
        self.path = path
        self.configuration = configuration
        _ = Self.libraryConfigured
        let writer = try SQLiteConnection(path: path, create: true)
        try Self.configure(writer, configuration, reader: false)
        openedSchemaVersion = try SQLiteSchema.migrate(writer, now: SystemClock().now().milliseconds)
        var readers: [SQLiteConnection] = []
        for _ in 0..<configuration.readers {
            let reader = try SQLiteConnection(path: path, create: false)
            try Self.configure(reader, configuration, reader: true)
            readers.append(reader)
        }
        latch = SQLiteExitLatch(count: 1 + readers.count)

        let writeSession = Unchecked(SQLiteWriteSession(db: writer))
        let maxBatch = configuration.maxBatch
        do {
            try startThreads(writeSession: writeSession, readers: readers, maxBatch: maxBatch)
        } catch {
            // Threads already started drain their (empty) queues, close their connections and exit.
            writes.close()
            reads.close()
            throw error
        }
    }

    private func startThreads(writeSession: Unchecked<SQLiteWriteSession>, readers: [SQLiteConnection], maxBatch: Int) throws {
        try startSQLiteThread(name: "sqlite-writer") { [writes, latch, counters] in
            let session = writeSession.value
            while let batch = writes.take(max: maxBatch) {
                let stats = session.run(batch)
                counters.count(stats, batch: batch.count)
            }
            session.db.close()
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

    private static func configure(_ db: SQLiteConnection, _ configuration: Configuration, reader: Bool) throws(SQLiteError) {
        sqlite3_busy_timeout(db.handle, configuration.busyTimeoutMilliseconds)
        if !reader {
            let mode = try db.pragma("PRAGMA journal_mode = WAL")
            guard mode?.lowercased() == "wal" else {
                throw SQLiteError(code: 1, message: "cannot switch to WAL (journal_mode is \(mode ?? "unknown"))", context: db.path)
            }
        }
        try db.execute("""
            PRAGMA synchronous = FULL;
            PRAGMA foreign_keys = OFF;
            PRAGMA temp_store = MEMORY;
            PRAGMA cache_size = -\(configuration.cacheKiB);
            """ + (reader ? "PRAGMA query_only = ON;" : ""))
    }

    /// The writer's counters, shared with its thread (which must not hold the store).
    private final class Counters: @unchecked Sendable {
        private let lock = NIOLock()
        private var value = Statistics(commits: 0, batches: 0, mutations: 0, largestBatch: 0)

        func count(_ stats: SQLiteWriteSession.BatchStats, batch: Int) {
            lock.withLock {
                value.batches += 1
                value.mutations += batch
                if stats.committedWrites { value.commits += 1 }
                value.largestBatch = max(value.largestBatch, batch)
            }
        }

        var snapshot: Statistics { lock.withLock { value } }
    }

    /// The counters so far.
    public var statistics: Statistics { counters.snapshot }

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
                    case let (.failure(error), _): promise.fail(error)
                    case let (.success, .failure(error)): promise.fail(error)
                    }
                }
            },
            fail: { promise.fail($0) })
        if !writes.push(job) { promise.fail(ActivityStoreError.closed) }
        return promise.futureResult
    }

    private func read<T: Sendable>(
        on eventLoop: any EventLoop, _ body: @escaping @Sendable (SQLiteTables) throws(SQLiteError) -> T
    ) -> EventLoopFuture<T> {
        let promise = eventLoop.makePromise(of: T.self)
        let queued = reads.push { tables in
            do throws(SQLiteError) {
                promise.succeed(try body(tables))
            } catch {
                promise.fail(error)
            }
        }
        if !queued { promise.fail(ActivityStoreError.closed) }
        return promise.futureResult
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
        read(on: eventLoop) { tables throws(SQLiteError) in
            // One read transaction: one snapshot for all the users.
            try tables.db.execute("BEGIN")
            do throws(SQLiteError) {
                var seen = Set<String>()
                var tokens: [Token] = []
                for user in externalUserIDs {
                    for token in try tables.pushToStartTokens(appID: appID, externalUserID: user, attributesType: attributesType)
                    where seen.insert(token.hex).inserted {
                        tokens.append(token)
                    }
                }
                try tables.db.execute("COMMIT")
                return tokens
            } catch {
                try? tables.db.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Refuses new calls, commits what is queued, closes the file; idempotent.
    public func close() async throws {
        writes.close()
        reads.close()
        await latch.wait()
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

/// The writer thread's connection and the batch loop.
final class SQLiteWriteSession {
    let db: SQLiteConnection
    let tables: SQLiteTables
    let reader: SQLiteStateReader
    /// Whether the current transaction has written anything.
    private var wrote = false
    /// Set when an error (I/O, disk full, out of memory) made SQLite roll back
    /// the whole transaction: the batch's earlier writes are gone, so every
    /// future of the batch fails with it and the rest of the batch does not run.
    private var aborted: SQLiteError?

    struct BatchStats {
        var committedWrites: Bool
    }

    init(db: SQLiteConnection) {
        self.db = db
        self.tables = SQLiteTables(db: db)
        self.reader = SQLiteStateReader(tables: tables)
    }

    /// One transaction for the whole batch, one commit, then every completion.
    func run(_ batch: [WriteJob]) -> BatchStats {
        do throws(SQLiteError) {
            try db.run(SQLiteTables.SQL.begin)
        } catch {
            for job in batch { job.fail(error) }
            return BatchStats(committedWrites: false)
        }
        wrote = false
        aborted = nil
        // Completions grouped by event loop: one cross-thread `execute` per loop
        // and batch, not one per future.
        var completions: [ObjectIdentifier: (loop: any EventLoop, complete: [@Sendable (Result<Void, SQLiteError>) -> Void])] = [:]
        for job in batch {
            let complete = job.run(self)
            completions[ObjectIdentifier(job.eventLoop), default: (job.eventLoop, [])].complete.append(complete)
        }
        let commit: Result<Void, SQLiteError>
        if let aborted {
            commit = .failure(aborted)
        } else {
            do throws(SQLiteError) {
                try db.run(SQLiteTables.SQL.commit)
                commit = .success(())
            } catch {
                commit = .failure(error)
                // A failed COMMIT may leave the transaction open (e.g. SQLITE_BUSY); end it.
                if sqlite3_get_autocommit(db.handle) == 0 { try? db.run(SQLiteTables.SQL.rollback) }
            }
        }
        for (loop, group) in completions.values {
            loop.execute { for complete in group { complete(commit) } }
        }
        return BatchStats(committedWrites: wrote && commit.isSuccess)
    }

    /// Plans `mutation` against the transaction so far and writes the plan in
    /// a savepoint: on any failure nothing of it stays.
    func plan<M: StoreMutation>(_ mutation: M, now: UnixTime) -> Result<M.Outcome, any Error> {
        if let aborted { return .failure(aborted) }
        reader.reset()
        let plan: MutationPlan<M.Outcome>
        do throws(DomainError) {
            plan = try mutation.plan(reader, now: now)
        } catch {
            if let failure = reader.failure { return .failure(checkAborted(failure)) }
            return .failure(error)
        }
        if let failure = reader.failure { return .failure(checkAborted(failure)) }
        guard !plan.writes.isEmpty else { return .success(plan.outcome) }
        if plan.writes.count == 1, SQLiteTables.isOneStatement(plan.writes[0]) {
            // One statement is atomic by itself (SQLite undoes a failed statement).
            do throws(SQLiteError) {
                try tables.write(plan.writes[0])
                wrote = true
                return .success(plan.outcome)
            } catch {
                return .failure(checkAborted(error))
            }
        }
        do throws(SQLiteError) {
            try db.run(SQLiteTables.SQL.savepoint)
        } catch {
            return .failure(checkAborted(error))
        }
        do throws(SQLiteError) {
            for write in plan.writes { try tables.write(write) }
            try db.run(SQLiteTables.SQL.release)
            wrote = true
            return .success(plan.outcome)
        } catch {
            _ = checkAborted(error)
            if aborted == nil {
                try? db.run(SQLiteTables.SQL.rollbackToSavepoint)
                try? db.run(SQLiteTables.SQL.release)
            }
            return .failure(error)
        }
    }

    /// Notes whether `error` ended the transaction (SQLite is back in autocommit).
    private func checkAborted(_ error: SQLiteError) -> SQLiteError {
        if aborted == nil, sqlite3_get_autocommit(db.handle) != 0 { aborted = error }
        return error
    }
}

extension Result {
    fileprivate var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
