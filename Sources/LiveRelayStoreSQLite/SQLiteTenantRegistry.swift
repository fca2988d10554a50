import CSQLite
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Logging

/// The registry of a single node: its own SQLite file, `<data dir>/registry.sqlite3`.
///
/// ## Why a file of its own
/// Registry writes are rare and small; the activity store's writer batches
/// thousands of calls per fsync. Sharing that pipeline would put an admin
/// change's transaction (which reads the whole registry) between hot
/// batches, and tie the registry's schema and lifecycle to the store's. A
/// separate file keeps both simple, and a copy of the registry is one file.
///
/// ## Threads and durability
/// One thread owns the one connection and runs every statement in order
/// (a ``SQLiteJobQueue`` of one taker): an apply is `BEGIN IMMEDIATE`, the
/// whole snapshot read, ``RegistryRules/plan(_:on:now:)``, the writes, the
/// audit row and the version, `COMMIT`. `journal_mode=WAL` with
/// `synchronous=FULL`: the commit is on stable storage before `apply`
/// returns; at a few writes a day the fsync costs nothing worth pipelining.
/// `BEGIN IMMEDIATE` and a busy timeout also make a second process on the
/// same file (a tool) wait its turn rather than fail or interleave.
///
/// ## Files
/// The file is created 0600 before SQLite opens it (``SQLiteConnection``),
/// and SQLite gives its `-wal` and `-shm` the same mode: it holds API key
/// hashes and may hold APNs private keys.
public final class SQLiteTenantRegistry: TenantRegistry, @unchecked Sendable {
    /// The file's name in the data directory.
    public static let fileName = "registry.sqlite3"
    /// The registry schema version this build writes.
    public static var schemaVersion: Int { SQLiteRegistrySchema.migrations.count }

    public let path: String
    /// The schema version the file had when opened (0 for a new file).
    public let openedSchemaVersion: Int

    private typealias Job = @Sendable (SQLiteRegistryTables) -> Void
    private let jobs = SQLiteJobQueue<Job>()
    private let latch = SQLiteExitLatch(count: 1)
    private let feed = RegistryVersionFeed()

    /// Opens (creating if needed) `<dataDirectory>/registry.sqlite3`.
    public convenience init(
        dataDirectory: String, busyTimeoutMilliseconds: Int32 = 5000, logger: Logger = Logger(label: "liverelay.registry")
    ) throws {
        try self.init(path: dataDirectory + "/" + Self.fileName, busyTimeoutMilliseconds: busyTimeoutMilliseconds, logger: logger)
    }

    /// Opens (creating if needed) the registry at `path` and migrates it.
    ///
    /// Throws ``SQLiteError`` when the file cannot be opened, is not a SQLite
    /// database, cannot switch to WAL, or has a newer registry schema. `logger`
    /// hears of a file it found readable by others and made owner-only.
    public init(path: String, busyTimeoutMilliseconds: Int32 = 5000, logger: Logger = Logger(label: "liverelay.registry")) throws {
        self.path = path
        let (db, version) = try SQLiteConnection.openMigrated(
            path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds, pragmas: "PRAGMA synchronous = FULL; PRAGMA foreign_keys = OFF;",
            versionTable: SQLiteRegistrySchema.versionTable, migrations: SQLiteRegistrySchema.migrations, logger: logger)
        openedSchemaVersion = version
        do {
            let connection = Unchecked(db)
            try startSQLiteThread(name: "sqlite-registry") { [jobs, latch] in
                let tables = SQLiteRegistryTables(db: connection.value)
                while let taken = jobs.take(max: 1) {
                    for job in taken { job(tables) }
                }
                connection.value.close()
                latch.threadExited()
            }
        } catch {
            db.close()
            throw error
        }
    }

    /// Runs `body` on the registry's thread.
    private func run<T: Sendable>(_ body: @escaping @Sendable (SQLiteRegistryTables) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let queued = jobs.push { tables in
                continuation.resume(with: Result { try body(tables) })
            }
            if !queued { continuation.resume(throwing: ActivityStoreError.closed) }
        }
    }

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    private static func transaction<T>(
        _ tables: SQLiteRegistryTables, immediate: Bool, _ body: () throws -> T
    ) throws -> T {
        try tables.db.execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN")
        do {
            let value = try body()
            try tables.db.execute("COMMIT")
            return value
        } catch {
            try? tables.db.execute("ROLLBACK")
            throw error
        }
    }

    public func snapshot() async throws -> RegistrySnapshot {
        try await run { tables in try Self.transaction(tables, immediate: false) { try tables.snapshot() } }
    }

    public func version() async throws -> Int64 {
        try await run { tables in try tables.version() }
    }

    @discardableResult
    public func apply(_ change: RegistryChange, actor: String, now: UnixTime) async throws -> RegistryApplied {
        let applied = try await run { tables in
            try Self.transaction(tables, immediate: true) {
                let snapshot = try tables.snapshot()
                guard let plan = try RegistryRules.plan(change, on: snapshot, now: now) else {
                    return RegistryApplied(version: snapshot.version, entry: nil)
                }
                let entry = plan.entry(version: snapshot.version + 1, actor: actor, at: now)
                try tables.write(plan, entry: entry)
                return RegistryApplied(version: entry.sequence, entry: entry)
            }
        }
        if applied.entry != nil { feed.publish(applied.version) }
        return applied
    }

    public func touch(_ lastUsed: [String: UnixTime]) async throws {
        guard !lastUsed.isEmpty else { return }
        try await run { tables in try Self.transaction(tables, immediate: true) { try tables.touch(lastUsed) } }
    }

    public func audit(after sequence: Int64, limit: Int) async throws -> [AuditEntry] {
        try await run { tables in try tables.audit(after: sequence, limit: limit) }
    }

    // MARK: WebhookProgressStore

    /// Each in a `BEGIN IMMEDIATE` transaction: a claim's read and write are
    /// one step for a second process on the file as well.
    public func claimWebhook(appID: String, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> WebhookProgress? {
        try await run { tables in
            try Self.transaction(tables, immediate: true) { try tables.claimWebhook(appID: appID, node: node, now: now, lease: lease) }
        }
    }

    public func saveWebhook(_ progress: WebhookProgress, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> Bool {
        try await run { tables in
            try Self.transaction(tables, immediate: true) { try tables.saveWebhook(progress, node: node, now: now, lease: lease) }
        }
    }

    @discardableResult
    public func resetWebhook(appID: String) async throws -> WebhookProgress? {
        try await run { tables in try Self.transaction(tables, immediate: true) { try tables.resetWebhook(appID: appID) } }
    }

    public func webhookProgress(appID: String) async throws -> WebhookProgress? {
        try await run { tables in try tables.progress(appID: appID)?.progress }
    }

    public func releaseWebhook(appID: String, node: String) async throws {
        try await run { tables in try Self.transaction(tables, immediate: true) { try tables.releaseWebhook(appID: appID, node: node) } }
    }

    public func changes(pollEvery: Duration) -> AsyncStream<Int64> {
        feed.subscribe(pollEvery: pollEvery) { [weak self] in
            guard let self else { throw ActivityStoreError.closed }
            return try await self.version()
        }
    }

    /// Ends the change streams, runs what is queued, closes the file (SQLite
    /// checkpoints the WAL into it) and returns when the thread has exited.
    public func close() async throws {
        feed.finish()
        jobs.close()
        await latch.wait()
    }

    deinit {
        // The thread holds the queue, not the registry; closing lets it exit.
        feed.finish()
        jobs.close()
    }
}
