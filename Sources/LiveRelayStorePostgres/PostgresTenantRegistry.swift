import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// The registry shared by several nodes: tables in the store's PostgreSQL
/// schema, a small pool of its own, and `LISTEN`/`NOTIFY` so that a change
/// made on one node reaches the others in about a round trip.
///
/// ## One change at a time, on every node
/// An apply is one READ COMMITTED transaction that first locks the single
/// `registry_version` row (`SELECT ... FOR UPDATE`): two nodes applying at
/// once queue on that lock, and the second reads the registry only after the
/// first committed (each statement of READ COMMITTED sees what committed
/// before it), so its rule decides on the winner's data: no change is lost,
/// no version is given twice, and no serialization failure needs a retry.
/// Then the rule (``RegistryRules``), the writes, the audit row, the new
/// version and `pg_notify('liverelay_registry', '<schema>:<version>')`, and
/// `COMMIT`: PostgreSQL delivers the notification at commit, and only if it
/// commits. The payload names the schema because deployments (and tests)
/// may share a database and so a channel; listeners ignore other schemas.
///
/// ## Deadlines and failures
/// Every statement runs through a ``PostgresSession``, with
/// ``PostgresStoreConfiguration/statementTimeout``: one that does not
/// answer has its connection closed. An apply that loses its connection (or
/// times out) before COMMIT, or that deadlocks with a concurrent `touch`, is
/// retried from the start on a new connection (nothing of it committed);
/// one that loses it during COMMIT throws ``ActivityStoreError/outcomeUnknown(_:)``.
///
/// ## Webhook progress
/// ``WebhookProgressStore`` rows live in `webhook_progress`, one per app,
/// each claim, save, reset and release one statement. Leases are written and
/// compared in the database's time, as the intents' are (``PostgresClock``,
/// measured on the first lease statement and again every
/// ``PostgresClock/refreshInterval`` before one): nodes whose clocks differ
/// still agree on when a lease runs out.
///
/// ## Connections
/// At most three: one held by the listener (``PostgresListener``),
/// the others for applies and reads, which are rare. Its connections'
/// `application_name` is the configuration's with `-registry` appended, so an
/// operator tells them apart in `pg_stat_activity`.
public final class PostgresTenantRegistry: TenantRegistry, @unchecked Sendable {
    /// The notification channel every registry of every schema shares.
    public static let channel = "liverelay_registry"
    /// The registry schema version this build writes.
    public static var schemaVersion: Int { PostgresRegistrySchema.migrations.count }
    static let maxConnections = 3

    public let configuration: PostgresStoreConfiguration
    /// The registry schema version the database had when this opened it (0 for a new one).
    public let openedSchemaVersion: Int

    private let client: PostgresClient
    private let logger: Logger
    private let runTask: Task<Void, Never>
    private let feed = RegistryVersionFeed()
    private let state = NIOLockedValueBox(State())
    /// The database's clock against the callers' `now` (``PostgresClock``): webhook leases are kept in the database's.
    let databaseClock: PostgresClock

    private struct State {
        var closed = false
        var listener: Task<Void, Never>?
        /// When (this node's clock, ms) ``databaseClock`` was last measured; nil: not yet.
        var clockMeasuredAt: Int64?
    }

    /// Connects with a pool of its own, and migrates the registry's tables.
    ///
    /// Throws if the server cannot be reached within `startupTimeout`, refuses
    /// the credentials, or holds a newer registry schema. `clock` is the one
    /// the webhook callers' `now` comes from.
    public init(
        configuration: PostgresStoreConfiguration, logger: Logger = Logger(label: "liverelay.registry"),
        startupTimeout: Duration = .seconds(30), clock: any WallClock = SystemClock()
    ) async throws {
        self.configuration = configuration
        self.logger = logger
        databaseClock = PostgresClock(clock: clock)
        let pool = try await PostgresSidePool(
            configuration: configuration, name: "registry", maxConnections: Self.maxConnections,
            versionTable: PostgresRegistrySchema.versionTable, migrations: PostgresRegistrySchema.migrations, logger: logger,
            startupTimeout: startupTimeout)
        client = pool.client
        runTask = pool.runTask
        openedSchemaVersion = pool.schemaVersion
    }

    /// The payload of a notification: the schema, so that registries sharing a database tell theirs apart.
    static func payload(schema: String, version: Int64) -> String { "\(schema):\(version)" }

    /// The version a notification reports for `schema`; nil for another schema's (or a malformed one).
    static func version(fromPayload payload: String, schema: String) -> Int64? {
        guard let colon = payload.lastIndex(of: ":"), payload[..<colon] == schema else { return nil }
        return Int64(payload[payload.index(after: colon)...])
    }

    // MARK: TenantRegistry

    public func snapshot() async throws -> RegistrySnapshot {
        try await withSession { session, _ in
            // One snapshot for the version and every row.
            try await session.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            do {
                let version = try await PostgresRegistryTables.version(on: session)
                let snapshot = try await PostgresRegistryTables.snapshot(version: version, on: session)
                try await session.query("COMMIT")
                return snapshot
            } catch {
                if !session.isAbandoned { _ = try? await session.query("ROLLBACK") }
                throw error
            }
        }
    }

    public func version() async throws -> Int64 {
        try await withSession { session, _ in try await PostgresRegistryTables.version(on: session) }
    }

    @discardableResult
    public func apply(_ change: RegistryChange, actor: String, now: UnixTime) async throws -> RegistryApplied {
        let schema = configuration.schema
        let applied = try await withSession { session, commitSent in
            try await session.query("BEGIN")
            do {
                let version = try await PostgresRegistryTables.version(on: session, lock: true)
                let snapshot = try await PostgresRegistryTables.snapshot(version: version, on: session)
                guard let plan = try RegistryRules.plan(change, on: snapshot, now: now) else {
                    try await session.query("ROLLBACK")
                    return RegistryApplied(version: version, entry: nil)
                }
                let entry = plan.entry(version: version + 1, actor: actor, at: now)
                try await PostgresRegistryTables.write(plan, entry: entry, channel: Self.channel, schema: schema, on: session)
                commitSent.withLockedValue { $0 = true }
                try await session.query("COMMIT")
                return RegistryApplied(version: entry.sequence, entry: entry)
            } catch {
                // A session closed after a timeout has no transaction left to roll back.
                if !commitSent.withLockedValue({ $0 }), !session.isAbandoned { _ = try? await session.query("ROLLBACK") }
                throw error
            }
        }
        if applied.entry != nil { feed.publish(applied.version) }
        return applied
    }

    public func touch(_ lastUsed: [String: UnixTime]) async throws {
        guard !lastUsed.isEmpty else { return }
        try await withSession { session, _ in try await PostgresRegistryTables.touch(lastUsed, on: session) }
    }

    public func audit(after sequence: Int64, limit: Int) async throws -> [AuditEntry] {
        try await withSession { session, _ in try await PostgresRegistryTables.audit(after: sequence, limit: limit, on: session) }
    }

    // MARK: WebhookProgressStore

    public func claimWebhook(appID: String, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> WebhookProgress? {
        try await withSession { [self] session, _ in
            let offset = try await databaseOffset(on: session)
            return try await PostgresRegistryTables.claimWebhook(
                appID: appID, node: node, now: now, lease: lease, offset: offset, on: session)
        }
    }

    public func saveWebhook(_ progress: WebhookProgress, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> Bool {
        try await withSession { [self] session, _ in
            let offset = try await databaseOffset(on: session)
            return try await PostgresRegistryTables.saveWebhook(progress, node: node, now: now, lease: lease, offset: offset, on: session)
        }
    }

    @discardableResult
    public func resetWebhook(appID: String) async throws -> WebhookProgress? {
        try await withSession { session, _ in try await PostgresRegistryTables.resetWebhook(appID: appID, on: session) }
    }

    public func webhookProgress(appID: String) async throws -> WebhookProgress? {
        try await withSession { session, _ in try await PostgresRegistryTables.webhookProgress(appID: appID, on: session) }
    }

    public func releaseWebhook(appID: String, node: String) async throws {
        try await withSession { session, _ in try await PostgresRegistryTables.releaseWebhook(appID: appID, node: node, on: session) }
    }

    /// The database's clock offset for a lease statement, measured first on
    /// `session` when it never was or is ``PostgresClock/refreshInterval`` old:
    /// a registry without webhooks never spends the round trip.
    private func databaseOffset(on session: PostgresSession) async throws -> Int64 {
        let now = databaseClock.clock.now().milliseconds
        let refresh = PostgresClock.refreshInterval.components.seconds * 1000
        let last = state.withLockedValue(\.clockMeasuredAt)
        if last.map({ now - $0 >= refresh }) ?? true {
            let offset = try await databaseClock.measure(on: session)
            state.withLockedValue { $0.clockMeasuredAt = now }
            // Once, not at every refresh.
            if last == nil, abs(offset) > 1_000 {
                logger.warning(
                    "this node's clock and the PostgreSQL server's differ: webhook leases use the server's",
                    metadata: ["database_ahead_ms": "\(offset)"])
            }
        }
        return databaseClock.offsetMilliseconds
    }

    /// Starts the listener with the first subscription (checking its
    /// connection every `pollEvery`); each stream also polls ``version()``.
    public func changes(pollEvery: Duration) -> AsyncStream<Int64> {
        state.withLockedValue { state in
            guard !state.closed, state.listener == nil else { return }
            // After each LISTEN and every `pollEvery`, the version is read again: what a lost notification missed.
            let listener = PostgresListener(
                client: client, channel: Self.channel, owner: "the registry's", timeout: configuration.statementTimeout,
                checkEvery: pollEvery, logger: logger,
                check: { [feed] session, _ in feed.publish(try await PostgresRegistryTables.version(on: session)) },
                received: { [feed, schema = configuration.schema] payload in
                    if let version = Self.version(fromPayload: payload, schema: schema) { feed.publish(version) }
                })
            state.listener = Task { await listener.run() }
        }
        return feed.subscribe(pollEvery: pollEvery) { [weak self] in
            guard let self else { throw ActivityStoreError.closed }
            return try await self.version()
        }
    }

    /// Ends the change streams, stops the listener and closes the pool; idempotent.
    public func close() async throws {
        let listener = state.withLockedValue { state in
            state.closed = true
            defer { state.listener = nil }
            return state.listener
        }
        feed.finish()
        if let listener {
            listener.cancel()
            // Bounded: a listener stuck on a dead connection must not hold the shutdown.
            _ = try? await withDeadline(configuration.statementTimeout, "stopping the registry listener") { await listener.value }
        }
        runTask.cancel()
        await runTask.value
    }

    deinit {
        state.withLockedValue { $0.listener?.cancel() }
        runTask.cancel()
    }

    // MARK: Sessions and retries

    /// Runs `body` on a pooled connection with statement deadlines, again on a
    /// new connection when it lost its own (or deadlocked) before COMMIT was
    /// sent, which `body` says through its second argument
    /// (``PostgresRetry/withSession(client:timeout:logger:subject:checkOpen:_:giveUp:)``).
    private func withSession<T: Sendable>(
        _ body: @escaping @Sendable (PostgresSession, NIOLockedValueBox<Bool>) async throws -> T
    ) async throws -> T {
        try await PostgresRetry.withSession(
            client: client, timeout: configuration.statementTimeout, logger: logger, subject: "registry",
            checkOpen: { [state] in
                guard !state.withLockedValue({ $0.closed }) else { throw ActivityStoreError.closed }
            },
            body, giveUp: PostgresBatchRunner.callerError)
    }
}
