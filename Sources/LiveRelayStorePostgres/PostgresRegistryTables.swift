import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import PostgresNIO

/// The registry's tables in the store's schema, versioned in their own
/// `registry_schema_version` table (the activity schema's migrations are
/// untouched) and migrated under the schema's advisory lock
/// (``PostgresSchema/migrate(_:schema:versionTable:migrations:now:logger:)``).
/// Never edit a migration that has shipped: append one.
enum PostgresRegistrySchema {
    static let versionTable = "registry_schema_version"

    static let migrations: [[String]] = [
        // 1: apps (with their credentials and quotas), API keys, the audit log and the version.
        [
            """
            CREATE TABLE apps (
                id                        text COLLATE "C" PRIMARY KEY,
                bundle_id                 text NOT NULL,
                enabled                   boolean NOT NULL,
                queue_capacity            bigint,                                 -- NULL: the server's default
                weight                    bigint,
                max_push_lifetime_s       bigint,
                quota_calls_per_second    double precision,                       -- NULL: the default, 0: no limit
                quota_burst               bigint,
                quota_pushes_per_hour     bigint,
                quota_max_tokens          bigint,
                quota_max_live_activities bigint,
                apns_team_id              text,                                   -- NULL: no credentials yet
                apns_key_id               text,
                apns_endpoint             text,
                apns_key_source           text CHECK (apns_key_source IN ('registry', 'file', 'env')),
                apns_key_value            text,                                   -- the PEM (a secret), the path or the variable's name
                apns_trust_pem            text,
                apns_updated_at           bigint,
                created_at                bigint NOT NULL,                        -- UNIX milliseconds
                updated_at                bigint NOT NULL,
                source                    text NOT NULL CHECK (source IN ('admin', 'seed'))
            )
            """,
            """
            CREATE TABLE api_keys (
                key_id          text COLLATE "C" PRIMARY KEY,
                secret_sha256   text NOT NULL,
                role            text NOT NULL CHECK (role IN ('admin', 'tenant')),
                all_apps        boolean NOT NULL,
                app_ids         text[] NOT NULL,
                allowed_methods text[] NOT NULL,
                label           text,
                created_at      bigint NOT NULL,
                last_used_at    bigint,
                revoked_at      bigint,
                source          text NOT NULL CHECK (source IN ('admin', 'seed'))
            )
            """,
            """
            CREATE TABLE registry_audit (
                sequence bigint PRIMARY KEY,                                      -- the version the change produced
                at       bigint NOT NULL,
                actor    text NOT NULL,
                action   text NOT NULL,
                target   text NOT NULL,
                details  text NOT NULL
            )
            """,
            // One row: every apply locks it (FOR UPDATE) first, which is what serializes nodes' changes.
            "CREATE TABLE registry_version (id smallint PRIMARY KEY CHECK (id = 1), version bigint NOT NULL)",
            "INSERT INTO registry_version (id, version) VALUES (1, 0)",
        ],
        // 2: an app's priority-10 budget, a quota like the others (NULL: the default, 0: none).
        ["ALTER TABLE apps ADD COLUMN quota_priority_budget_per_hour bigint"],
        // 3: an app's webhook (all NULL: none) and each app's delivery progress, leased to one node at a time.
        [
            """
            ALTER TABLE apps
                ADD COLUMN webhook_url text,
                ADD COLUMN webhook_kinds text,                                    -- JSON array of kinds' raw values as strings
                ADD COLUMN webhook_secret text,                                   -- the signing key (a secret)
                ADD COLUMN webhook_created_at bigint,
                ADD COLUMN webhook_updated_at bigint,
                ADD COLUMN webhook_start_cursor bigint                            -- deliveries are the events after it
            """,
            """
            CREATE TABLE webhook_progress (
                app_id             text COLLATE "C" PRIMARY KEY,
                webhook_created_at bigint NOT NULL,                               -- the webhook the progress belongs to
                delivered_cursor   bigint NOT NULL,
                last_success_at    bigint,
                last_error         text,
                failing_since      bigint,
                attempts           bigint NOT NULL,
                failing            boolean NOT NULL,
                resets             bigint NOT NULL,
                lease_owner        text,                                          -- NULL: free
                lease_until        bigint                                         -- the database's clock (PostgresClock)
            )
            """,
        ],
    ]
}

/// The registry's statements, each through a ``PostgresSession`` (so each has its deadline).
enum PostgresRegistryTables {
    static let appColumns = """
        id, bundle_id, enabled, queue_capacity, weight, max_push_lifetime_s, quota_calls_per_second, quota_burst,
        quota_pushes_per_hour, quota_max_tokens, quota_max_live_activities, apns_team_id, apns_key_id, apns_endpoint,
        apns_key_source, apns_key_value, apns_trust_pem, apns_updated_at, created_at, updated_at, source,
        quota_priority_budget_per_hour, webhook_url, webhook_kinds, webhook_secret, webhook_created_at, webhook_updated_at,
        webhook_start_cursor
        """
    static let keyColumns = """
        key_id, secret_sha256, role, all_apps, app_ids, allowed_methods, label, created_at, last_used_at, revoked_at, source
        """

    /// The version; with `lock`, `FOR UPDATE`: a concurrent apply on another node waits for this transaction.
    static func version(on session: PostgresSession, lock: Bool = false) async throws -> Int64 {
        let rows = try await session.query(
            PostgresQuery(unsafeSQL: "SELECT version FROM registry_version WHERE id = 1" + (lock ? " FOR UPDATE" : "")))
        guard let row = rows.first else { throw PostgresStoreError.corruptRow("registry_version has no row") }
        return try row.decode(Int64.self)
    }

    /// Apps and keys as of the caller's transaction, with `version`.
    static func snapshot(version: Int64, on session: PostgresSession) async throws -> RegistrySnapshot {
        var snapshot = RegistrySnapshot(version: version)
        for row in try await session.query(PostgresQuery(unsafeSQL: "SELECT \(appColumns) FROM apps")) {
            let app = try app(row.makeRandomAccess())
            snapshot.apps[app.id] = app
        }
        for row in try await session.query(PostgresQuery(unsafeSQL: "SELECT \(keyColumns) FROM api_keys")) {
            let key = try key(row.makeRandomAccess())
            snapshot.keys[key.keyID] = key
        }
        return snapshot
    }

    private static func app(_ r: PostgresRandomAccessRow) throws -> RegisteredApp {
        let id = try r[0].decode(String.self)
        guard let source = RegistrySource(rawValue: try r[20].decode(String.self)) else {
            throw PostgresStoreError.corruptRow("app \(id): source")
        }
        var credentials: RegisteredCredentials?
        if let teamID = try r[11].decode(String?.self) {
            guard let keySource = RegistryColumns.keySource(kind: try r[14].decode(String.self), value: try r[15].decode(String.self))
            else {
                throw PostgresStoreError.corruptRow("app \(id): apns_key_source")
            }
            credentials = RegisteredCredentials(
                teamID: teamID, keyID: try r[12].decode(String.self), endpoint: try r[13].decode(String.self), keySource: keySource,
                trustPEM: try r[16].decode(String?.self), updatedAt: UnixTime(milliseconds: try r[17].decode(Int64.self)))
        }
        func int(_ i: Int) throws -> Int? { try r[i].decode(Int64?.self).map(Int.init) }
        let quotas = RegisteredQuotas(
            callsPerSecond: try r[6].decode(Double?.self), burst: try int(7), pushesPerHour: try int(8), maxTokens: try int(9),
            maxLiveActivities: try int(10), priorityBudgetPerHour: try int(21))
        let webhook: RegisteredWebhook?
        do {
            webhook = try RegistryColumns.Webhook(
                url: try r[22].decode(String?.self), kinds: try r[23].decode(String?.self), secret: try r[24].decode(String?.self),
                createdAt: try r[25].decode(Int64?.self), updatedAt: try r[26].decode(Int64?.self),
                startCursor: try r[27].decode(Int64?.self)
            ).webhook()
        } catch {
            throw PostgresStoreError.corruptRow("app \(id): webhook")
        }
        return RegisteredApp(
            id: id, bundleID: try r[1].decode(String.self), enabled: try r[2].decode(Bool.self), queueCapacity: try int(3),
            weight: try int(4), maxPushLifetimeSeconds: try int(5), quotas: quotas, credentials: credentials, webhook: webhook,
            createdAt: UnixTime(milliseconds: try r[18].decode(Int64.self)),
            updatedAt: UnixTime(milliseconds: try r[19].decode(Int64.self)),
            source: source)
    }

    private static func key(_ r: PostgresRandomAccessRow) throws -> RegisteredAPIKey {
        let id = try r[0].decode(String.self)
        let columns = RegistryColumns.Role(
            name: try r[2].decode(String.self), allApps: try r[3].decode(Bool.self), appIDs: try r[4].decode([String].self),
            methods: try r[5].decode([String].self))
        guard let role = columns.role, let source = RegistrySource(rawValue: try r[10].decode(String.self)) else {
            throw PostgresStoreError.corruptRow("API key \(id): role or source")
        }
        return RegisteredAPIKey(
            keyID: id, secretSHA256: try r[1].decode(String.self), role: role, label: try r[6].decode(String?.self),
            createdAt: UnixTime(milliseconds: try r[7].decode(Int64.self)),
            lastUsedAt: try r[8].decode(Int64?.self).map(UnixTime.init(milliseconds:)),
            revokedAt: try r[9].decode(Int64?.self).map(UnixTime.init(milliseconds:)), source: source)
    }

    /// The plan's rows, its audit row, the new version and the notification,
    /// all inside the caller's transaction: the NOTIFY is delivered at COMMIT,
    /// and only if it commits.
    static func write(_ plan: RegistryPlan, entry: AuditEntry, channel: String, schema: String, on session: PostgresSession) async throws {
        for write in plan.writes {
            switch write {
            case let .putApp(app): try await session.query(put(app))
            case let .putKey(key): try await session.query(put(key))
            }
        }
        var audit = PostgresBindings(capacity: 6)
        audit.append(entry.sequence)
        audit.append(entry.at.milliseconds)
        audit.append(entry.actor)
        audit.append(entry.action.rawValue)
        audit.append(entry.target)
        audit.append(entry.details)
        try await session.query(
            PostgresQuery(
                unsafeSQL: "INSERT INTO registry_audit (sequence, at, actor, action, target, details) VALUES ($1, $2, $3, $4, $5, $6)",
                binds: audit))
        var version = PostgresBindings(capacity: 1)
        version.append(entry.sequence)
        try await session.query(PostgresQuery(unsafeSQL: "UPDATE registry_version SET version = $1 WHERE id = 1", binds: version))
        var notify = PostgresBindings(capacity: 2)
        notify.append(channel)
        notify.append(PostgresTenantRegistry.payload(schema: schema, version: entry.sequence))
        try await session.query(PostgresQuery(unsafeSQL: "SELECT pg_notify($1, $2)", binds: notify))
    }

    private static func put(_ app: RegisteredApp) -> PostgresQuery {
        var b = PostgresBindings(capacity: 28)
        b.append(app.id)
        b.append(app.bundleID)
        b.append(app.enabled)
        for value in [app.queueCapacity, app.weight, app.maxPushLifetimeSeconds] { b.append(value.map(Int64.init)) }
        b.append(app.quotas.callsPerSecond)
        for value in [app.quotas.burst, app.quotas.pushesPerHour, app.quotas.maxTokens, app.quotas.maxLiveActivities] {
            b.append(value.map(Int64.init))
        }
        let source = app.credentials.map { RegistryColumns.keySource($0.keySource) }
        b.append(app.credentials?.teamID)
        b.append(app.credentials?.keyID)
        b.append(app.credentials?.endpoint)
        b.append(source?.kind)
        b.append(source?.value)
        b.append(app.credentials?.trustPEM)
        b.append(app.credentials?.updatedAt.milliseconds)
        b.append(app.createdAt.milliseconds)
        b.append(app.updatedAt.milliseconds)
        b.append(app.source.rawValue)
        b.append(app.quotas.priorityBudgetPerHour.map(Int64.init))
        let webhook = RegistryColumns.Webhook(app.webhook)
        b.append(webhook.url)
        b.append(webhook.kinds)
        b.append(webhook.secret)
        b.append(webhook.createdAt)
        b.append(webhook.updatedAt)
        b.append(webhook.startCursor)
        let columns = appColumns.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }
        let placeholders = (1...columns.count).map { "$\($0)" }.joined(separator: ", ")
        let updates = columns.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        return PostgresQuery(
            unsafeSQL: "INSERT INTO apps (\(appColumns)) VALUES (\(placeholders)) ON CONFLICT (id) DO UPDATE SET \(updates)", binds: b)
    }

    /// An upsert that leaves an existing row's `last_used_at` alone: `touch`
    /// writes it without the version lock, and a change planned on an older
    /// read must not move it back (``RegistryWrite/putKey(_:)``).
    private static func put(_ key: RegisteredAPIKey) -> PostgresQuery {
        let role = RegistryColumns.Role(key.role)
        var b = PostgresBindings(capacity: 11)
        b.append(key.keyID)
        b.append(key.secretSHA256)
        b.append(role.name)
        b.append(role.allApps)
        b.append(role.appIDs)
        b.append(role.methods)
        b.append(key.label)
        b.append(key.createdAt.milliseconds)
        b.append(key.lastUsedAt?.milliseconds)
        b.append(key.revokedAt?.milliseconds)
        b.append(key.source.rawValue)
        let sql = """
            INSERT INTO api_keys (\(keyColumns)) VALUES ($1, $2, $3, $4, $5::text[], $6::text[], $7, $8, $9, $10, $11)
            ON CONFLICT (key_id) DO UPDATE SET
                secret_sha256 = excluded.secret_sha256, role = excluded.role, all_apps = excluded.all_apps,
                app_ids = excluded.app_ids, allowed_methods = excluded.allowed_methods, label = excluded.label,
                created_at = excluded.created_at, revoked_at = excluded.revoked_at, source = excluded.source
            """
        return PostgresQuery(unsafeSQL: sql, binds: b)
    }

    /// One statement for every key: `last_used_at` moves forward, never back.
    static func touch(_ lastUsed: [String: UnixTime], on session: PostgresSession) async throws {
        let sorted = lastUsed.sorted { $0.key < $1.key }
        var b = PostgresBindings(capacity: 2)
        b.append(sorted.map(\.key))
        b.append(sorted.map(\.value.milliseconds))
        let sql = """
            UPDATE api_keys k SET last_used_at = u.at
            FROM unnest($1::text[], $2::int8[]) AS u(key_id, at)
            WHERE k.key_id = u.key_id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)
            """
        try await session.query(PostgresQuery(unsafeSQL: sql, binds: b))
    }

    static func audit(after sequence: Int64, limit: Int, on session: PostgresSession) async throws -> [AuditEntry] {
        var b = PostgresBindings(capacity: 2)
        b.append(sequence)
        b.append(Int64(max(0, limit)))
        let sql = "SELECT sequence, at, actor, action, target, details FROM registry_audit WHERE sequence > $1 ORDER BY sequence LIMIT $2"
        return try await session.query(PostgresQuery(unsafeSQL: sql, binds: b)).map { row in
            let (sequence, at, actor, action, target, details) = try row.decode((Int64, Int64, String, String, String, String).self)
            guard let action = AuditAction(rawValue: action) else { throw PostgresStoreError.corruptRow("audit row \(sequence): action") }
            return AuditEntry(
                sequence: sequence, at: UnixTime(milliseconds: at), actor: actor, action: action, target: target, details: details)
        }
    }
}

/// Webhook progress rows (``WebhookProgressStore``). `lease_until` is kept in
/// the database's time, like the intents' leases: `offset` is the
/// ``PostgresClock``'s (database minus node), added to the node's `now`.
extension PostgresRegistryTables {
    static let progressColumns = """
        app_id, webhook_created_at, delivered_cursor, last_success_at, last_error, failing_since, attempts, failing, resets
        """

    /// One statement, so race-free between nodes: the insert of a first claim,
    /// or the update of a row that is free, expired or already `$2`'s. ON
    /// CONFLICT locks the row and checks the WHERE on its newest version, so
    /// of two nodes claiming at once the second sees the first's lease (a
    /// conflicting insert waits for the other's commit) and gets no row. A
    /// first claim starts at the app's webhook's start cursor.
    static let claimSQL = """
        INSERT INTO webhook_progress AS p (\(progressColumns), lease_owner, lease_until)
        VALUES (
            $1, coalesce((SELECT webhook_created_at FROM apps WHERE id = $1), 0),
            coalesce((SELECT webhook_start_cursor FROM apps WHERE id = $1), 0), NULL, NULL, NULL, 0, false, 0, $2, $4)
        ON CONFLICT (app_id) DO UPDATE SET lease_owner = excluded.lease_owner, lease_until = excluded.lease_until
        WHERE p.lease_owner IS NULL OR p.lease_owner = excluded.lease_owner OR p.lease_until IS NULL OR p.lease_until <= $3
        RETURNING \(progressColumns)
        """

    /// The row's `resets` stays: a reset since `$3` was read leaves nothing to update.
    static let saveSQL = """
        UPDATE webhook_progress SET
            webhook_created_at = $4, delivered_cursor = $5, last_success_at = $6, last_error = $7, failing_since = $8,
            attempts = $9, failing = $10, lease_until = $11
        WHERE app_id = $1 AND lease_owner = $2 AND resets = $3
        RETURNING app_id
        """

    static let resetSQL = """
        UPDATE webhook_progress SET attempts = 0, failing = false, failing_since = NULL, resets = resets + 1 WHERE app_id = $1
        RETURNING \(progressColumns)
        """

    static let releaseSQL = "UPDATE webhook_progress SET lease_owner = NULL, lease_until = NULL WHERE app_id = $1 AND lease_owner = $2"

    static func claimWebhook(
        appID: String, node: String, now: UnixTime, lease: UnixTime.Duration, offset: Int64, on session: PostgresSession
    ) async throws -> WebhookProgress? {
        var b = PostgresBindings(capacity: 4)
        b.append(appID)
        b.append(node)
        b.append(now.milliseconds &+ offset)
        b.append((now + lease).milliseconds &+ offset)
        return try await session.query(PostgresQuery(unsafeSQL: claimSQL, binds: b)).first.map(progress)
    }

    static func saveWebhook(
        _ progress: WebhookProgress, node: String, now: UnixTime, lease: UnixTime.Duration, offset: Int64, on session: PostgresSession
    ) async throws -> Bool {
        var b = PostgresBindings(capacity: 11)
        b.append(progress.appID)
        b.append(node)
        b.append(progress.resets)
        b.append(progress.webhookCreatedAt.milliseconds)
        b.append(Int64(clamping: progress.deliveredCursor))
        b.append(progress.lastSuccessAt?.milliseconds)
        b.append(progress.lastError)
        b.append(progress.failingSince?.milliseconds)
        b.append(Int64(progress.attempts))
        b.append(progress.failing)
        b.append((now + lease).milliseconds &+ offset)
        return !(try await session.query(PostgresQuery(unsafeSQL: saveSQL, binds: b))).isEmpty
    }

    static func resetWebhook(appID: String, on session: PostgresSession) async throws -> WebhookProgress? {
        var b = PostgresBindings(capacity: 1)
        b.append(appID)
        return try await session.query(PostgresQuery(unsafeSQL: resetSQL, binds: b)).first.map(progress)
    }

    static func webhookProgress(appID: String, on session: PostgresSession) async throws -> WebhookProgress? {
        var b = PostgresBindings(capacity: 1)
        b.append(appID)
        let sql = "SELECT \(progressColumns) FROM webhook_progress WHERE app_id = $1"
        return try await session.query(PostgresQuery(unsafeSQL: sql, binds: b)).first.map(progress)
    }

    static func releaseWebhook(appID: String, node: String, on session: PostgresSession) async throws {
        var b = PostgresBindings(capacity: 2)
        b.append(appID)
        b.append(node)
        try await session.query(PostgresQuery(unsafeSQL: releaseSQL, binds: b))
    }

    private static func progress(_ row: PostgresRow) throws -> WebhookProgress {
        let (appID, createdAt, cursor, lastSuccess, lastError, failingSince, attempts, failing, resets) = try row.decode(
            (String, Int64, Int64, Int64?, String?, Int64?, Int64, Bool, Int64).self)
        return WebhookProgress(
            appID: appID, webhookCreatedAt: UnixTime(milliseconds: createdAt), deliveredCursor: UInt64(clamping: cursor),
            lastSuccessAt: lastSuccess.map(UnixTime.init(milliseconds:)), lastError: lastError,
            failingSince: failingSince.map(UnixTime.init(milliseconds:)), attempts: Int(clamping: attempts), failing: failing,
            resets: resets)
    }
}
