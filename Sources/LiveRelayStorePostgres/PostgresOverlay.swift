import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import PostgresNIO

/// The net effect of the plans a batch has accepted so far: what each
/// touched row is now (or that it is gone), kept in memory until the batch
/// writes it with one statement per table and kind of change.
///
/// Later plans of the batch read through it (``PostgresStateReader``), so
/// each plan sees the writes of those before it, as the store protocol
/// requires, without a round trip per write.
struct PostgresOverlay {
    struct RecordKey: Hashable {
        var activity: ActivityKey
        var key: String
    }

    /// nil = deleted.
    private(set) var tokens: [TokenKey: Token?] = [:]
    /// Activities whose update tokens were all deleted (an end): the database's rows of
    /// them are gone for every later read of the batch; tokens put after the deletion are
    /// in `tokens`. Written first, by one statement per batch.
    private(set) var cleared: Set<ActivityKey> = []
    /// Which overlaid token holds a rotation slot now.
    private(set) var slots: [TokenSlot: TokenKey] = [:]
    private(set) var activities: [ActivityKey: Activity?] = [:]
    private(set) var records: [RecordKey: IdempotencyRecord] = [:]
    /// Activities whose idempotency records are deleted (before `records` are written).
    private(set) var purged: Set<ActivityKey> = []
    /// Final accounts for the records of the calls with these timestamps
    /// (``StoreWrite/settleReply(_:timestamp:account:)``), written after `records`:
    /// overlaid records carry theirs already; database rows get them by one UPDATE.
    private(set) var settlements: [IntentKey: EnqueueResult] = [:]

    var intents = PostgresIntentOverlay()
    /// Events to append, in the order the plans appended them: no plan reads
    /// the feeds, so they are only written, last (``writeEvents(on:)``).
    var events = PostgresEventOverlay()

    var isEmpty: Bool {
        tokens.isEmpty && cleared.isEmpty && activities.isEmpty && records.isEmpty && purged.isEmpty && settlements.isEmpty
            && intents.isEmpty && events.isEmpty
    }

    mutating func apply(_ write: StoreWrite) {
        switch write {
        case let .putToken(token):
            releaseSlot(of: token.key)
            tokens[token.key] = .some(token)
            if let slot = token.slot { slots[slot] = token.key }
        case let .deleteToken(key):
            releaseSlot(of: key)
            tokens[key] = .some(nil)
        case let .deleteUpdateTokens(activity):
            for case let (key, .some(token)) in tokens
            where token.kind == .update && token.appID == activity.appID && token.activityID == activity.activityID {
                releaseSlot(of: key)
                tokens[key] = .some(nil)
            }
            cleared.insert(activity)
        case let .putActivity(activity):
            activities[activity.key] = .some(activity)
        case let .deleteActivity(key):
            activities[key] = .some(nil)
            purged.insert(key)
            records = records.filter { $0.key.activity != key }
            settlements = settlements.filter { $0.key.activity != key }
        case let .putIdempotencyRecord(record):
            records[RecordKey(activity: ActivityKey(appID: record.appID, activityID: record.activityID), key: record.key)] = record
        case let .settleReply(activity, timestamp, account):
            settlements[IntentKey(appID: activity.appID, activityID: activity.activityID, timestamp: timestamp)] = account
            for (key, record) in records where key.activity == activity && record.reply.timestamp == timestamp {
                records[key]?.reply.account = account
            }
        case .putIntent, .deleteIntent, .leaseIntent, .renewIntent:
            intents.apply(write)
        case let .appendEvent(event):
            events.append(event)
        }
    }

    private mutating func releaseSlot(of key: TokenKey) {
        if case let .some(.some(old)) = tokens[key], let slot = old.slot, slots[slot] == key { slots[slot] = nil }
    }

    /// Whether the batch changed this token: `.some(nil)` if it deleted it.
    func token(_ key: TokenKey) -> Token?? { tokens[key] }

    /// Whether the batch deleted every update token of the activity.
    func isCleared(_ activity: ActivityKey) -> Bool { !cleared.isEmpty && cleared.contains(activity) }

    /// Whether a token as the database holds it was deleted with its activity's update
    /// tokens. (A token the batch put again after that is in `tokens`, and read from there.)
    func isCleared(_ fromDatabase: Token) -> Bool {
        guard !cleared.isEmpty, fromDatabase.kind == .update, let activity = fromDatabase.activityID else { return false }
        return cleared.contains(ActivityKey(appID: fromDatabase.appID, activityID: activity))
    }

    /// The overlaid token in `slot`, if the batch put one there.
    func token(in slot: TokenSlot) -> Token? {
        guard let key = slots[slot], case let .some(.some(token)) = tokens[key] else { return nil }
        return token
    }

    func activity(_ key: ActivityKey) -> Activity?? { activities[key] }

    func record(_ activity: ActivityKey, key: String) -> IdempotencyRecord?? {
        if let record = records[RecordKey(activity: activity, key: key)] { return .some(record) }
        return purged.contains(activity) ? .some(nil) : nil
    }

    /// A record read from the database as the batch's settlements left it.
    func settled(_ record: IdempotencyRecord) -> IdempotencyRecord {
        let call = IntentKey(appID: record.appID, activityID: record.activityID, timestamp: record.reply.timestamp)
        guard let account = settlements[call] else { return record }
        var record = record
        record.reply.account = account
        return record
    }

    /// `fromDatabase` with the batch's changes: overlaid rows replaced by their
    /// current version if it still matches, plus overlaid rows that now match;
    /// rows deleted with their activity's update tokens left out.
    func merge(_ fromDatabase: [Token], where matches: (Token) -> Bool) -> [Token] {
        let kept = cleared.isEmpty ? fromDatabase : fromDatabase.filter { !isCleared($0) }
        return merge(kept, key: \.key, as: { $0 }, where: matches)
    }

    /// Token keys from the database with the batch's changes, as ``merge(_:where:)`` does for
    /// tokens; keys of an activity whose update tokens the batch deleted are not to be asked for.
    func merge(_ fromDatabase: [TokenKey], where matches: (Token) -> Bool) -> [TokenKey] {
        merge(fromDatabase, key: { $0 }, as: \.key, where: matches)
    }

    /// Rows of tokens (whole, or what a read took of them) merged as ``merge(_:where:)`` says.
    private func merge<Row>(
        _ fromDatabase: [Row], key: (Row) -> TokenKey, as row: (Token) -> Row, where matches: (Token) -> Bool
    ) -> [Row] {
        guard !tokens.isEmpty else { return fromDatabase }
        var merged = fromDatabase.filter { tokens[key($0)] == nil }
        for case let .some(token) in tokens.values where matches(token) { merged.append(row(token)) }
        return merged
    }

    /// A fan-out's targets (tokens of `appID`) from the database with the batch's
    /// changes (as ``merge(_:where:)`` does for tokens), live at `now`.
    func merge(_ fromDatabase: [TargetRow], appID: String, at now: UnixTime, where matches: (Token) -> Bool) -> [PushTarget] {
        var targets: [PushTarget] = []
        targets.reserveCapacity(fromDatabase.count)
        for row in fromDatabase where row.isLive(at: now) {
            if !tokens.isEmpty, tokens[TokenKey(appID: appID, hex: row.hex)] != nil { continue }
            targets.append(PushTarget(token: row.hex, environment: row.environment))
        }
        for case let .some(token) in tokens.values where token.appID == appID && matches(token) && !token.isExpired(at: now) {
            targets.append(PushTarget(token: token.hex, environment: token.environment))
        }
        return targets
    }

    func merge(_ fromDatabase: [Activity], where matches: (Activity) -> Bool) -> [Activity] {
        guard !activities.isEmpty else { return fromDatabase }
        var merged = fromDatabase.filter { activities[$0.key] == nil }
        for case let .some(activity) in activities.values where matches(activity) { merged.append(activity) }
        return merged
    }

    func merge(_ fromDatabase: [DispatchIntent], where matches: (DispatchIntent) -> Bool) -> [DispatchIntent] {
        intents.merge(fromDatabase, where: matches)
    }

    var intentCount: Int { intents.count }
    var tokenCount: Int { tokens.count }
    var activityCount: Int { activities.count }

    // MARK: Writing

    static let deleteUpdateTokensSQL =
        "DELETE FROM tokens t USING unnest($1::text[], $2::text[]) AS k(a, x) WHERE t.kind = 0 AND t.app_id = k.a AND t.activity_id = k.x"
    static let deleteTokensSQL =
        "DELETE FROM tokens t USING unnest($1::text[], $2::text[]) AS k(a, h) WHERE t.app_id = k.a AND t.hex = k.h"
    static let putTokensSQL = """
        INSERT INTO tokens (\(PostgresTables.tokenColumns))
        SELECT a, h, kind, env, CASE WHEN ty_n THEN NULL ELSE ty END, CASE WHEN x_n THEN NULL ELSE x END,
               CASE WHEN u_n THEN NULL ELSE u END, CASE WHEN d_n THEN NULL ELSE d END, c, up, CASE WHEN e_n THEN NULL ELSE e END
        FROM unnest($1::text[], $2::text[], $3::int2[], $4::int2[], $5::text[], $6::bool[], $7::text[], $8::bool[],
                    $9::text[], $10::bool[], $11::text[], $12::bool[], $13::int8[], $14::int8[], $15::int8[], $16::bool[])
            AS r(a, h, kind, env, ty, ty_n, x, x_n, u, u_n, d, d_n, c, up, e, e_n)
        ON CONFLICT (app_id, hex) DO UPDATE SET
            kind = excluded.kind, environment = excluded.environment, attributes_type = excluded.attributes_type,
            activity_id = excluded.activity_id, external_user_id = excluded.external_user_id, device_id = excluded.device_id,
            created_at = excluded.created_at, updated_at = excluded.updated_at, expires_at = excluded.expires_at
        """
    static let deleteActivitiesSQL =
        "DELETE FROM activities v USING unnest($1::text[], $2::text[]) AS k(a, x) WHERE v.app_id = k.a AND v.id = k.x"
    static let purgeRecordsSQL =
        "DELETE FROM idempotency_records r USING unnest($1::text[], $2::text[]) AS k(a, x) WHERE r.app_id = k.a AND r.activity_id = k.x"
    static let putActivitiesSQL = """
        INSERT INTO activities (\(PostgresTables.activityColumns), sweep_deadline)
        SELECT a, x, CASE WHEN ty_n THEN NULL ELSE ty END, st, ts, CASE WHEN cs_n THEN NULL ELSE cs END, c, e,
               CASE WHEN en_n THEN NULL ELSE en END, CASE WHEN di_n THEN NULL ELSE di END, sw
        FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::text[], $6::int8[], $7::text[], $8::bool[],
                    $9::int8[], $10::int8[], $11::int8[], $12::bool[], $13::int8[], $14::bool[], $15::int8[])
            AS r(a, x, ty, ty_n, st, ts, cs, cs_n, c, e, en, en_n, di, di_n, sw)
        ON CONFLICT (app_id, id) DO UPDATE SET
            attributes_type = excluded.attributes_type, state = excluded.state, last_timestamp = excluded.last_timestamp,
            last_content_state = excluded.last_content_state, created_at = excluded.created_at, expires_at = excluded.expires_at,
            ended_at = excluded.ended_at, dismiss_at = excluded.dismiss_at, sweep_deadline = excluded.sweep_deadline
        """
    static let putRecordsSQL = """
        INSERT INTO idempotency_records (\(PostgresTables.recordColumns))
        SELECT a, x, k, op, f, ts, st, su, c, tg, CASE WHEN ac_n THEN NULL ELSE ac END
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[], $7::text[], $8::bytea[], $9::int8[],
                    $10::text[], $11::text[], $12::bool[])
            AS r(a, x, k, op, f, ts, st, su, c, tg, ac, ac_n)
        ON CONFLICT (app_id, activity_id, key) DO UPDATE SET
            operation = excluded.operation, fingerprint = excluded.fingerprint, reply_timestamp = excluded.reply_timestamp,
            reply_state = excluded.reply_state, reply_summary = excluded.reply_summary, created_at = excluded.created_at,
            reply_targets = excluded.reply_targets, reply_account = excluded.reply_account
        """
    /// Deletes each activity's records beyond its newest `$3` calls
    /// (``IdempotencyRecord/keptPerActivity``): the cut is found by walking the
    /// timestamp index from the newest, at most `$3` + 1 entries, and is NULL
    /// (nothing deleted) while the activity has no more than `$3`.
    static let evictRecordsSQL = """
        DELETE FROM idempotency_records r
        USING (
            SELECT k.a, k.x, (
                SELECT i.reply_timestamp FROM idempotency_records i WHERE i.app_id = k.a AND i.activity_id = k.x
                ORDER BY i.reply_timestamp DESC OFFSET $3 LIMIT 1) AS cut
            FROM unnest($1::text[], $2::text[]) AS k(a, x)) c
        WHERE r.app_id = c.a AND r.activity_id = c.x AND r.reply_timestamp <= c.cut
        """
    /// One lookup per call in the timestamp index (schema version 5).
    static let settleRecordsSQL = """
        UPDATE idempotency_records r SET reply_account = k.ac
        FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[]) AS k(a, x, ts, ac)
        WHERE r.app_id = k.a AND r.activity_id = k.x AND r.reply_timestamp = k.ts
        """

    /// Writes the net changes: deletions first (the activities' update tokens, then
    /// tokens by key), then upserts, each table's rows in key order (so that
    /// concurrent batches lock rows in the same order).
    func write(on session: PostgresSession) async throws {
        func run(_ sql: String, _ binds: PostgresBindings) async throws {
            try await session.query(PostgresQuery(unsafeSQL: sql, binds: binds))
        }
        if !cleared.isEmpty {
            let keys = cleared.sorted { ($0.appID, $0.activityID) < ($1.appID, $1.activityID) }
            var b = PostgresBindings(capacity: 2)
            b.append(keys.map(\.appID)); b.append(keys.map(\.activityID))
            try await run(Self.deleteUpdateTokensSQL, b)
        }
        let changed = tokens.sorted { ($0.key.appID, $0.key.hex) < ($1.key.appID, $1.key.hex) }
        let deleted = changed.filter { $0.value == nil }.map(\.key)
        if !deleted.isEmpty {
            var b = PostgresBindings(capacity: 2)
            b.append(deleted.map(\.appID)); b.append(deleted.map(\.hex))
            try await run(Self.deleteTokensSQL, b)
        }
        let put = changed.compactMap(\.value)
        if !put.isEmpty {
            var b = PostgresBindings(capacity: 16)
            b.append(put.map(\.appID)); b.append(put.map(\.hex))
            b.append(put.map { Int16($0.kind == .update ? 0 : 1) })
            b.append(put.map { Int16($0.environment == .sandbox ? 0 : 1) })
            for column in [put.map(\.attributesType), put.map(\.activityID), put.map(\.externalUserID), put.map(\.deviceID)] {
                b.append(column.map { $0 ?? "" }); b.append(column.map { $0 == nil })
            }
            b.append(put.map(\.createdAt.milliseconds)); b.append(put.map(\.updatedAt.milliseconds))
            b.append(put.map { $0.expiresAt?.milliseconds ?? 0 }); b.append(put.map { $0.expiresAt == nil })
            try await run(Self.putTokensSQL, b)
        }
        let changedActivities = activities.sorted { ($0.key.appID, $0.key.activityID) < ($1.key.appID, $1.key.activityID) }
        let deletedActivities = changedActivities.filter { $0.value == nil }.map(\.key)
        if !deletedActivities.isEmpty {
            var b = PostgresBindings(capacity: 2)
            b.append(deletedActivities.map(\.appID)); b.append(deletedActivities.map(\.activityID))
            try await run(Self.deleteActivitiesSQL, b)
        }
        if !purged.isEmpty {
            let keys = purged.sorted { ($0.appID, $0.activityID) < ($1.appID, $1.activityID) }
            var b = PostgresBindings(capacity: 2)
            b.append(keys.map(\.appID)); b.append(keys.map(\.activityID))
            try await run(Self.purgeRecordsSQL, b)
        }
        let putActivities = changedActivities.compactMap(\.value)
        if !putActivities.isEmpty {
            let a = putActivities
            var b = PostgresBindings(capacity: 15)
            b.append(a.map(\.appID)); b.append(a.map(\.id))
            b.append(a.map { $0.attributesType ?? "" }); b.append(a.map { $0.attributesType == nil })
            b.append(a.map(\.state.rawValue)); b.append(a.map(\.lastTimestamp))
            b.append(a.map { $0.lastContentState ?? "" }); b.append(a.map { $0.lastContentState == nil })
            b.append(a.map(\.createdAt.milliseconds)); b.append(a.map(\.expiresAt.milliseconds))
            b.append(a.map { $0.endedAt?.milliseconds ?? 0 }); b.append(a.map { $0.endedAt == nil })
            b.append(a.map { $0.dismissAt?.milliseconds ?? 0 }); b.append(a.map { $0.dismissAt == nil })
            b.append(a.map(\.sweepDeadline.milliseconds))
            try await run(Self.putActivitiesSQL, b)
        }
        if !records.isEmpty {
            let r = records.values.sorted { ($0.appID, $0.activityID, $0.key) < ($1.appID, $1.activityID, $1.key) }
            var b = PostgresBindings(capacity: 12)
            b.append(r.map(\.appID)); b.append(r.map(\.activityID)); b.append(r.map(\.key))
            b.append(r.map(\.operation.rawValue)); b.append(r.map { Int64(bitPattern: $0.fingerprint) })
            b.append(r.map(\.reply.timestamp)); b.append(r.map(\.reply.state.rawValue))
            // reply_summary: only rows from schema version 1 have one.
            b.append(r.map { _ in ByteBuffer() })
            b.append(r.map(\.createdAt.milliseconds))
            b.append(r.map(\.reply.targetsJSON))
            b.append(r.map { $0.reply.account.map(StoredReply.accountJSON) ?? "" }); b.append(r.map { $0.reply.account == nil })
            try await run(Self.putRecordsSQL, b)
            var activities: [ActivityKey] = []
            for record in r where activities.last?.appID != record.appID || activities.last?.activityID != record.activityID {
                activities.append(ActivityKey(appID: record.appID, activityID: record.activityID))
            }
            var e = PostgresBindings(capacity: 3)
            e.append(activities.map(\.appID)); e.append(activities.map(\.activityID))
            e.append(Int64(IdempotencyRecord.keptPerActivity))
            try await run(Self.evictRecordsSQL, e)
        }
        if !settlements.isEmpty {
            let settled = settlements.sorted {
                ($0.key.appID, $0.key.activityID, $0.key.timestamp) < ($1.key.appID, $1.key.activityID, $1.key.timestamp)
            }
            var b = PostgresBindings(capacity: 4)
            b.append(settled.map(\.key.appID)); b.append(settled.map(\.key.activityID)); b.append(settled.map(\.key.timestamp))
            b.append(settled.map { StoredReply.accountJSON($0.value) })
            try await run(Self.settleRecordsSQL, b)
        }
        try await intents.write(on: session)
        try await events.write(on: session)
    }
}
