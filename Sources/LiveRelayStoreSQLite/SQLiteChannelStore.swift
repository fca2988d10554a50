import CSQLite
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Logging

/// The channels' schema in `channels.sqlite3`, versioned in its own
/// `channel_schema_version` table. Never edit a migration that has shipped: append one.
enum SQLiteChannelSchema {
    static let versionTable = "channel_schema_version"

    static let migrations: [String] = [
        // 1: channels, keyed by (app, id); the second index serves an environment's count and pages.
        """
        CREATE TABLE channels (
            app_id         TEXT    NOT NULL,
            id             TEXT    NOT NULL,                                         -- APNs's channel id
            environment    INTEGER NOT NULL CHECK (environment IN (0, 1)),           -- 0 sandbox, 1 production
            storage_policy INTEGER NOT NULL CHECK (storage_policy IN (0, 1)),        -- message-storage-policy
            created_at     INTEGER NOT NULL,                                         -- UNIX milliseconds
            PRIMARY KEY (app_id, id)
        ) WITHOUT ROWID;
        CREATE INDEX channels_by_environment ON channels (app_id, environment, id);
        """
    ]
}

/// The channel store of a single node: its own SQLite file, `<data dir>/channels.sqlite3`.
///
/// ## Why a file of its own
/// Not the activity store's file: its writer batches thousands of calls per
/// fsync, and a channel create (a count and an insert) has no business in
/// those batches. Not the registry's file either, although that would have
/// been possible: the registry's connection belongs to its thread and its
/// schema list to the registry, and channels are not tenant configuration
/// (no audit row, no version bump that makes every node reload). A file of
/// its own keeps the three lifecycles and schemas apart at the cost of one
/// more small file, created 0600 like the others.
///
/// ## Threads and durability
/// One thread owns the one connection and runs every call in order, so a
/// create's count and insert (one `BEGIN IMMEDIATE` transaction) can never
/// interleave with another create in this process, and `BEGIN IMMEDIATE` with
/// a busy timeout makes another process on the file wait its turn.
/// `journal_mode=WAL` with `synchronous=FULL`: a create or delete is on stable
/// storage when it returns.
public final class SQLiteChannelStore: ChannelStore, @unchecked Sendable {
    /// The file's name in the data directory.
    public static let fileName = "channels.sqlite3"
    /// The channel schema version this build writes.
    public static var schemaVersion: Int { SQLiteChannelSchema.migrations.count }

    public let path: String
    /// The schema version the file had when opened (0 for a new file).
    public let openedSchemaVersion: Int

    private typealias Job = @Sendable (SQLiteConnection) -> Void
    private let jobs = SQLiteJobQueue<Job>()
    private let latch = SQLiteExitLatch(count: 1)

    /// Opens (creating if needed) `<dataDirectory>/channels.sqlite3`.
    public convenience init(
        dataDirectory: String, busyTimeoutMilliseconds: Int32 = 5000, logger: Logger = Logger(label: "liverelay.channels")
    ) throws {
        try self.init(path: dataDirectory + "/" + Self.fileName, busyTimeoutMilliseconds: busyTimeoutMilliseconds, logger: logger)
    }

    /// Opens (creating if needed, mode 0600) the store at `path` and migrates it.
    ///
    /// Throws ``SQLiteError`` when the file cannot be opened, is not a SQLite
    /// database, cannot switch to WAL, or has a newer channel schema. `logger`
    /// hears of a file it found readable by others and made owner-only.
    public init(path: String, busyTimeoutMilliseconds: Int32 = 5000, logger: Logger = Logger(label: "liverelay.channels")) throws {
        self.path = path
        let (db, version) = try SQLiteConnection.openMigrated(
            path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds, pragmas: "PRAGMA synchronous = FULL",
            versionTable: SQLiteChannelSchema.versionTable, migrations: SQLiteChannelSchema.migrations, logger: logger)
        openedSchemaVersion = version
        do {
            let connection = Unchecked(db)
            try startSQLiteThread(name: "sqlite-channels") { [jobs, latch] in
                while let taken = jobs.take(max: 1) {
                    for job in taken { job(connection.value) }
                }
                connection.value.close()
                latch.threadExited()
            }
        } catch {
            db.close()
            throw error
        }
    }

    /// Runs `body` on the store's thread; a busy or locked file (another
    /// process holding it past the busy timeout) is ``ChannelStoreError/unavailable(_:)``.
    private func run<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let queued = jobs.push { db in
                continuation.resume(
                    with: Result {
                        do {
                            return try body(db)
                        } catch let error as SQLiteError where error.code == SQLITE_BUSY || error.code == SQLITE_LOCKED {
                            throw ChannelStoreError.unavailable(error.description)
                        }
                    })
            }
            if !queued { continuation.resume(throwing: ChannelStoreError.unavailable("the channel store is closed")) }
        }
    }

    static let columns = "app_id, id, environment, storage_policy, created_at"

    private static func channel(_ s: SQLiteStatement) -> Result<ChannelRecord, SQLiteError> {
        let (appID, id) = (s.string(0), s.string(1))
        guard
            let channel = ChannelColumns.channel(
                appID: appID, id: id, environment: s.int64(2), storagePolicy: s.int64(3), createdAt: s.int64(4))
        else {
            return .failure(SQLiteError(code: 1, message: "unreadable channel row \(appID)/\(id)", context: "channels"))
        }
        return .success(channel)
    }

    public func create(_ channel: ChannelRecord, limit: Int) async throws {
        try await run { db in
            try db.execute("BEGIN IMMEDIATE")
            do {
                let exists = try db.queryFirst("SELECT 1 FROM channels WHERE app_id = ? AND id = ?") {
                    $0.bind(1, channel.appID)
                    $0.bind(2, channel.id)
                } row: { _ in
                    true
                }
                guard exists == nil else { throw ChannelStoreError.alreadyExists }
                let count =
                    try db.queryFirst("SELECT count(*) FROM channels WHERE app_id = ? AND environment = ?") {
                        $0.bind(1, channel.appID)
                        $0.bind(2, ChannelColumns.environment(channel.environment))
                    } row: {
                        Int($0.int64(0))
                    } ?? 0
                guard count < limit else { throw ChannelStoreError.limitReached(count: count, limit: limit) }
                try db.run("INSERT INTO channels (\(Self.columns)) VALUES (?, ?, ?, ?, ?)") {
                    $0.bind(1, channel.appID)
                    $0.bind(2, channel.id)
                    $0.bind(3, ChannelColumns.environment(channel.environment))
                    $0.bind(4, Int64(channel.storagePolicy.rawValue))
                    $0.bind(5, channel.createdAt.milliseconds)
                }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
    }

    @discardableResult
    public func delete(appID: String, channelID: String) async throws -> Bool {
        try await run { db in
            try db.run("DELETE FROM channels WHERE app_id = ? AND id = ?") {
                $0.bind(1, appID)
                $0.bind(2, channelID)
            }
            return db.changes > 0
        }
    }

    public func channel(appID: String, channelID: String) async throws -> ChannelRecord? {
        try await run { db in
            try db.queryFirst("SELECT \(Self.columns) FROM channels WHERE app_id = ? AND id = ?") {
                $0.bind(1, appID)
                $0.bind(2, channelID)
            } row: {
                Self.channel($0)
            }?.get()
        }
    }

    public func list(appID: String, environment: APNsEnvironment?, after: String?, limit: Int) async throws -> [ChannelRecord] {
        try await run { db in
            // NULL parameters stand for "any environment" and "from the start": one statement, cached.
            let sql = """
                SELECT \(Self.columns) FROM channels
                WHERE app_id = ?1 AND (?2 IS NULL OR environment = ?2) AND (?3 IS NULL OR id > ?3)
                ORDER BY id LIMIT ?4
                """
            return try db.query(sql) {
                $0.bind(1, appID)
                $0.bind(2, environment.map(ChannelColumns.environment))
                $0.bind(3, after)
                $0.bind(4, Int64(max(0, limit)))
            } row: {
                Self.channel($0)
            }.map { try $0.get() }
        }
    }

    public func count(appID: String, environment: APNsEnvironment?) async throws -> Int {
        try await run { db in
            try db.queryFirst("SELECT count(*) FROM channels WHERE app_id = ?1 AND (?2 IS NULL OR environment = ?2)") {
                $0.bind(1, appID)
                $0.bind(2, environment.map(ChannelColumns.environment))
            } row: {
                Int($0.int64(0))
            } ?? 0
        }
    }

    /// Runs what is queued, closes the file (SQLite checkpoints the WAL into
    /// it) and returns when the thread has exited.
    public func close() async throws {
        jobs.close()
        await latch.wait()
    }

    deinit {
        // The thread holds the queue, not the store; closing lets it exit.
        jobs.close()
    }
}
