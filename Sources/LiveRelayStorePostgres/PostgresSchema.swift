import LiveRelayAPNs
import Logging
import PostgresNIO

/// The PostgreSQL schema as an ordered list of migrations, and the code that
/// brings a database up to date.
///
/// `schema_version` holds one row per applied migration. Every node runs
/// ``migrate(_:schema:now:logger:)`` at start, in one transaction that first
/// takes a transaction-scoped advisory lock named after the schema: when
/// several nodes start at once, one migrates and the others wait for its
/// commit and then find nothing to do (DDL is transactional in PostgreSQL,
/// so a crash mid-migration leaves the old version intact). A database from a
/// newer LiveRelay is refused rather than guessed at.
///
/// Never edit a migration that has shipped: append a new one. Each migration
/// is a list of statements (the extended protocol runs one at a time).
enum PostgresSchema {
    /// `migrations[i]` brings a database from version `i` to `i + 1`.
    static let migrations: [[String]] = [
        // 1: tokens, activities, idempotency records and the hot-lookup indexes.
        // Text keys use the "C" collation: byte order is all a key needs, and
        // it is cheaper than a locale's and the same on every node.
        [
            """
            CREATE TABLE tokens (
                app_id           text COLLATE "C" NOT NULL,
                hex              text COLLATE "C" NOT NULL,
                kind             smallint NOT NULL CHECK (kind IN (0, 1)),        -- 0 update, 1 push-to-start
                environment      smallint NOT NULL CHECK (environment IN (0, 1)), -- 0 sandbox, 1 production
                attributes_type  text COLLATE "C",
                activity_id      text COLLATE "C",
                external_user_id text COLLATE "C",
                device_id        text COLLATE "C",
                created_at       bigint NOT NULL,                                 -- UNIX milliseconds
                updated_at       bigint NOT NULL,
                expires_at       bigint,
                PRIMARY KEY (app_id, hex)
            )
            """,
            // Hot lookup 1 (an activity's update tokens) and the update-token
            // rotation slot: unique, so two nodes filling one slot cannot both win.
            // NULL device ids never collide.
            "CREATE UNIQUE INDEX tokens_update_slot ON tokens (app_id, activity_id, device_id) WHERE kind = 0",
            // Hot lookup 2 (a type's push-to-start tokens) and the push-to-start rotation slot.
            "CREATE UNIQUE INDEX tokens_push_to_start_slot ON tokens (app_id, attributes_type, device_id) WHERE kind = 1",
            // Hot lookup 3: a user's push-to-start tokens of a type.
            """
            CREATE INDEX tokens_push_to_start_by_user ON tokens (app_id, external_user_id, attributes_type)
                WHERE kind = 1 AND external_user_id IS NOT NULL
            """,
            // The token sweep: only tokens with their own expiry.
            "CREATE INDEX tokens_expiring ON tokens (expires_at) WHERE expires_at IS NOT NULL",
            """
            CREATE TABLE activities (
                app_id             text COLLATE "C" NOT NULL,
                id                 text COLLATE "C" NOT NULL,
                attributes_type    text COLLATE "C",
                state              text NOT NULL,
                last_timestamp     bigint NOT NULL,
                last_content_state text,
                created_at         bigint NOT NULL,
                expires_at         bigint NOT NULL,
                ended_at           bigint,
                dismiss_at         bigint,
                sweep_deadline     bigint NOT NULL,                              -- Activity.sweepDeadline
                PRIMARY KEY (app_id, id)
            )
            """,
            "CREATE INDEX activities_sweep_deadline ON activities (sweep_deadline)",
            """
            CREATE TABLE idempotency_records (
                app_id          text COLLATE "C" NOT NULL,
                activity_id     text COLLATE "C" NOT NULL,
                key             text COLLATE "C" NOT NULL,
                operation       text NOT NULL,
                fingerprint     bigint NOT NULL,                                 -- UInt64 bit pattern
                reply_timestamp bigint NOT NULL,
                reply_state     text NOT NULL,
                reply_summary   bytea NOT NULL,                                  -- liverelay.v1.DeliverySummary
                created_at      bigint NOT NULL,
                PRIMARY KEY (app_id, activity_id, key)
            )
            """,
        ],
        // 2: idempotency records keep the domain's reply record (StoredReply.targetsJSON),
        // not a wire message; rows written by version 1 keep their reply_summary and are
        // read through StoredReply(legacySummary:) until they are purged with their activity.
        [
            "ALTER TABLE idempotency_records ADD COLUMN reply_targets text"
        ],
        // 3: durable dispatch intents (DispatchIntent), one row per accepted call with pushes,
        // leased to the node that works on them. Settling an intent keeps the call's final
        // account on its idempotency record (reply_account, StoredReply.accountJSON; NULL
        // until then) for replays.
        [
            "ALTER TABLE idempotency_records ADD COLUMN reply_account text",
            """
            CREATE TABLE dispatch_intents (
                app_id      text COLLATE "C" NOT NULL,
                activity_id text COLLATE "C" NOT NULL,
                timestamp   bigint NOT NULL,                                     -- the aps timestamp
                version     integer NOT NULL,                                    -- DispatchIntent.formatVersion
                event       text NOT NULL,                                       -- start, update, end
                payload     bytea NOT NULL,
                topic       text NOT NULL,
                priority    smallint NOT NULL,
                expiration  bigint NOT NULL,                                     -- apns-expiration, UNIX seconds
                expires_at  bigint,                                              -- UNIX milliseconds
                targets     bytea,                                               -- NULL: the activity's update tokens
                created_at  bigint NOT NULL,
                owner       text COLLATE "C",
                lease_until bigint NOT NULL,
                PRIMARY KEY (app_id, activity_id, timestamp)
            )
            """,
            "CREATE INDEX dispatch_intents_lease ON dispatch_intents (lease_until)",
            "CREATE INDEX dispatch_intents_owner ON dispatch_intents (owner)",
        ],
        // 4: an update's fan-out (PostgresTables.updateTargetsSQL) reads only hex, environment
        // and expires_at: the slot index carries them (INCLUDE), so the read is an index-only
        // scan once the table's visibility map is set, instead of a heap fetch per token. Still
        // unique on the slot's columns, under the same name.
        [
            "DROP INDEX tokens_update_slot",
            """
            CREATE UNIQUE INDEX tokens_update_slot ON tokens (app_id, activity_id, device_id)
                INCLUDE (hex, environment, expires_at) WHERE kind = 0
            """,
        ],
        // 5: an activity's idempotency records by call timestamp: a settle finds its call's
        // record with one lookup, and a put evicts the oldest calls' records over
        // IdempotencyRecord.keptPerActivity (PostgresOverlay.evictRecordsSQL) from the index's end.
        [
            "CREATE INDEX idempotency_records_timestamp ON idempotency_records (app_id, activity_id, reply_timestamp)"
        ],
        // 6: the apps' event feeds (FeedEvent, FeedEventColumns), one per app for every node.
        // Cursors come from one sequence (no cache: values are handed out in increasing order
        // across sessions), taken under the app's transaction-scoped advisory lock, which is
        // held until the commit (PostgresOverlay.writeEvents): so an app's cursors are in
        // commit order. A partial unique index keeps one event per de-duplication key
        // (ON CONFLICT DO NOTHING); event_feeds keeps, per app, the highest cursor retention
        // deleted, which readers below it are told of.
        [
            "CREATE SEQUENCE feed_events_cursor AS bigint CACHE 1",
            """
            CREATE TABLE feed_events (
                app_id     text COLLATE "C" NOT NULL,
                cursor     bigint NOT NULL,
                time_ms    bigint NOT NULL,                                      -- UNIX milliseconds
                dedupe_key text COLLATE "C",
                body       text NOT NULL,                                        -- FeedEvent.bodyJSON
                PRIMARY KEY (app_id, cursor)
            )
            """,
            "CREATE UNIQUE INDEX feed_events_dedupe ON feed_events (app_id, dedupe_key) WHERE dedupe_key IS NOT NULL",
            """
            CREATE TABLE event_feeds (
                app_id          text COLLATE "C" PRIMARY KEY,
                trimmed_through bigint NOT NULL
            )
            """,
        ],
    ]

    /// The version this build writes.
    static var current: Int { migrations.count }

    /// Creates `schema` if needed and brings it up to ``current``; returns the version it found.
    static func migrate(_ connection: PostgresConnection, schema: String, now: Int64, logger: Logger) async throws -> Int {
        try await migrate(connection, schema: schema, versionTable: "schema_version", migrations: migrations, now: now, logger: logger)
    }

    /// Creates `schema` if needed and runs the `migrations` above the version
    /// recorded in `versionTable`, under the schema's advisory lock; returns
    /// the version it found. The activity store's schema and the registry's
    /// (``PostgresRegistrySchema``) each keep their own version table and
    /// share the lock, so that nodes starting at once never run DDL in one
    /// schema side by side.
    static func migrate(
        _ connection: PostgresConnection, schema: String, versionTable: String, migrations: [[String]], now: Int64, logger: Logger
    ) async throws -> Int {
        try PostgresStoreConfiguration.checkSchema(schema)
        let current = migrations.count
        func run(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) async throws {
            try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        }
        try await run("BEGIN")
        do {
            var lock = PostgresBindings()
            lock.append("liverelay.migrate.\(schema)")
            try await run("SELECT pg_advisory_xact_lock(hashtext($1))", lock)
            // `schema` is checked to be [a-z0-9_]+, so quoting it is enough.
            try await run("CREATE SCHEMA IF NOT EXISTS \"\(schema)\"")
            try await run("SET LOCAL search_path TO \"\(schema)\"")
            try await run("CREATE TABLE IF NOT EXISTS \(versionTable) (version integer PRIMARY KEY, applied_at bigint NOT NULL)")
            var found = 0
            for try await (version) in try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT coalesce(max(version), 0)::int8 FROM \(versionTable)"), logger: logger
            )
            .decode(Int64.self) {
                found = Int(version)
            }
            guard found <= current else { throw PostgresStoreError.newerSchema(found: found, supported: current) }
            for version in found..<current {
                for statement in migrations[version] { try await run(statement) }
                var binds = PostgresBindings()
                binds.append(Int32(version + 1)); binds.append(now)
                try await run("INSERT INTO \(versionTable) (version, applied_at) VALUES ($1, $2)", binds)
            }
            try await run("COMMIT")
            return found
        } catch {
            try? await run("ROLLBACK")
            throw error
        }
    }
}

/// A pool of its own for a small store beside the activities (the tenant
/// registry, the channels), connected and migrated: a store of few rows
/// needs few connections, and its own application name shows it apart in
/// `pg_stat_activity`.
struct PostgresSidePool {
    let client: PostgresClient
    /// Runs the pool; cancelled (and awaited) when the store closes.
    let runTask: Task<Void, Never>
    let schemaVersion: Int

    /// Throws if the server cannot be reached within `startupTimeout`
    /// (``PostgresStoreError/unavailable(_:)``), refuses the credentials, or
    /// holds a newer schema than `migrations` know.
    init(
        configuration: PostgresStoreConfiguration, name: String, maxConnections: Int, versionTable: String,
        migrations: [[String]], logger: Logger, startupTimeout: Duration
    ) async throws {
        var own = configuration
        own.maxConnections = maxConnections
        own.applicationName = configuration.applicationName + "-" + name
        let client = PostgresClient(configuration: own.client, backgroundLogger: logger)
        let run = Task { await client.run() }
        do {
            let schema = configuration.schema
            schemaVersion = try await withDeadline(startupTimeout, "connecting to \(configuration)") {
                try await client.withConnection { connection in
                    try await PostgresSchema.migrate(
                        connection, schema: schema, versionTable: versionTable, migrations: migrations,
                        now: SystemClock().now().milliseconds, logger: logger)
                }
            }
        } catch let error as DeadlineExceeded {
            // Not awaited: a migration stuck on a dead connection could hold the pool's shutdown.
            run.cancel()
            throw PostgresStoreError.unavailable(error.description)
        } catch {
            run.cancel()
            await run.value
            throw error
        }
        self.client = client
        self.runTask = run
    }
}
