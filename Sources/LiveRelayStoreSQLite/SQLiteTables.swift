import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayStore

/// The rows of the four tables as domain values: every read and every
/// ``StoreWrite`` as a cached prepared statement on one connection.
///
/// The SQL names its partial-index conditions literally (`kind = 0`, `kind = 1`)
/// so that the partial indexes of ``SQLiteSchema`` apply, and every indexed
/// lookup says `INDEXED BY`: without statistics the planner prefers a range
/// of the primary key on `app_id` alone (every token of the app: a scan, in a
/// one-app deployment), and `INDEXED BY` also turns a lost index into an
/// error at prepare time instead of a slow query.
struct SQLiteTables {
    let db: SQLiteConnection

    static let tokenColumns = StoreColumns.token
    static let activityColumns = StoreColumns.activity
    static let recordColumns = StoreColumns.record

    /// The statements, numbered for the connection's statement cache.
    enum SQL {
        static let count = 48
        static let token = SQLiteQuery(0, "SELECT \(tokenColumns) FROM tokens WHERE app_id = ?1 AND hex = ?2")
        static let updateSlot = SQLiteQuery(
            1,
            "SELECT \(tokenColumns) FROM tokens INDEXED BY tokens_update_targets WHERE kind = 0 AND app_id = ?1 AND activity_id = ?2 AND device_id = ?3"
        )
        static let pushToStartSlot = SQLiteQuery(
            2,
            "SELECT \(tokenColumns) FROM tokens INDEXED BY tokens_push_to_start_slot WHERE kind = 1 AND app_id = ?1 AND attributes_type = ?2 AND device_id = ?3"
        )
        static let updateTokens = SQLiteQuery(
            3, "SELECT \(tokenColumns) FROM tokens INDEXED BY tokens_update_targets WHERE kind = 0 AND app_id = ?1 AND activity_id = ?2")
        /// The sweep's bounded read of an activity's tokens, from the covering index alone.
        static let updateTokenKeys = SQLiteQuery(
            33, "SELECT hex FROM tokens INDEXED BY tokens_update_targets WHERE kind = 0 AND app_id = ?1 AND activity_id = ?2 LIMIT ?3")
        /// An update's fan-out: answered from the covering index alone (no row of
        /// `tokens` is read), expired tokens left out by the query.
        static let updateTargets = SQLiteQuery(
            32,
            """
            SELECT hex, environment FROM tokens INDEXED BY tokens_update_targets
            WHERE kind = 0 AND app_id = ?1 AND activity_id = ?2 AND (expires_at IS NULL OR expires_at > ?3)
            """)
        /// A start to `all_devices`: the hex and environment of the type's live tokens.
        static let pushToStartTargets = SQLiteQuery(
            34,
            """
            SELECT hex, environment FROM tokens INDEXED BY tokens_push_to_start_slot
            WHERE kind = 1 AND app_id = ?1 AND attributes_type = ?2 AND (expires_at IS NULL OR expires_at > ?3)
            """)
        static let pushToStartOfType = SQLiteQuery(
            4,
            "SELECT \(tokenColumns) FROM tokens INDEXED BY tokens_push_to_start_slot WHERE kind = 1 AND app_id = ?1 AND attributes_type = ?2"
        )
        static let pushToStartOfUser = SQLiteQuery(
            5,
            """
            SELECT \(tokenColumns) FROM tokens INDEXED BY tokens_push_to_start_by_user
            WHERE kind = 1 AND external_user_id IS NOT NULL AND app_id = ?1 AND external_user_id = ?2 AND attributes_type = ?3
            """)
        static let tokensExpired = SQLiteQuery(
            6,
            "SELECT \(tokenColumns) FROM tokens INDEXED BY tokens_expiring WHERE expires_at IS NOT NULL AND expires_at <= ?1 ORDER BY expires_at LIMIT ?2"
        )
        static let activity = SQLiteQuery(7, "SELECT \(activityColumns) FROM activities WHERE app_id = ?1 AND id = ?2")
        static let activitiesDue = SQLiteQuery(
            8,
            "SELECT \(activityColumns) FROM activities INDEXED BY activities_sweep_deadline WHERE sweep_deadline <= ?1 ORDER BY sweep_deadline LIMIT ?2"
        )
        static let record = SQLiteQuery(
            9,
            "SELECT \(recordColumns) FROM idempotency_records WHERE app_id = ?1 AND activity_id = ?2 AND key = ?3")

        /// An upsert, not INSERT OR REPLACE: REPLACE would silently delete
        /// another token holding the same rotation slot; here that is a
        /// constraint error (the rules always delete the occupant first).
        static let putToken = SQLiteQuery(
            10,
            """
            INSERT INTO tokens (\(tokenColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
            ON CONFLICT (app_id, hex) DO UPDATE SET
                kind = excluded.kind, environment = excluded.environment, attributes_type = excluded.attributes_type,
                activity_id = excluded.activity_id, external_user_id = excluded.external_user_id,
                device_id = excluded.device_id, created_at = excluded.created_at, updated_at = excluded.updated_at,
                expires_at = excluded.expires_at
            """)
        static let deleteToken = SQLiteQuery(11, "DELETE FROM tokens WHERE app_id = ?1 AND hex = ?2")
        static let deleteUpdateTokens = SQLiteQuery(
            35, "DELETE FROM tokens INDEXED BY tokens_update_targets WHERE kind = 0 AND app_id = ?1 AND activity_id = ?2")
        static let putActivity = SQLiteQuery(
            12,
            """
            INSERT OR REPLACE INTO activities (\(activityColumns), sweep_deadline)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
            """)
        static let deleteActivity = SQLiteQuery(13, "DELETE FROM activities WHERE app_id = ?1 AND id = ?2")
        static let deleteRecords = SQLiteQuery(14, "DELETE FROM idempotency_records WHERE app_id = ?1 AND activity_id = ?2")
        static let putRecord = SQLiteQuery(
            15,
            """
            INSERT OR REPLACE INTO idempotency_records (\(recordColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
            """)
        /// Deletes the activity's records beyond its newest `?3` calls
        /// (``IdempotencyRecord/keptPerActivity``): the subquery walks the
        /// timestamp index from the newest, at most `?3` + 1 entries, and finds
        /// nothing (so deletes nothing) while the activity has no more than `?3`.
        static let evictRecords = SQLiteQuery(
            36,
            """
            DELETE FROM idempotency_records WHERE app_id = ?1 AND activity_id = ?2 AND reply_timestamp <= (
                SELECT reply_timestamp FROM idempotency_records WHERE app_id = ?1 AND activity_id = ?2
                ORDER BY reply_timestamp DESC LIMIT 1 OFFSET ?3)
            """)
        /// One lookup in the timestamp index (schema version 5).
        static let settleRecord = SQLiteQuery(
            28, "UPDATE idempotency_records SET reply_account = ?4 WHERE app_id = ?1 AND activity_id = ?2 AND reply_timestamp = ?3")

        // The writer's transaction control.
        static let begin = SQLiteQuery(16, "BEGIN IMMEDIATE")
        static let commit = SQLiteQuery(17, "COMMIT")
        static let rollback = SQLiteQuery(18, "ROLLBACK")
        static let savepoint = SQLiteQuery(19, "SAVEPOINT plan")
        static let release = SQLiteQuery(20, "RELEASE plan")
        static let rollbackToSavepoint = SQLiteQuery(21, "ROLLBACK TO plan")
        /// Quotas: the primary key's (app_id, ...) prefix, so each counts the app's own rows only.
        static let countTokens = SQLiteQuery(29, "SELECT COUNT(*) FROM tokens WHERE app_id = ?1")
        static let countLiveActivities = SQLiteQuery(
            30, "SELECT COUNT(*) FROM activities WHERE app_id = ?1 AND state IN (?2, ?3) AND expires_at > ?4")
    }

    // MARK: Reads

    func token(_ key: TokenKey) throws(SQLiteError) -> Token? {
        try db.queryFirst(
            SQL.token,
            {
                $0.bind(1, key.appID); $0.bind(2, key.hex)
            }, row: Self.token(from:))
    }

    func token(in slot: TokenSlot) throws(SQLiteError) -> Token? {
        switch slot {
        case let .update(appID, activityID, deviceID):
            try db.queryFirst(
                SQL.updateSlot,
                {
                    $0.bind(1, appID); $0.bind(2, activityID); $0.bind(3, deviceID)
                },
                row: Self.token(from:))
        case let .pushToStart(appID, deviceID, attributesType):
            try db.queryFirst(
                SQL.pushToStartSlot,
                {
                    $0.bind(1, appID); $0.bind(2, attributesType); $0.bind(3, deviceID)
                },
                row: Self.token(from:))
        }
    }

    func updateTokens(of activity: ActivityKey) throws(SQLiteError) -> [Token] {
        try db.query(
            SQL.updateTokens,
            {
                $0.bind(1, activity.appID); $0.bind(2, activity.activityID)
            }, row: Self.token(from:))
    }

    func updateTokenKeys(of activity: ActivityKey, limit: Int) throws(SQLiteError) -> [TokenKey] {
        try db.query(
            SQL.updateTokenKeys,
            {
                $0.bind(1, activity.appID); $0.bind(2, activity.activityID); $0.bind(3, Int64(max(0, limit)))
            }, row: { TokenKey(appID: activity.appID, hex: $0.string(0)) })
    }

    /// One pass over the covering index: per row one `String` (the target's hex), nothing else.
    func updateTargets(of activity: ActivityKey, at now: UnixTime) throws(SQLiteError) -> [PushTarget] {
        try db.query(
            SQL.updateTargets,
            {
                $0.bind(1, activity.appID); $0.bind(2, activity.activityID); $0.bind(3, now.milliseconds)
            }, row: Self.target(from:))
    }

    func pushToStartTokens(appID: String, attributesType: String) throws(SQLiteError) -> [Token] {
        try db.query(
            SQL.pushToStartOfType,
            {
                $0.bind(1, appID); $0.bind(2, attributesType)
            }, row: Self.token(from:))
    }

    func pushToStartTargets(appID: String, attributesType: String, at now: UnixTime) throws(SQLiteError) -> [PushTarget] {
        try db.query(
            SQL.pushToStartTargets,
            {
                $0.bind(1, appID); $0.bind(2, attributesType); $0.bind(3, now.milliseconds)
            }, row: Self.target(from:))
    }

    func pushToStartTokens(appID: String, externalUserID: String, attributesType: String) throws(SQLiteError) -> [Token] {
        try db.query(
            SQL.pushToStartOfUser,
            {
                $0.bind(1, appID); $0.bind(2, externalUserID); $0.bind(3, attributesType)
            },
            row: Self.token(from:))
    }

    func tokensExpired(at now: UnixTime, limit: Int) throws(SQLiteError) -> [Token] {
        try db.query(
            SQL.tokensExpired,
            {
                $0.bind(1, now.milliseconds); $0.bind(2, Int64(limit))
            }, row: Self.token(from:))
    }

    func activity(_ key: ActivityKey) throws(SQLiteError) -> Activity? {
        let row = try db.queryFirst(
            SQL.activity,
            {
                $0.bind(1, key.appID); $0.bind(2, key.activityID)
            }, row: Self.activity(from:))
        return try row?.get()
    }

    func usage(of appID: String, at now: UnixTime) throws(SQLiteError) -> AppUsage {
        let tokens = try db.queryFirst(SQL.countTokens, { $0.bind(1, appID) }, row: { $0.int64(0) }) ?? 0
        let live =
            try db.queryFirst(
                SQL.countLiveActivities,
                {
                    $0.bind(1, appID); $0.bind(2, Activity.liveStates[0].rawValue); $0.bind(3, Activity.liveStates[1].rawValue)
                    $0.bind(4, now.milliseconds)
                }, row: { $0.int64(0) }) ?? 0
        return AppUsage(tokens: Int(tokens), liveActivities: Int(live))
    }

    func activitiesDue(at now: UnixTime, limit: Int) throws(SQLiteError) -> [Activity] {
        let rows = try db.query(
            SQL.activitiesDue,
            {
                $0.bind(1, now.milliseconds); $0.bind(2, Int64(limit))
            }, row: Self.activity(from:))
        var activities: [Activity] = []
        activities.reserveCapacity(rows.count)
        for row in rows { activities.append(try row.get()) }
        return activities
    }

    func idempotencyRecord(_ activity: ActivityKey, key: String) throws(SQLiteError) -> IdempotencyRecord? {
        let row = try db.queryFirst(
            SQL.record,
            {
                $0.bind(1, activity.appID); $0.bind(2, activity.activityID); $0.bind(3, key)
            },
            row: Self.record(from:))
        return try row?.get()
    }

    // MARK: Writes

    /// Whether `write` is a single statement (so atomic without a savepoint).
    static func isOneStatement(_ write: StoreWrite) -> Bool {
        switch write {
        case .deleteActivity: return false
        case let .putIntent(intent): return intent.event == .start
        default: return true
        }
    }

    func write(_ write: StoreWrite) throws(SQLiteError) {
        switch write {
        case let .putToken(token):
            try db.run(SQL.putToken) { s in
                s.bind(1, token.appID)
                s.bind(2, token.hex)
                s.bind(3, token.kind == .update ? Int64(0) : 1)
                s.bind(4, token.environment == .sandbox ? Int64(0) : 1)
                s.bind(5, token.attributesType)
                s.bind(6, token.activityID)
                s.bind(7, token.externalUserID)
                s.bind(8, token.deviceID)
                s.bind(9, token.createdAt.milliseconds)
                s.bind(10, token.updatedAt.milliseconds)
                s.bind(11, token.expiresAt?.milliseconds)
            }
        case let .deleteToken(key):
            try db.run(SQL.deleteToken) {
                $0.bind(1, key.appID); $0.bind(2, key.hex)
            }
        case let .deleteUpdateTokens(activity):
            try db.run(SQL.deleteUpdateTokens) {
                $0.bind(1, activity.appID); $0.bind(2, activity.activityID)
            }
        case let .putActivity(activity):
            try db.run(SQL.putActivity) { s in
                s.bind(1, activity.appID)
                s.bind(2, activity.id)
                s.bind(3, activity.attributesType)
                s.bind(4, activity.state.rawValue)
                s.bind(5, activity.lastTimestamp)
                s.bind(6, activity.lastContentState)
                s.bind(7, activity.createdAt.milliseconds)
                s.bind(8, activity.expiresAt.milliseconds)
                s.bind(9, activity.endedAt?.milliseconds)
                s.bind(10, activity.dismissAt?.milliseconds)
                s.bind(11, activity.sweepDeadline.milliseconds)
            }
        case let .deleteActivity(key):
            try db.run(SQL.deleteActivity) {
                $0.bind(1, key.appID); $0.bind(2, key.activityID)
            }
            try db.run(SQL.deleteRecords) {
                $0.bind(1, key.appID); $0.bind(2, key.activityID)
            }
        case let .putIdempotencyRecord(record):
            try db.run(SQL.putRecord) { s in
                s.bind(1, record.appID)
                s.bind(2, record.activityID)
                s.bind(3, record.key)
                s.bind(4, record.operation.rawValue)
                s.bind(5, Int64(bitPattern: record.fingerprint))
                s.bind(6, record.reply.timestamp)
                s.bind(7, record.reply.state.rawValue)
                s.bind(8, [UInt8]())  // reply_summary: only rows from schema version 1 have one
                s.bind(9, record.createdAt.milliseconds)
                s.bind(10, record.reply.targetsJSON)
                s.bind(11, record.reply.account.map(StoredReply.accountJSON))
            }
            try db.run(SQL.evictRecords) {
                $0.bind(1, record.appID); $0.bind(2, record.activityID); $0.bind(3, Int64(IdempotencyRecord.keptPerActivity))
            }
        case let .settleReply(activity, timestamp, account):
            try db.run(SQL.settleRecord) {
                $0.bind(1, activity.appID); $0.bind(2, activity.activityID); $0.bind(3, timestamp)
                $0.bind(4, StoredReply.accountJSON(account))
            }
        case .putIntent, .deleteIntent, .leaseIntent, .renewIntent:
            try writeIntent(write)
        case let .appendEvent(event):
            try appendEvent(event)
        }
    }

    // MARK: Rows

    /// A row of `hex, environment`: what a fan-out's push needs of a token.
    static func target(from s: SQLiteStatement) -> PushTarget {
        PushTarget(token: s.string(0), environment: s.int64(1) == 0 ? .sandbox : .production)
    }

    static func token(from s: SQLiteStatement) -> Token {
        Token(
            kind: s.int64(2) == 0 ? .update : .pushToStart, hex: s.string(1),
            environment: s.int64(3) == 0 ? .sandbox : .production, appID: s.string(0),
            attributesType: s.optionalString(4), activityID: s.optionalString(5),
            externalUserID: s.optionalString(6), deviceID: s.optionalString(7),
            createdAt: UnixTime(milliseconds: s.int64(8)), updatedAt: UnixTime(milliseconds: s.int64(9)),
            expiresAt: s.optionalInt64(10).map(UnixTime.init(milliseconds:)))
    }

    static func corrupt(_ what: String, _ s: SQLiteStatement) -> SQLiteError {
        SQLiteError(code: 11 /* SQLITE_CORRUPT */, message: "unreadable \(what)", context: s.sql)
    }

    static func activity(from s: SQLiteStatement) -> Result<Activity, SQLiteError> {
        guard let state = Activity.State(rawValue: s.string(3)) else {
            return .failure(corrupt("activity state \"\(s.string(3))\"", s))
        }
        return .success(
            Activity(
                appID: s.string(0), id: s.string(1), attributesType: s.optionalString(2), state: state,
                lastTimestamp: s.int64(4), lastContentState: s.optionalString(5),
                createdAt: UnixTime(milliseconds: s.int64(6)), expiresAt: UnixTime(milliseconds: s.int64(7)),
                endedAt: s.optionalInt64(8).map(UnixTime.init(milliseconds:)),
                dismissAt: s.optionalInt64(9).map(UnixTime.init(milliseconds:))))
    }

    static func record(from s: SQLiteStatement) -> Result<IdempotencyRecord, SQLiteError> {
        guard let operation = IdempotentOperation(rawValue: s.string(3)),
            let state = Activity.State(rawValue: s.string(6)),
            var reply = s.optionalString(9).map({ StoredReply(timestamp: s.int64(5), state: state, targetsJSON: $0) })
                ?? StoredReply(timestamp: s.int64(5), state: state, legacySummary: s.blob(7))
        else { return .failure(corrupt("idempotency record", s)) }
        if let json = s.optionalString(10) {
            guard let account = StoredReply.account(json: json) else { return .failure(corrupt("idempotency record account", s)) }
            reply.account = account
        }
        return .success(
            IdempotencyRecord(
                appID: s.string(0), activityID: s.string(1), key: s.string(2), operation: operation,
                fingerprint: UInt64(bitPattern: s.int64(4)), reply: reply,
                createdAt: UnixTime(milliseconds: s.int64(8))))
    }
}

/// ``StateReader`` over ``SQLiteTables`` for a plan running inside the
/// writer's transaction: it sees the batch's earlier writes.
///
/// `StateReader` cannot throw, so the first SQLite error is kept here, the
/// read answers "nothing", and the store fails the plan (rolling back its
/// savepoint) instead of trusting a decision made on a failed read.
final class SQLiteStateReader: StateReader {
    let tables: SQLiteTables
    private(set) var failure: SQLiteError?

    init(tables: SQLiteTables) { self.tables = tables }

    func reset() { failure = nil }

    private func read<T>(_ fallback: T, _ body: () throws(SQLiteError) -> T) -> T {
        guard failure == nil else { return fallback }
        do throws(SQLiteError) {
            return try body()
        } catch {
            failure = error
            return fallback
        }
    }

    func token(_ key: TokenKey) -> Token? { read(nil) { () throws(SQLiteError) in try tables.token(key) } }
    func token(in slot: TokenSlot) -> Token? { read(nil) { () throws(SQLiteError) in try tables.token(in: slot) } }
    func activity(_ key: ActivityKey) -> Activity? { read(nil) { () throws(SQLiteError) in try tables.activity(key) } }

    func idempotencyRecord(_ activity: ActivityKey, key: String) -> IdempotencyRecord? {
        read(nil) { () throws(SQLiteError) in try tables.idempotencyRecord(activity, key: key) }
    }

    func updateTokens(of activity: ActivityKey) -> [Token] {
        read([]) { () throws(SQLiteError) in try tables.updateTokens(of: activity) }
    }

    func updateTokenKeys(of activity: ActivityKey, limit: Int) -> [TokenKey] {
        read([]) { () throws(SQLiteError) in try tables.updateTokenKeys(of: activity, limit: limit) }
    }

    func updateTargets(of activity: ActivityKey, at now: UnixTime) -> [PushTarget] {
        read([]) { () throws(SQLiteError) in try tables.updateTargets(of: activity, at: now) }
    }

    func pushToStartTokens(appID: String, attributesType: String) -> [Token] {
        read([]) { () throws(SQLiteError) in try tables.pushToStartTokens(appID: appID, attributesType: attributesType) }
    }

    func pushToStartTargets(appID: String, attributesType: String, at now: UnixTime) -> [PushTarget] {
        read([]) { () throws(SQLiteError) in try tables.pushToStartTargets(appID: appID, attributesType: attributesType, at: now) }
    }

    func pushToStartTokens(appID: String, externalUserID: String, attributesType: String) -> [Token] {
        read([]) { () throws(SQLiteError) in
            try tables.pushToStartTokens(appID: appID, externalUserID: externalUserID, attributesType: attributesType)
        }
    }

    func activitiesDue(at now: UnixTime, limit: Int) -> [Activity] {
        read([]) { () throws(SQLiteError) in try tables.activitiesDue(at: now, limit: limit) }
    }

    func tokensExpired(at now: UnixTime, limit: Int) -> [Token] {
        read([]) { () throws(SQLiteError) in try tables.tokensExpired(at: now, limit: limit) }
    }

    func claimableIntents(by owner: String, evenIfLeased: Bool, at now: UnixTime, limit: Int) -> [DispatchIntent] {
        read([]) { () throws(SQLiteError) in
            try tables.claimableIntents(by: owner, evenIfLeased: evenIfLeased, at: now, limit: limit)
        }
    }
}
