import CSQLite
import LiveRelayAPNs
import LiveRelayStore
import Logging

/// The SQLite schema as an ordered list of migrations, and the code that
/// brings a file up to date.
///
/// `schema_version` holds one row per applied migration (version, applied_at);
/// the file's version is the highest. Opening a file runs, in one
/// `BEGIN IMMEDIATE` transaction, every migration above that version, so an
/// empty file gets the whole schema, an up-to-date one gets nothing (re-opening
/// is idempotent), and a crash mid-migration leaves the old version intact.
/// A file from a newer LiveRelay (a version above ``current``) is refused
/// rather than guessed at.
///
/// Never edit a migration that has shipped: append a new one.
///
/// The page size is not part of a migration: `Configuration.pageSize` is set
/// on a new, empty file before it switches to WAL, and SQLite cannot change the
/// page size of a file in WAL mode, so an existing file keeps the one it was
/// created with (changing it means `PRAGMA journal_mode=DELETE; PRAGMA
/// page_size=N; VACUUM;` with the server stopped, then reopening, which
/// returns to WAL).
enum SQLiteSchema {
    /// `migrations[i]` brings a file from version `i` to `i + 1`.
    static let migrations: [String] = [
        // 1: tokens, activities, idempotency records and the hot-lookup indexes.
        """
        CREATE TABLE tokens (
            app_id           TEXT    NOT NULL,
            hex              TEXT    NOT NULL,
            kind             INTEGER NOT NULL CHECK (kind IN (0, 1)),        -- 0 update, 1 push-to-start
            environment      INTEGER NOT NULL CHECK (environment IN (0, 1)), -- 0 sandbox, 1 production
            attributes_type  TEXT,
            activity_id      TEXT,
            external_user_id TEXT,
            device_id        TEXT,
            created_at       INTEGER NOT NULL,                               -- UNIX milliseconds
            updated_at       INTEGER NOT NULL,
            expires_at       INTEGER,
            PRIMARY KEY (app_id, hex)
        ) WITHOUT ROWID;

        -- Hot lookup 1 (an activity's update tokens) and the update-token rotation
        -- slot (app, activity, device). NULL device ids never collide.
        CREATE UNIQUE INDEX tokens_update_slot
            ON tokens (app_id, activity_id, device_id) WHERE kind = 0;
        -- Hot lookup 2 (a type's push-to-start tokens) and the push-to-start
        -- rotation slot (app, type, device).
        CREATE UNIQUE INDEX tokens_push_to_start_slot
            ON tokens (app_id, attributes_type, device_id) WHERE kind = 1;
        -- Hot lookup 3: a user's push-to-start tokens of a type.
        CREATE INDEX tokens_push_to_start_by_user
            ON tokens (app_id, external_user_id, attributes_type) WHERE kind = 1 AND external_user_id IS NOT NULL;
        -- The token sweep: only tokens with their own expiry.
        CREATE INDEX tokens_expiring ON tokens (expires_at) WHERE expires_at IS NOT NULL;

        CREATE TABLE activities (
            app_id             TEXT    NOT NULL,
            id                 TEXT    NOT NULL,
            attributes_type    TEXT,
            state              TEXT    NOT NULL,
            last_timestamp     INTEGER NOT NULL,
            last_content_state TEXT,
            created_at         INTEGER NOT NULL,
            expires_at         INTEGER NOT NULL,
            ended_at           INTEGER,
            dismiss_at         INTEGER,
            sweep_deadline     INTEGER NOT NULL,                             -- Activity.sweepDeadline
            PRIMARY KEY (app_id, id)
        ) WITHOUT ROWID;
        -- The activity sweep.
        CREATE INDEX activities_sweep_deadline ON activities (sweep_deadline);

        CREATE TABLE idempotency_records (
            app_id          TEXT    NOT NULL,
            activity_id     TEXT    NOT NULL,
            key             TEXT    NOT NULL,
            operation       TEXT    NOT NULL,
            fingerprint     INTEGER NOT NULL,                                -- UInt64 bit pattern
            reply_timestamp INTEGER NOT NULL,
            reply_state     TEXT    NOT NULL,
            reply_summary   BLOB    NOT NULL,                                -- liverelay.v1.DeliverySummary
            created_at      INTEGER NOT NULL,
            PRIMARY KEY (app_id, activity_id, key)
        ) WITHOUT ROWID;
        """,
        // 2: idempotency records keep the domain's reply record (StoredReply.targetsJSON),
        // not a wire message; rows written by version 1 keep their reply_summary and are
        // read through StoredReply(legacySummary:) until they are purged with their activity.
        """
        ALTER TABLE idempotency_records ADD COLUMN reply_targets TEXT;
        """,
        // 3: durable dispatch intents (DispatchIntent), one row per accepted call with pushes.
        // A rowid table: an end's target list can be megabytes, which WITHOUT ROWID handles badly.
        // Settling an intent keeps the call's final account on its idempotency record
        // (reply_account, StoredReply.accountJSON; NULL until then) for replays.
        """
        ALTER TABLE idempotency_records ADD COLUMN reply_account TEXT;
        CREATE TABLE dispatch_intents (
            app_id      TEXT    NOT NULL,
            activity_id TEXT    NOT NULL,
            timestamp   INTEGER NOT NULL,                                    -- the aps timestamp
            version     INTEGER NOT NULL,                                    -- DispatchIntent.formatVersion
            event       TEXT    NOT NULL,                                    -- start, update, end
            payload     BLOB    NOT NULL,
            topic       TEXT    NOT NULL,
            priority    INTEGER NOT NULL,
            expiration  INTEGER NOT NULL,                                    -- apns-expiration, UNIX seconds
            expires_at  INTEGER,                                             -- UNIX milliseconds
            targets     BLOB,                                                -- NULL: the activity's update tokens
            created_at  INTEGER NOT NULL,
            owner       TEXT,
            lease_until INTEGER NOT NULL,
            UNIQUE (app_id, activity_id, timestamp)
        );
        CREATE INDEX dispatch_intents_lease ON dispatch_intents (lease_until);
        CREATE INDEX dispatch_intents_owner ON dispatch_intents (owner);
        """,
        // 4: an update's fan-out (SQLiteTables.SQL.updateTargets) reads one covering index in
        // one pass instead of the slot index plus a primary-key lookup per token (100,000
        // random B-tree probes for a 100k-token activity). The index replaces
        // tokens_update_slot rather than joining it, so registering an update token still
        // writes two B-trees, not three: it has the slot's columns first (so the slot lookup
        // uses it too) and then environment, expires_at and kind (the covered columns; hex
        // is in every index of a WITHOUT ROWID table). A unique index cannot carry extra
        // columns in SQLite, so the slot's uniqueness moves to two triggers: a second token
        // in a taken slot is still a constraint error, never a silent second row.
        """
        DROP INDEX tokens_update_slot;
        CREATE INDEX tokens_update_targets
            ON tokens (app_id, activity_id, device_id, environment, expires_at, kind) WHERE kind = 0;
        CREATE TRIGGER tokens_update_slot_insert BEFORE INSERT ON tokens
            WHEN NEW.kind = 0 AND NEW.device_id IS NOT NULL
        BEGIN
            SELECT RAISE(ABORT, 'UNIQUE constraint failed: tokens update slot') FROM tokens
            WHERE kind = 0 AND app_id = NEW.app_id AND activity_id = NEW.activity_id AND device_id = NEW.device_id
                AND hex <> NEW.hex;
        END;
        CREATE TRIGGER tokens_update_slot_update BEFORE UPDATE OF kind, app_id, activity_id, device_id ON tokens
            WHEN NEW.kind = 0 AND NEW.device_id IS NOT NULL
        BEGIN
            SELECT RAISE(ABORT, 'UNIQUE constraint failed: tokens update slot') FROM tokens
            WHERE kind = 0 AND app_id = NEW.app_id AND activity_id = NEW.activity_id AND device_id = NEW.device_id
                AND hex <> NEW.hex;
        END;
        """,
        // 5: an activity's idempotency records by call timestamp: a settle finds its call's
        // record with one lookup, and a put evicts the oldest calls' records over
        // IdempotencyRecord.keptPerActivity (SQLiteTables.SQL.evictRecords) from the index's end.
        """
        CREATE INDEX idempotency_records_timestamp ON idempotency_records (app_id, activity_id, reply_timestamp);
        """,
        // 6: the apps' event feeds (FeedEvent, FeedEventColumns). One writer commits in order, so
        // one AUTOINCREMENT cursor for every app is commit-ordered within each app, and never
        // handed out twice, even after retention deleted the newest rows. A partial unique index
        // keeps one event per de-duplication key (INSERT OR IGNORE); event_feeds keeps, per
        // app, the highest cursor retention deleted, which readers below it are told of.
        """
        CREATE TABLE feed_events (
            cursor     INTEGER PRIMARY KEY AUTOINCREMENT,
            app_id     TEXT    NOT NULL,
            time_ms    INTEGER NOT NULL,                                     -- UNIX milliseconds
            dedupe_key TEXT,
            body       TEXT    NOT NULL                                      -- FeedEvent.bodyJSON
        );
        CREATE INDEX feed_events_app ON feed_events (app_id, cursor);
        CREATE UNIQUE INDEX feed_events_dedupe ON feed_events (app_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
        CREATE TABLE event_feeds (
            app_id          TEXT    NOT NULL PRIMARY KEY,
            trimmed_through INTEGER NOT NULL
        ) WITHOUT ROWID;
        """,
    ]

    /// The version this build writes.
    static var current: Int { migrations.count }

    /// Brings the file up to ``current``; returns the version it found.
    static func migrate(_ db: SQLiteConnection, now: Int64) throws(SQLiteError) -> Int {
        try migrate(db, versionTable: "schema_version", migrations: migrations, now: now)
    }

    /// Runs the `migrations` above the version recorded in `versionTable`, in one
    /// `BEGIN IMMEDIATE` transaction; returns the version it found. The
    /// activity store's schema and the registry's (``SQLiteRegistrySchema``,
    /// in a file of its own) each keep their own version table.
    static func migrate(_ db: SQLiteConnection, versionTable: String, migrations: [String], now: Int64) throws(SQLiteError) -> Int {
        let current = migrations.count
        try db.execute("CREATE TABLE IF NOT EXISTS \(versionTable) (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)")
        try db.execute("BEGIN IMMEDIATE")
        do throws(SQLiteError) {
            let found = try version(db, versionTable: versionTable)
            guard found <= current else {
                throw SQLiteError(
                    code: 1, message: "the file has schema version \(found), newer than this build's \(current)",
                    context: db.path)
            }
            for version in found..<current {
                try db.execute(migrations[version])
                try db.run("INSERT INTO \(versionTable) (version, applied_at) VALUES (?, ?)") {
                    $0.bind(1, Int64(version + 1))
                    $0.bind(2, now)
                }
            }
            try db.execute("COMMIT")
            return found
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
    }

    static func version(_ db: SQLiteConnection, versionTable: String = "schema_version") throws(SQLiteError) -> Int {
        Int(try db.queryFirst("SELECT coalesce(max(version), 0) FROM \(versionTable)") { $0.int64(0) } ?? 0)
    }
}

extension SQLiteConnection {
    /// Opens (creating if needed) the database of a small store beside the
    /// activities (the tenant registry, the channels) in WAL mode with full
    /// fsyncs, and migrates it; returns the connection and the schema version.
    /// The connection is closed again when any step fails.
    static func openMigrated(
        path: String, busyTimeoutMilliseconds: Int32, pragmas: String, versionTable: String, migrations: [String],
        logger: Logger
    ) throws -> (connection: SQLiteConnection, schemaVersion: Int) {
        let db = try SQLiteConnection(path: path, create: true, logger: logger)
        do {
            sqlite3_busy_timeout(db.handle, busyTimeoutMilliseconds)
            let mode = try db.pragma("PRAGMA journal_mode = WAL")
            guard mode?.lowercased() == "wal" else {
                throw SQLiteError(code: 1, message: "cannot switch to WAL (journal_mode is \(mode ?? "unknown"))", context: path)
            }
            try db.execute(pragmas)
            let version = try SQLiteSchema.migrate(
                db, versionTable: versionTable, migrations: migrations, now: SystemClock().now().milliseconds)
            return (db, version)
        } catch {
            db.close()
            throw error
        }
    }
}
