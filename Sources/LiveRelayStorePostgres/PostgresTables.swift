import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import PostgresNIO

/// Every read a plan can make, as a value: the key of the batch's read cache
/// and of the set-based fetch that fills it (see ``PostgresStateReader``).
enum ReadKey: Hashable, Sendable {
    case token(TokenKey)
    case slot(TokenSlot)
    case activity(ActivityKey)
    case record(ActivityKey, String)
    case updateTokens(ActivityKey)
    /// The sweep's bounded read of an activity's tokens: at most `limit` hexes.
    case updateTokenHexes(ActivityKey, limit: Int)
    /// An update's fan-out: only what a push needs (``TargetRow``).
    case updateTargets(ActivityKey)
    case pushToStartOfType(appID: String, attributesType: String)
    /// A start to `all_devices`: only what a push needs, as ``updateTargets(_:)``.
    case pushToStartTargets(appID: String, attributesType: String)
    case pushToStartOfUser(appID: String, externalUserID: String, attributesType: String)
    case activitiesDue(now: Int64, limit: Int)
    case tokensExpired(now: Int64, limit: Int)
    case claimableIntents(owner: String, upTo: Int64, now: Int64, limit: Int)
}

/// What the database answered for a ``ReadKey``.
enum ReadValue: Sendable {
    case token(Token?)
    case tokens([Token])
    case activity(Activity?)
    case activities([Activity])
    case record(IdempotencyRecord?)
    case intents([DispatchIntent])
    case targets([TargetRow])
    case hexes([String])
}

/// The SQL of the PostgreSQL store: set-based reads (one statement answers
/// the reads of a whole batch, through `unnest` of key arrays) and set-based
/// writes (one statement per table and kind of change).
///
/// Every token lookup names its partial-index condition literally (`kind = 0`,
/// `kind = 1`), so that the planner can prove the partial indexes of
/// ``PostgresSchema`` apply; a bound parameter there would hide them.
///
/// Each key of a read is looked up on its own (`CROSS JOIN LATERAL (... OFFSET 0)`:
/// the subquery is planned apart, once, as a parameterized index scan), so the plan
/// does not depend on table statistics. As a plain join, a table that has never been
/// analysed (a new deployment, a restored database, before autovacuum's first pass)
/// has every key column estimated at 200 distinct values; the planner then reads a
/// batch of 1,000 keys by hashing a sequential scan of the whole table, or by
/// re-scanning a materialised partial index per key: seconds per batch at 20,000
/// rows, against milliseconds for the lookups.
enum PostgresTables {
    static let tokenColumns = StoreColumns.token
    static let activityColumns = StoreColumns.activity
    static let recordColumns = StoreColumns.record

    static func prefixed(_ columns: String, _ alias: String) -> String {
        columns.split(separator: ",").map { "\(alias).\($0.trimmingCharacters())" }.joined(separator: ", ")
    }

    /// `FROM <keys> CROSS JOIN LATERAL (SELECT <columns> FROM <table> <alias> WHERE <match> OFFSET 0) <alias>`:
    /// one index lookup per key, whatever the statistics say (see above).
    static func perKey(_ keys: String, _ columns: String, from table: String, _ alias: String, where match: String) -> String {
        "FROM \(keys) CROSS JOIN LATERAL (SELECT \(columns) FROM \(table) \(alias) WHERE \(match) OFFSET 0) \(alias)"
    }

    /// Six kinds of token reads in one statement; `q` says which, `i` which key (1-based).
    static let tokensSQL: String = {
        let t = prefixed(tokenColumns, "t")
        func tokens(_ keys: String, _ match: String) -> String { perKey(keys, t, from: "tokens", "t", where: match) }
        return """
            SELECT 0::int4 AS q, k.i, \(t) \(tokens("unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(a, h, i)",
                "t.app_id = k.a AND t.hex = k.h"))
            UNION ALL
            SELECT 1, k.i, \(t) \(tokens("unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS k(a, x, d, i)",
                "t.kind = 0 AND t.app_id = k.a AND t.activity_id = k.x AND t.device_id = k.d"))
            UNION ALL
            SELECT 2, k.i, \(t) \(tokens("unnest($6::text[], $7::text[], $8::text[]) WITH ORDINALITY AS k(a, ty, d, i)",
                "t.kind = 1 AND t.app_id = k.a AND t.attributes_type = k.ty AND t.device_id = k.d"))
            UNION ALL
            SELECT 3, k.i, \(t) \(tokens("unnest($9::text[], $10::text[]) WITH ORDINALITY AS k(a, x, i)",
                "t.kind = 0 AND t.app_id = k.a AND t.activity_id = k.x"))
            UNION ALL
            SELECT 4, k.i, \(t) \(tokens("unnest($11::text[], $12::text[]) WITH ORDINALITY AS k(a, ty, i)",
                "t.kind = 1 AND t.app_id = k.a AND t.attributes_type = k.ty"))
            UNION ALL
            SELECT 5, k.i, \(t) \(tokens("unnest($13::text[], $14::text[], $15::text[]) WITH ORDINALITY AS k(a, u, ty, i)",
                "t.kind = 1 AND t.external_user_id IS NOT NULL AND t.app_id = k.a AND t.external_user_id = k.u AND t.attributes_type = k.ty"))
            """
    }()

    /// The fan-out read: three columns of the slot index (`INCLUDE`), one aggregated value per
    /// activity (``TargetList``), decoded without building a `Token`.
    static let updateTargetsSQL = """
        SELECT k.i, \(TargetList.aggregateSQL) \(perKey("unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(a, x, i)",
            "t.hex, t.environment, t.expires_at", from: "tokens", "t", where: "t.kind = 0 AND t.app_id = k.a AND t.activity_id = k.x"))
            GROUP BY k.i
        """
    /// A start to `all_devices` read as the fan-out is: one aggregated value per (app, type).
    static let pushToStartTargetsSQL = """
        SELECT k.i, \(TargetList.aggregateSQL) \(perKey("unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(a, ty, i)",
            "t.hex, t.environment, t.expires_at", from: "tokens", "t", where: "t.kind = 1 AND t.app_id = k.a AND t.attributes_type = k.ty"))
            GROUP BY k.i
        """

    static let activitiesSQL = """
        SELECT k.i, \(prefixed(activityColumns, "v")) \(perKey("unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(a, x, i)",
            prefixed(activityColumns, "v"), from: "activities", "v", where: "v.app_id = k.a AND v.id = k.x"))
        """
    static let recordsSQL = """
        SELECT k.i, \(prefixed(recordColumns, "r")) \(perKey("unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(a, x, y, i)",
            prefixed(recordColumns, "r"), from: "idempotency_records", "r", where: "r.app_id = k.a AND r.activity_id = k.x AND r.key = k.y"))
        """
    static let activitiesDueSQL =
        "SELECT \(activityColumns) FROM activities WHERE sweep_deadline <= $1 ORDER BY sweep_deadline LIMIT $2"
    /// From the slot index alone (it carries `hex`), stopping at `limit`, as one value
    /// (``UpdateTokenHexList``; NULL for none).
    static let updateTokenHexesSQL = """
        SELECT string_agg(t.hex, ',') FROM
            (SELECT hex FROM tokens WHERE kind = 0 AND app_id = $1 AND activity_id = $2 LIMIT $3) t
        """
    static let tokensExpiredSQL =
        "SELECT \(tokenColumns) FROM tokens WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY expires_at LIMIT $2"

    typealias TokenRow = (String, String, Int16, Int16, String?, String?, String?, String?, Int64, Int64, Int64?)
    typealias ActivityRow = (String, String, String?, String, Int64, String?, Int64, Int64, Int64?, Int64?)
    typealias RecordRow = (String, String, String, String, Int64, Int64, String, ByteBuffer, Int64, String?, String?)

    // MARK: Reads

    /// Answers every key in `keys` (an absent row answers nil or []): at most
    /// three statements plus one per sweep read, whatever the number of keys.
    static func fetch(
        _ keys: some Collection<ReadKey>, on session: PostgresSession
    ) async throws -> [ReadKey: ReadValue] {
        var answers: [ReadKey: ReadValue] = [:]
        var tokenQueries = Array(repeating: [ReadKey](), count: 6)
        var tokenArrays = Array(repeating: [String](), count: 15)
        var activityKeys: [ReadKey] = [], activityArrays: ([String], [String]) = ([], [])
        var recordKeys: [ReadKey] = [], recordArrays: ([String], [String], [String]) = ([], [], [])
        var targetKeys: [ReadKey] = [], targetArrays: ([String], [String]) = ([], [])
        var startKeys: [ReadKey] = [], startArrays: ([String], [String]) = ([], [])
        for key in keys {
            switch key {
            case let .token(k):
                tokenQueries[0].append(key); tokenArrays[0].append(k.appID); tokenArrays[1].append(k.hex)
                answers[key] = .token(nil)
            case let .slot(.update(app, activity, device)):
                tokenQueries[1].append(key); tokenArrays[2].append(app); tokenArrays[3].append(activity); tokenArrays[4].append(device)
                answers[key] = .token(nil)
            case let .slot(.pushToStart(app, device, type)):
                tokenQueries[2].append(key); tokenArrays[5].append(app); tokenArrays[6].append(type); tokenArrays[7].append(device)
                answers[key] = .token(nil)
            case let .updateTokens(a):
                tokenQueries[3].append(key); tokenArrays[8].append(a.appID); tokenArrays[9].append(a.activityID)
                answers[key] = .tokens([])
            case let .updateTargets(a):
                targetKeys.append(key); targetArrays.0.append(a.appID); targetArrays.1.append(a.activityID)
                answers[key] = .targets([])
            case let .pushToStartTargets(app, type):
                startKeys.append(key); startArrays.0.append(app); startArrays.1.append(type)
                answers[key] = .targets([])
            case let .pushToStartOfType(app, type):
                tokenQueries[4].append(key); tokenArrays[10].append(app); tokenArrays[11].append(type)
                answers[key] = .tokens([])
            case let .pushToStartOfUser(app, user, type):
                tokenQueries[5].append(key); tokenArrays[12].append(app); tokenArrays[13].append(user); tokenArrays[14].append(type)
                answers[key] = .tokens([])
            case let .activity(a):
                activityKeys.append(key); activityArrays.0.append(a.appID); activityArrays.1.append(a.activityID)
                answers[key] = .activity(nil)
            case let .record(a, k):
                recordKeys.append(key); recordArrays.0.append(a.appID); recordArrays.1.append(a.activityID); recordArrays.2.append(k)
                answers[key] = .record(nil)
            case let .activitiesDue(now, limit):
                var binds = PostgresBindings(capacity: 2)
                binds.append(now); binds.append(Int64(limit))
                var found: [Activity] = []
                for row in try await session.query(PostgresQuery(unsafeSQL: activitiesDueSQL, binds: binds)) {
                    found.append(try activity(try row.decode(ActivityRow.self)))
                }
                answers[key] = .activities(found)
            case let .updateTokenHexes(a, limit):
                var binds = PostgresBindings(capacity: 3)
                binds.append(a.appID); binds.append(a.activityID); binds.append(Int64(limit))
                var found: [String] = []
                for row in try await session.query(PostgresQuery(unsafeSQL: updateTokenHexesSQL, binds: binds)) {
                    if let list = try row.decode(ByteBuffer?.self) { found += try UpdateTokenHexList.parse(list) }
                }
                answers[key] = .hexes(found)
            case let .tokensExpired(now, limit):
                var binds = PostgresBindings(capacity: 2)
                binds.append(now); binds.append(Int64(limit))
                var found: [Token] = []
                for row in try await session.query(PostgresQuery(unsafeSQL: tokensExpiredSQL, binds: binds)) {
                    found.append(try token(try row.decode(TokenRow.self)))
                }
                answers[key] = .tokens(found)
            case let .claimableIntents(owner, upTo, now, limit):
                answers[key] = .intents(try await claimableIntents(owner: owner, upTo: upTo, now: now, limit: limit, on: session))
            }
        }
        if tokenQueries.contains(where: { !$0.isEmpty }) {
            var binds = PostgresBindings(capacity: 15)
            for array in tokenArrays { binds.append(array) }
            var lists: [ReadKey: [Token]] = [:]
            for row in try await session.query(PostgresQuery(unsafeSQL: tokensSQL, binds: binds)) {
                let (q, i, columns) = splitRow(try row.decode(Tuple13.self))
                let key = tokenQueries[Int(q)][Int(i) - 1]
                let value = try token(columns)
                if q < 3 { answers[key] = .token(value) } else { lists[key, default: []].append(value) }
            }
            for (key, tokens) in lists { answers[key] = .tokens(tokens) }
        }
        for (sql, keys, arrays) in [(updateTargetsSQL, targetKeys, targetArrays), (pushToStartTargetsSQL, startKeys, startArrays)]
        where !keys.isEmpty {
            var binds = PostgresBindings(capacity: 2)
            binds.append(arrays.0); binds.append(arrays.1)
            for row in try await session.query(PostgresQuery(unsafeSQL: sql, binds: binds)) {
                let (i, list) = try row.decode((Int64, ByteBuffer).self)
                answers[keys[Int(i) - 1]] = .targets(try TargetList.parse(list))
            }
        }
        if !activityKeys.isEmpty {
            var binds = PostgresBindings(capacity: 2)
            binds.append(activityArrays.0); binds.append(activityArrays.1)
            for row in try await session.query(PostgresQuery(unsafeSQL: activitiesSQL, binds: binds)) {
                let r = try row.decode((Int64, String, String, String?, String, Int64, String?, Int64, Int64, Int64?, Int64?).self)
                answers[activityKeys[Int(r.0) - 1]] = .activity(try activity((r.1, r.2, r.3, r.4, r.5, r.6, r.7, r.8, r.9, r.10)))
            }
        }
        if !recordKeys.isEmpty {
            var binds = PostgresBindings(capacity: 3)
            binds.append(recordArrays.0); binds.append(recordArrays.1); binds.append(recordArrays.2)
            for row in try await session.query(PostgresQuery(unsafeSQL: recordsSQL, binds: binds)) {
                let r = try row.decode(
                    (Int64, String, String, String, String, Int64, Int64, String, ByteBuffer, Int64, String?, String?).self)
                answers[recordKeys[Int(r.0) - 1]] = .record(try record((r.1, r.2, r.3, r.4, r.5, r.6, r.7, r.8, r.9, r.10, r.11)))
            }
        }
        return answers
    }

    // MARK: Rows

    static func token(_ r: TokenRow) throws -> Token {
        Token(
            kind: r.2 == 0 ? .update : .pushToStart, hex: r.1, environment: r.3 == 0 ? .sandbox : .production, appID: r.0,
            attributesType: r.4, activityID: r.5, externalUserID: r.6, deviceID: r.7,
            createdAt: UnixTime(milliseconds: r.8), updatedAt: UnixTime(milliseconds: r.9),
            expiresAt: r.10.map(UnixTime.init(milliseconds:)))
    }

    static func activity(_ r: ActivityRow) throws -> Activity {
        guard let state = Activity.State(rawValue: r.3) else { throw PostgresStoreError.corruptRow("activity state \"\(r.3)\"") }
        return Activity(
            appID: r.0, id: r.1, attributesType: r.2, state: state, lastTimestamp: r.4, lastContentState: r.5,
            createdAt: UnixTime(milliseconds: r.6), expiresAt: UnixTime(milliseconds: r.7),
            endedAt: r.8.map(UnixTime.init(milliseconds:)), dismissAt: r.9.map(UnixTime.init(milliseconds:)))
    }

    static func record(_ r: RecordRow) throws -> IdempotencyRecord {
        guard let operation = IdempotentOperation(rawValue: r.3), let state = Activity.State(rawValue: r.6),
            var reply = r.9.map({ StoredReply(timestamp: r.5, state: state, targetsJSON: $0) })
                ?? StoredReply(timestamp: r.5, state: state, legacySummary: Array(buffer: r.7))
        else { throw PostgresStoreError.corruptRow("idempotency record \(r.0)/\(r.1)/\(r.2)") }
        if let json = r.10 {
            guard let account = StoredReply.account(json: json) else {
                throw PostgresStoreError.corruptRow("idempotency record account \(r.0)/\(r.1)/\(r.2)")
            }
            reply.account = account
        }
        return IdempotencyRecord(
            appID: r.0, activityID: r.1, key: r.2, operation: operation, fingerprint: UInt64(bitPattern: r.4),
            reply: reply, createdAt: UnixTime(milliseconds: r.8))
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> Substring {
        var s = self
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return s
    }
}

extension String {
    fileprivate func trimmingCharacters() -> Substring { Substring(self).trimmingCharacters() }
}

/// A token row with its (q, i) prefix, as the token query returns it.
typealias Tuple13 = (Int32, Int64, String, String, Int16, Int16, String?, String?, String?, String?, Int64, Int64, Int64?)

private func splitRow(_ r: Tuple13) -> (Int32, Int64, PostgresTables.TokenRow) {
    (r.0, r.1, (r.2, r.3, r.4, r.5, r.6, r.7, r.8, r.9, r.10, r.11, r.12))
}
