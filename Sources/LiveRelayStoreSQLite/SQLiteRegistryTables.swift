import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore

/// The registry's schema in `registry.sqlite3`, versioned in its own
/// `registry_schema_version` table the way ``SQLiteSchema`` versions the
/// activity store's file. Never edit a migration that has shipped: append one.
enum SQLiteRegistrySchema {
    static let versionTable = "registry_schema_version"

    static let migrations: [String] = [
        // 1: apps (with their credentials and quotas), API keys, the audit log and the version.
        """
        CREATE TABLE apps (
            id                        TEXT    NOT NULL PRIMARY KEY,
            bundle_id                 TEXT    NOT NULL,
            enabled                   INTEGER NOT NULL CHECK (enabled IN (0, 1)),
            queue_capacity            INTEGER,                                    -- NULL: the server's default
            weight                    INTEGER,
            max_push_lifetime_s       INTEGER,
            quota_calls_per_second    REAL,                                       -- NULL: the default, 0: no limit
            quota_burst               INTEGER,
            quota_pushes_per_hour     INTEGER,
            quota_max_tokens          INTEGER,
            quota_max_live_activities INTEGER,
            apns_team_id              TEXT,                                       -- NULL: no credentials yet
            apns_key_id               TEXT,
            apns_endpoint             TEXT,
            apns_key_source           TEXT CHECK (apns_key_source IN ('registry', 'file', 'env')),
            apns_key_value            TEXT,                                       -- the PEM (a secret), the path or the variable's name
            apns_trust_pem            TEXT,
            apns_updated_at           INTEGER,
            created_at                INTEGER NOT NULL,                           -- UNIX milliseconds
            updated_at                INTEGER NOT NULL,
            source                    TEXT    NOT NULL CHECK (source IN ('admin', 'seed'))
        ) WITHOUT ROWID;

        CREATE TABLE api_keys (
            key_id          TEXT    NOT NULL PRIMARY KEY,
            secret_sha256   TEXT    NOT NULL,
            role            TEXT    NOT NULL CHECK (role IN ('admin', 'tenant')),
            all_apps        INTEGER NOT NULL CHECK (all_apps IN (0, 1)),
            app_ids         TEXT    NOT NULL,                                     -- JSON array of strings
            allowed_methods TEXT    NOT NULL,                                     -- JSON array of strings
            label           TEXT,
            created_at      INTEGER NOT NULL,
            last_used_at    INTEGER,
            revoked_at      INTEGER,
            source          TEXT    NOT NULL CHECK (source IN ('admin', 'seed'))
        ) WITHOUT ROWID;

        CREATE TABLE registry_audit (
            sequence INTEGER PRIMARY KEY,                                         -- the version the change produced
            at       INTEGER NOT NULL,
            actor    TEXT    NOT NULL,
            action   TEXT    NOT NULL,
            target   TEXT    NOT NULL,
            details  TEXT    NOT NULL
        );

        CREATE TABLE registry_version (
            id      INTEGER PRIMARY KEY CHECK (id = 1),
            version INTEGER NOT NULL
        );
        INSERT INTO registry_version (id, version) VALUES (1, 0);
        """,
        // 2: an app's priority-10 budget, a quota like the others (NULL: the default, 0: none).
        "ALTER TABLE apps ADD COLUMN quota_priority_budget_per_hour INTEGER;",
        // 3: an app's webhook (all NULL: none) and each app's delivery progress, leased to one node at a time.
        """
        ALTER TABLE apps ADD COLUMN webhook_url TEXT;
        ALTER TABLE apps ADD COLUMN webhook_kinds TEXT;                               -- JSON array of kinds' raw values as strings
        ALTER TABLE apps ADD COLUMN webhook_secret TEXT;                              -- the signing key (a secret)
        ALTER TABLE apps ADD COLUMN webhook_created_at INTEGER;
        ALTER TABLE apps ADD COLUMN webhook_updated_at INTEGER;
        ALTER TABLE apps ADD COLUMN webhook_start_cursor INTEGER;                     -- deliveries are the events after it

        CREATE TABLE webhook_progress (
            app_id             TEXT    NOT NULL PRIMARY KEY,
            webhook_created_at INTEGER NOT NULL,                                     -- the webhook the progress belongs to
            delivered_cursor   INTEGER NOT NULL,
            last_success_at    INTEGER,
            last_error         TEXT,
            failing_since      INTEGER,
            attempts           INTEGER NOT NULL,
            failing            INTEGER NOT NULL CHECK (failing IN (0, 1)),
            resets             INTEGER NOT NULL,
            lease_owner        TEXT,                                                  -- NULL: free
            lease_until        INTEGER
        ) WITHOUT ROWID;
        """,
    ]
}

/// The registry's rows as values, on the registry's one connection.
struct SQLiteRegistryTables {
    let db: SQLiteConnection

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

    func version() throws(SQLiteError) -> Int64 {
        try db.queryFirst("SELECT version FROM registry_version WHERE id = 1") { $0.int64(0) } ?? 0
    }

    /// Everything, as of the caller's transaction.
    func snapshot() throws(SQLiteError) -> RegistrySnapshot {
        var snapshot = RegistrySnapshot(version: try version())
        for app in try db.query("SELECT \(Self.appColumns) FROM apps", row: Self.app) {
            snapshot.apps[app.id] = try Self.decoded(app, "app")
        }
        for key in try db.query("SELECT \(Self.keyColumns) FROM api_keys", row: Self.key) {
            snapshot.keys[key.id] = try Self.decoded(key, "API key")
        }
        return snapshot
    }

    private static func decoded<T>(_ row: (id: String, value: T?), _ what: String) throws(SQLiteError) -> T {
        guard let value = row.value else {
            throw SQLiteError(code: 1, message: "unreadable \(what) row \(row.id) in the registry", context: "registry snapshot")
        }
        return value
    }

    private static func app(_ s: SQLiteStatement) -> (id: String, value: RegisteredApp?) {
        let id = s.string(0)
        guard let source = RegistrySource(rawValue: s.string(20)) else { return (id, nil) }
        var credentials: RegisteredCredentials?
        if let teamID = s.optionalString(11) {
            guard let keySource = RegistryColumns.keySource(kind: s.string(14), value: s.string(15)) else { return (id, nil) }
            credentials = RegisteredCredentials(
                teamID: teamID, keyID: s.string(12), endpoint: s.string(13), keySource: keySource, trustPEM: s.optionalString(16),
                updatedAt: UnixTime(milliseconds: s.int64(17)))
        }
        let quotas = RegisteredQuotas(
            callsPerSecond: s.optionalDouble(6), burst: s.optionalInt64(7).map(Int.init), pushesPerHour: s.optionalInt64(8).map(Int.init),
            maxTokens: s.optionalInt64(9).map(Int.init), maxLiveActivities: s.optionalInt64(10).map(Int.init),
            priorityBudgetPerHour: s.optionalInt64(21).map(Int.init))
        let webhook: RegisteredWebhook?
        do {
            webhook = try RegistryColumns.Webhook(
                url: s.optionalString(22), kinds: s.optionalString(23), secret: s.optionalString(24), createdAt: s.optionalInt64(25),
                updatedAt: s.optionalInt64(26), startCursor: s.optionalInt64(27)
            ).webhook()
        } catch {
            return (id, nil)
        }
        let app = RegisteredApp(
            id: id, bundleID: s.string(1), enabled: s.int64(2) != 0, queueCapacity: s.optionalInt64(3).map(Int.init),
            weight: s.optionalInt64(4).map(Int.init), maxPushLifetimeSeconds: s.optionalInt64(5).map(Int.init), quotas: quotas,
            credentials: credentials, webhook: webhook, createdAt: UnixTime(milliseconds: s.int64(18)),
            updatedAt: UnixTime(milliseconds: s.int64(19)),
            source: source)
        return (id, app)
    }

    private static func key(_ s: SQLiteStatement) -> (id: String, value: RegisteredAPIKey?) {
        let id = s.string(0)
        guard let appIDs = RegistryColumns.strings(fromJSONArray: s.string(4)),
            let methods = RegistryColumns.strings(fromJSONArray: s.string(5)),
            let role = RegistryColumns.Role(name: s.string(2), allApps: s.int64(3) != 0, appIDs: appIDs, methods: methods).role,
            let source = RegistrySource(rawValue: s.string(10))
        else { return (id, nil) }
        let key = RegisteredAPIKey(
            keyID: id, secretSHA256: s.string(1), role: role, label: s.optionalString(6), createdAt: UnixTime(milliseconds: s.int64(7)),
            lastUsedAt: s.optionalInt64(8).map(UnixTime.init(milliseconds:)),
            revokedAt: s.optionalInt64(9).map(UnixTime.init(milliseconds:)),
            source: source)
        return (id, key)
    }

    /// The plan's rows, its audit row and the new version (inside the caller's transaction).
    func write(_ plan: RegistryPlan, entry: AuditEntry) throws(SQLiteError) {
        for write in plan.writes {
            switch write {
            case let .putApp(app): try put(app)
            case let .putKey(key): try put(key)
            }
        }
        try db.run("INSERT INTO registry_audit (sequence, at, actor, action, target, details) VALUES (?1, ?2, ?3, ?4, ?5, ?6)") {
            $0.bind(1, entry.sequence)
            $0.bind(2, entry.at.milliseconds)
            $0.bind(3, entry.actor)
            $0.bind(4, entry.action.rawValue)
            $0.bind(5, entry.target)
            $0.bind(6, entry.details)
        }
        try db.run("UPDATE registry_version SET version = ?1 WHERE id = 1") { $0.bind(1, entry.sequence) }
    }

    private func put(_ app: RegisteredApp) throws(SQLiteError) {
        let placeholders = (1...28).map { "?\($0)" }.joined(separator: ", ")
        try db.run("INSERT OR REPLACE INTO apps (\(Self.appColumns)) VALUES (\(placeholders))") { s in
            s.bind(1, app.id)
            s.bind(2, app.bundleID)
            s.bind(3, Int64(app.enabled ? 1 : 0))
            s.bind(4, app.queueCapacity.map(Int64.init))
            s.bind(5, app.weight.map(Int64.init))
            s.bind(6, app.maxPushLifetimeSeconds.map(Int64.init))
            s.bind(7, app.quotas.callsPerSecond)
            s.bind(8, app.quotas.burst.map(Int64.init))
            s.bind(9, app.quotas.pushesPerHour.map(Int64.init))
            s.bind(10, app.quotas.maxTokens.map(Int64.init))
            s.bind(11, app.quotas.maxLiveActivities.map(Int64.init))
            let source = app.credentials.map { RegistryColumns.keySource($0.keySource) }
            s.bind(12, app.credentials?.teamID)
            s.bind(13, app.credentials?.keyID)
            s.bind(14, app.credentials?.endpoint)
            s.bind(15, source?.kind)
            s.bind(16, source?.value)
            s.bind(17, app.credentials?.trustPEM)
            s.bind(18, app.credentials?.updatedAt.milliseconds)
            s.bind(19, app.createdAt.milliseconds)
            s.bind(20, app.updatedAt.milliseconds)
            s.bind(21, app.source.rawValue)
            s.bind(22, app.quotas.priorityBudgetPerHour.map(Int64.init))
            let webhook = RegistryColumns.Webhook(app.webhook)
            s.bind(23, webhook.url)
            s.bind(24, webhook.kinds)
            s.bind(25, webhook.secret)
            s.bind(26, webhook.createdAt)
            s.bind(27, webhook.updatedAt)
            s.bind(28, webhook.startCursor)
        }
    }

    /// An upsert that leaves an existing row's `last_used_at` alone (``RegistryWrite/putKey(_:)``).
    private func put(_ key: RegisteredAPIKey) throws(SQLiteError) {
        let role = RegistryColumns.Role(key.role)
        let sql = """
            INSERT INTO api_keys (\(Self.keyColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
            ON CONFLICT (key_id) DO UPDATE SET
                secret_sha256 = excluded.secret_sha256, role = excluded.role, all_apps = excluded.all_apps,
                app_ids = excluded.app_ids, allowed_methods = excluded.allowed_methods, label = excluded.label,
                created_at = excluded.created_at, revoked_at = excluded.revoked_at, source = excluded.source
            """
        try db.run(sql) { s in
            s.bind(1, key.keyID)
            s.bind(2, key.secretSHA256)
            s.bind(3, role.name)
            s.bind(4, Int64(role.allApps ? 1 : 0))
            s.bind(5, RegistryColumns.jsonArray(role.appIDs))
            s.bind(6, RegistryColumns.jsonArray(role.methods))
            s.bind(7, key.label)
            s.bind(8, key.createdAt.milliseconds)
            s.bind(9, key.lastUsedAt?.milliseconds)
            s.bind(10, key.revokedAt?.milliseconds)
            s.bind(11, key.source.rawValue)
        }
    }

    /// Moves each key's `last_used_at` forward to the given time, never back.
    func touch(_ lastUsed: [String: UnixTime]) throws(SQLiteError) {
        let sql = "UPDATE api_keys SET last_used_at = ?2 WHERE key_id = ?1 AND (last_used_at IS NULL OR last_used_at < ?2)"
        for (keyID, at) in lastUsed {
            try db.run(sql) {
                $0.bind(1, keyID)
                $0.bind(2, at.milliseconds)
            }
        }
    }

    func audit(after sequence: Int64, limit: Int) throws(SQLiteError) -> [AuditEntry] {
        let sql = "SELECT sequence, at, actor, action, target, details FROM registry_audit WHERE sequence > ?1 ORDER BY sequence LIMIT ?2"
        let rows = try db.query(
            sql,
            {
                $0.bind(1, sequence)
                $0.bind(2, Int64(max(0, limit)))
            }
        ) { s in
            (s.int64(0), s.int64(1), s.string(2), s.string(3), s.string(4), s.string(5))
        }
        var entries: [AuditEntry] = []
        for (sequence, at, actor, action, target, details) in rows {
            guard let action = AuditAction(rawValue: action) else {
                throw SQLiteError(code: 1, message: "unreadable audit row \(sequence): action \(action)", context: "registry audit")
            }
            entries.append(
                AuditEntry(
                    sequence: sequence, at: UnixTime(milliseconds: at), actor: actor, action: action, target: target, details: details))
        }
        return entries
    }
}

/// Webhook progress rows (``WebhookProgressStore``), each call inside the caller's transaction.
extension SQLiteRegistryTables {
    static let progressColumns = """
        app_id, webhook_created_at, delivered_cursor, last_success_at, last_error, failing_since, attempts, failing, resets,
        lease_owner, lease_until
        """

    /// A saved progress with its lease: who holds it and until when (the caller's `now`, UNIX ms).
    struct ProgressRow {
        var progress: WebhookProgress
        var leaseOwner: String?
        var leaseUntil: Int64?
    }

    func progress(appID: String) throws(SQLiteError) -> ProgressRow? {
        try db.queryFirst("SELECT \(Self.progressColumns) FROM webhook_progress WHERE app_id = ?1", { $0.bind(1, appID) }) { s in
            ProgressRow(
                progress: WebhookProgress(
                    appID: s.string(0), webhookCreatedAt: UnixTime(milliseconds: s.int64(1)), deliveredCursor: UInt64(clamping: s.int64(2)),
                    lastSuccessAt: s.optionalInt64(3).map(UnixTime.init(milliseconds:)), lastError: s.optionalString(4),
                    failingSince: s.optionalInt64(5).map(UnixTime.init(milliseconds:)), attempts: Int(s.int64(6)), failing: s.int64(7) != 0,
                    resets: s.int64(8)),
                leaseOwner: s.optionalString(9), leaseUntil: s.optionalInt64(10))
        }
    }

    /// Takes or renews the lease (``WebhookProgressStore/claimWebhook(appID:node:now:lease:)``); a
    /// first claim writes a fresh row for the app's current webhook, from its start cursor.
    func claimWebhook(appID: String, node: String, now: UnixTime, lease: UnixTime.Duration) throws(SQLiteError) -> WebhookProgress? {
        let until = (now + lease).milliseconds
        guard var row = try progress(appID: appID) else {
            let webhook =
                try db.queryFirst("SELECT webhook_created_at, webhook_start_cursor FROM apps WHERE id = ?1", { $0.bind(1, appID) }) {
                    (createdAt: $0.optionalInt64(0), startCursor: $0.optionalInt64(1))
                }
            let progress = WebhookProgress(
                appID: appID, webhookCreatedAt: UnixTime(milliseconds: webhook?.createdAt ?? 0),
                deliveredCursor: UInt64(clamping: webhook?.startCursor ?? 0))
            try insert(ProgressRow(progress: progress, leaseOwner: node, leaseUntil: until))
            return progress
        }
        if let owner = row.leaseOwner, owner != node, let held = row.leaseUntil, held > now.milliseconds { return nil }
        row.leaseOwner = node
        row.leaseUntil = until
        try db.run("UPDATE webhook_progress SET lease_owner = ?2, lease_until = ?3 WHERE app_id = ?1") {
            $0.bind(1, appID)
            $0.bind(2, node)
            $0.bind(3, until)
        }
        return row.progress
    }

    private func insert(_ row: ProgressRow) throws(SQLiteError) {
        let placeholders = (1...11).map { "?\($0)" }.joined(separator: ", ")
        try db.run("INSERT INTO webhook_progress (\(Self.progressColumns)) VALUES (\(placeholders))") { s in
            let p = row.progress
            s.bind(1, p.appID)
            s.bind(2, p.webhookCreatedAt.milliseconds)
            s.bind(3, Int64(clamping: p.deliveredCursor))
            s.bind(4, p.lastSuccessAt?.milliseconds)
            s.bind(5, p.lastError)
            s.bind(6, p.failingSince?.milliseconds)
            s.bind(7, Int64(p.attempts))
            s.bind(8, Int64(p.failing ? 1 : 0))
            s.bind(9, p.resets)
            s.bind(10, row.leaseOwner)
            s.bind(11, row.leaseUntil)
        }
    }

    /// Writes `progress` and renews the lease where `node` holds it and no reset came since
    /// `progress.resets`; the row's `resets` stays. Whether a row was written.
    func saveWebhook(_ progress: WebhookProgress, node: String, now: UnixTime, lease: UnixTime.Duration) throws(SQLiteError) -> Bool {
        let sql = """
            UPDATE webhook_progress SET
                webhook_created_at = ?4, delivered_cursor = ?5, last_success_at = ?6, last_error = ?7, failing_since = ?8,
                attempts = ?9, failing = ?10, lease_until = ?11
            WHERE app_id = ?1 AND lease_owner = ?2 AND resets = ?3
            """
        try db.run(sql) { s in
            s.bind(1, progress.appID)
            s.bind(2, node)
            s.bind(3, progress.resets)
            s.bind(4, progress.webhookCreatedAt.milliseconds)
            s.bind(5, Int64(clamping: progress.deliveredCursor))
            s.bind(6, progress.lastSuccessAt?.milliseconds)
            s.bind(7, progress.lastError)
            s.bind(8, progress.failingSince?.milliseconds)
            s.bind(9, Int64(progress.attempts))
            s.bind(10, Int64(progress.failing ? 1 : 0))
            s.bind(11, (now + lease).milliseconds)
        }
        return db.changes > 0
    }

    /// ``WebhookProgress/reset()`` on the saved row, whoever holds its lease.
    func resetWebhook(appID: String) throws(SQLiteError) -> WebhookProgress? {
        let sql = """
            UPDATE webhook_progress SET attempts = 0, failing = 0, failing_since = NULL, resets = resets + 1 WHERE app_id = ?1
            """
        try db.run(sql) { $0.bind(1, appID) }
        guard db.changes > 0 else { return nil }
        return try progress(appID: appID)?.progress
    }

    func releaseWebhook(appID: String, node: String) throws(SQLiteError) {
        try db.run("UPDATE webhook_progress SET lease_owner = NULL, lease_until = NULL WHERE app_id = ?1 AND lease_owner = ?2") {
            $0.bind(1, appID)
            $0.bind(2, node)
        }
    }
}
