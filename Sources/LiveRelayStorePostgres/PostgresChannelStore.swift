import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// The channels' table in the store's schema, versioned in its own
/// `channel_schema_version` table and migrated under the schema's advisory
/// lock, like the registry's. Never edit a migration that has shipped: append one.
enum PostgresChannelSchema {
    static let versionTable = "channel_schema_version"

    static let migrations: [[String]] = [
        // 1: channels, keyed by (app, id); the second index serves an environment's count and pages.
        [
            """
            CREATE TABLE channels (
                app_id         text COLLATE "C" NOT NULL,
                id             text COLLATE "C" NOT NULL,                          -- APNs's channel id
                environment    smallint NOT NULL CHECK (environment IN (0, 1)),    -- 0 sandbox, 1 production
                storage_policy smallint NOT NULL CHECK (storage_policy IN (0, 1)), -- message-storage-policy
                created_at     bigint NOT NULL,                                    -- UNIX milliseconds
                PRIMARY KEY (app_id, id)
            )
            """,
            "CREATE INDEX channels_by_environment ON channels (app_id, environment, id)",
        ]
    ]
}

/// The channel store shared by several nodes: the `channels` table in the
/// store's PostgreSQL schema, with a small pool of its own.
///
/// ## The limit, race-free
/// A create is one READ COMMITTED transaction that first takes a
/// transaction-scoped advisory lock named after the schema and the app
/// (`pg_advisory_xact_lock`), then checks the id, counts the app's channels
/// in the environment and inserts. Two creates for one app, on any nodes,
/// queue on that lock, and the second counts only after the first committed
/// (each READ COMMITTED statement sees what committed before it): the count
/// never goes past the limit, and no serialization failure needs a retry.
/// Creates of different apps do not wait for each other (a hash collision
/// between two apps' lock keys only makes them queue). The primary key
/// backs up the id check: a unique violation is ``ChannelStoreError/alreadyExists`` too.
///
/// ## Deadlines and failures
/// Every statement runs through a ``PostgresSession`` with
/// ``PostgresStoreConfiguration/statementTimeout``. A call that loses its
/// connection (or times out) before COMMIT is retried on a new connection
/// (nothing of it committed); past the retries it is
/// ``ChannelStoreError/unavailable(_:)``, as is a closed store or an
/// unreachable server. One that loses it during COMMIT is
/// ``ChannelStoreError/outcomeUnknown(_:)``.
///
/// ## Connections
/// At most ``PostgresChannelStore/maxConnections``, named with `-channels`
/// appended to the configuration's `application_name`.
public final class PostgresChannelStore: ChannelStore, @unchecked Sendable {
    /// The channel schema version this build writes.
    public static var schemaVersion: Int { PostgresChannelSchema.migrations.count }
    public static let maxConnections = 4

    public let configuration: PostgresStoreConfiguration
    /// The channel schema version the database had when this opened it (0 for a new one).
    public let openedSchemaVersion: Int

    private let client: PostgresClient
    private let logger: Logger
    private let runTask: Task<Void, Never>
    private let closed = NIOLockedValueBox(false)

    /// Connects with a pool of its own, and migrates the channels' table.
    ///
    /// Throws if the server cannot be reached within `startupTimeout`
    /// (``PostgresStoreError/unavailable(_:)``), refuses the credentials, or
    /// holds a newer channel schema.
    public init(
        configuration: PostgresStoreConfiguration, logger: Logger = Logger(label: "liverelay.channels"),
        startupTimeout: Duration = .seconds(30)
    ) async throws {
        self.configuration = configuration
        self.logger = logger
        let pool = try await PostgresSidePool(
            configuration: configuration, name: "channels", maxConnections: Self.maxConnections,
            versionTable: PostgresChannelSchema.versionTable, migrations: PostgresChannelSchema.migrations, logger: logger,
            startupTimeout: startupTimeout)
        client = pool.client
        runTask = pool.runTask
        openedSchemaVersion = pool.schemaVersion
    }

    static let columns = "app_id, id, environment, storage_policy, created_at"

    private static func channel(_ row: PostgresRow) throws -> ChannelRecord {
        let (appID, id, environment, policy, createdAt) = try row.decode((String, String, Int16, Int16, Int64).self)
        guard
            let channel = ChannelColumns.channel(
                appID: appID, id: id, environment: Int64(environment), storagePolicy: Int64(policy), createdAt: createdAt)
        else { throw PostgresStoreError.corruptRow("channel \(appID)/\(id)") }
        return channel
    }

    // MARK: ChannelStore

    public func create(_ channel: ChannelRecord, limit: Int) async throws {
        let lockKey = "liverelay.channels.\(configuration.schema).\(channel.appID)"
        try await withSession { session, commitSent in
            try await session.query("BEGIN")
            do {
                var lock = PostgresBindings(capacity: 1)
                lock.append(lockKey)
                try await session.query(PostgresQuery(unsafeSQL: "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", binds: lock))
                var key = PostgresBindings(capacity: 2)
                key.append(channel.appID)
                key.append(channel.id)
                let exists = try await session.query(
                    PostgresQuery(unsafeSQL: "SELECT 1 FROM channels WHERE app_id = $1 AND id = $2", binds: key))
                guard exists.isEmpty else { throw ChannelStoreError.alreadyExists }
                var scope = PostgresBindings(capacity: 2)
                scope.append(channel.appID)
                scope.append(Int16(ChannelColumns.environment(channel.environment)))
                let rows = try await session.query(
                    PostgresQuery(unsafeSQL: "SELECT count(*) FROM channels WHERE app_id = $1 AND environment = $2", binds: scope))
                let count = Int(try rows.first?.decode(Int64.self) ?? 0)
                guard count < limit else { throw ChannelStoreError.limitReached(count: count, limit: limit) }
                var insert = PostgresBindings(capacity: 5)
                insert.append(channel.appID)
                insert.append(channel.id)
                insert.append(Int16(ChannelColumns.environment(channel.environment)))
                insert.append(Int16(channel.storagePolicy.rawValue))
                insert.append(channel.createdAt.milliseconds)
                try await session.query(
                    PostgresQuery(unsafeSQL: "INSERT INTO channels (\(Self.columns)) VALUES ($1, $2, $3, $4, $5)", binds: insert))
                commitSent.withLockedValue { $0 = true }
                try await session.query("COMMIT")
            } catch {
                // A session closed after a timeout has no transaction left to roll back.
                if !commitSent.withLockedValue({ $0 }), !session.isAbandoned { _ = try? await session.query("ROLLBACK") }
                throw error
            }
        }
    }

    @discardableResult
    public func delete(appID: String, channelID: String) async throws -> Bool {
        try await withSession { session, commitSent in
            var key = PostgresBindings(capacity: 2)
            key.append(appID)
            key.append(channelID)
            // Autocommit: the statement is its own COMMIT, so a lost answer leaves the outcome unknown.
            commitSent.withLockedValue { $0 = true }
            let rows = try await session.query(
                PostgresQuery(unsafeSQL: "DELETE FROM channels WHERE app_id = $1 AND id = $2 RETURNING 1", binds: key))
            return !rows.isEmpty
        }
    }

    public func channel(appID: String, channelID: String) async throws -> ChannelRecord? {
        try await withSession { session, _ in
            var key = PostgresBindings(capacity: 2)
            key.append(appID)
            key.append(channelID)
            let rows = try await session.query(
                PostgresQuery(unsafeSQL: "SELECT \(Self.columns) FROM channels WHERE app_id = $1 AND id = $2", binds: key))
            return try rows.first.map(Self.channel)
        }
    }

    public func list(appID: String, environment: APNsEnvironment?, after: String?, limit: Int) async throws -> [ChannelRecord] {
        try await withSession { session, _ in
            var binds = PostgresBindings(capacity: 4)
            binds.append(appID)
            binds.append(environment.map { Int16(ChannelColumns.environment($0)) })
            binds.append(after)
            binds.append(Int64(max(0, limit)))
            let sql = """
                SELECT \(Self.columns) FROM channels
                WHERE app_id = $1 AND ($2::int2 IS NULL OR environment = $2) AND ($3::text IS NULL OR id > $3)
                ORDER BY id LIMIT $4
                """
            return try await session.query(PostgresQuery(unsafeSQL: sql, binds: binds)).map(Self.channel)
        }
    }

    public func count(appID: String, environment: APNsEnvironment?) async throws -> Int {
        try await withSession { session, _ in
            var binds = PostgresBindings(capacity: 2)
            binds.append(appID)
            binds.append(environment.map { Int16(ChannelColumns.environment($0)) })
            let rows = try await session.query(
                PostgresQuery(
                    unsafeSQL: "SELECT count(*) FROM channels WHERE app_id = $1 AND ($2::int2 IS NULL OR environment = $2)", binds: binds))
            return Int(try rows.first?.decode(Int64.self) ?? 0)
        }
    }

    /// Closes the pool; idempotent.
    public func close() async throws {
        closed.withLockedValue { $0 = true }
        runTask.cancel()
        await runTask.value
    }

    deinit {
        runTask.cancel()
    }

    // MARK: Sessions and retries

    /// Runs `body` on a pooled connection with statement deadlines, again on a
    /// new connection when it lost its own (or deadlocked) before COMMIT was
    /// sent, which `body` says through its second argument
    /// (``PostgresRetry/withSession(client:timeout:logger:subject:checkOpen:_:giveUp:)``);
    /// maps the failures a caller must tell apart to ``ChannelStoreError``.
    private func withSession<T: Sendable>(
        _ body: @escaping @Sendable (PostgresSession, NIOLockedValueBox<Bool>) async throws -> T
    ) async throws -> T {
        try await PostgresRetry.withSession(
            client: client, timeout: configuration.statementTimeout, logger: logger, subject: "channel",
            checkOpen: { [closed] in
                guard !closed.withLockedValue({ $0 }) else { throw ChannelStoreError.unavailable("the channel store is closed") }
            },
            body,
            giveUp: { error, failure in
                // The store's own refusals (a full app, an unknown channel) reach the caller as they are.
                if error is ChannelStoreError { return error }
                switch failure {
                case .uniqueViolation: return ChannelStoreError.alreadyExists
                case .conflict, .connectionLost: return ChannelStoreError.unavailable(String(describing: error))
                case .outcomeUnknown: return ChannelStoreError.outcomeUnknown(String(describing: error))
                case .server, .other: return error
                }
            })
    }
}
