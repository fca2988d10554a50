import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import Logging
import PostgresNIO

/// The batch's changes to `dispatch_intents` (schema version 3), kept like
/// the other tables' in ``PostgresOverlay``: later plans of the batch read
/// through them, and the batch writes them with one statement per kind.
struct PostgresIntentOverlay {
    /// nil = deleted.
    private var rows: [IntentKey: DispatchIntent?] = [:]
    /// Leases of rows the batch did not put (claimed from the database).
    private var leases: [IntentKey: (owner: String, until: UnixTime)] = [:]
    /// The newest update or end put per activity: the rows it supersedes are deleted (``DispatchIntent/isSuperseded(by:)``).
    private var superseding: [ActivityKey: DispatchIntent] = [:]
    /// Renewals of rows the batch did not put nor lease: applied only where the owner still holds the row.
    private var renewals: [IntentKey: (owner: String, until: UnixTime)] = [:]

    var isEmpty: Bool { rows.isEmpty && leases.isEmpty && superseding.isEmpty && renewals.isEmpty }
    var count: Int { rows.count + leases.count }

    mutating func apply(_ write: StoreWrite) {
        switch write {
        case let .putIntent(intent):
            if intent.event != .start {
                let activity = intent.key.activity
                if (superseding[activity]?.key.timestamp ?? .min) < intent.key.timestamp { superseding[activity] = intent }
                for case let (key, .some(row)) in rows where row.isSuperseded(by: intent) { rows[key] = .some(nil) }
            }
            leases[intent.key] = nil
            rows[intent.key] = .some(intent)
        case let .deleteIntent(key):
            leases[key] = nil
            rows[key] = .some(nil)
        case let .leaseIntent(key, owner, until):
            if case .some(.some(var row)) = rows[key] {
                row.owner = owner
                row.leaseUntil = until
                rows[key] = .some(row)
            } else if rows[key] == nil {
                leases[key] = (owner, until)
            }
        case let .renewIntent(key, owner, until):
            if case .some(.some(var row)) = rows[key] {
                if row.owner == owner {
                    row.leaseUntil = until
                    rows[key] = .some(row)
                }
            } else if let lease = leases[key] {
                if lease.owner == owner { leases[key]?.until = until }
            } else if rows[key] == nil {
                renewals[key] = (owner, until)
            }
        default:
            preconditionFailure("not an intent write: \(write)")
        }
    }

    /// Database rows as the batch left them, plus the batch's own rows that match.
    func merge(_ fromDatabase: [DispatchIntent], where matches: (DispatchIntent) -> Bool) -> [DispatchIntent] {
        var merged: [DispatchIntent] = []
        for var intent in fromDatabase where rows[intent.key] == nil {
            if let newer = superseding[intent.key.activity], intent.isSuperseded(by: newer) { continue }
            if let lease = leases[intent.key] {
                intent.owner = lease.owner
                intent.leaseUntil = lease.until
            }
            if let renewal = renewals[intent.key], renewal.owner == intent.owner { intent.leaseUntil = renewal.until }
            if matches(intent) { merged.append(intent) }
        }
        for case let .some(intent) in rows.values where matches(intent) { merged.append(intent) }
        return merged
    }

    // MARK: Writing

    static let supersedeSQL = """
        DELETE FROM dispatch_intents d USING unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::int8[]) AS k(a, x, ts, o, c)
        WHERE d.app_id = k.a AND d.activity_id = k.x AND d.event = 'update' AND d.timestamp < k.ts
            AND (d.owner = k.o OR d.lease_until <= k.c) AND d.targets IS NULL
        """
    /// The older updates with a target list (a channel): read, and deleted only if the newer one reaches every target.
    static let supersedableSQL = """
        SELECT \(StoreColumns.intent) FROM dispatch_intents d,
            unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::int8[]) AS k(a, x, ts, o, c)
        WHERE d.app_id = k.a AND d.activity_id = k.x AND d.event = 'update' AND d.timestamp < k.ts
            AND (d.owner = k.o OR d.lease_until <= k.c) AND d.targets IS NOT NULL
        """
    static let deleteSQL = """
        DELETE FROM dispatch_intents d USING unnest($1::text[], $2::text[], $3::int8[]) AS k(a, x, ts)
        WHERE d.app_id = k.a AND d.activity_id = k.x AND d.timestamp = k.ts
        """
    static let putSQL = """
        INSERT INTO dispatch_intents (\(StoreColumns.intent))
        SELECT a, x, ts, v, ev, p, tp, pr, ex, CASE WHEN ea_n THEN NULL ELSE ea END, CASE WHEN tg_n THEN NULL ELSE tg END,
               c, CASE WHEN o_n THEN NULL ELSE o END, lu
        FROM unnest($1::text[], $2::text[], $3::int8[], $4::int4[], $5::text[], $6::bytea[], $7::text[], $8::int2[], $9::int8[],
                    $10::int8[], $11::bool[], $12::bytea[], $13::bool[], $14::int8[], $15::text[], $16::bool[], $17::int8[])
            AS r(a, x, ts, v, ev, p, tp, pr, ex, ea, ea_n, tg, tg_n, c, o, o_n, lu)
        ON CONFLICT (app_id, activity_id, timestamp) DO UPDATE SET
            version = excluded.version, event = excluded.event, payload = excluded.payload, topic = excluded.topic,
            priority = excluded.priority, expiration = excluded.expiration, expires_at = excluded.expires_at,
            targets = excluded.targets, created_at = excluded.created_at, owner = excluded.owner, lease_until = excluded.lease_until
        """
    static let leaseSQL = """
        UPDATE dispatch_intents d SET owner = k.o, lease_until = k.lu
        FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::int8[]) AS k(a, x, ts, o, lu)
        WHERE d.app_id = k.a AND d.activity_id = k.x AND d.timestamp = k.ts
        """
    static let renewSQL = """
        UPDATE dispatch_intents d SET lease_until = k.lu
        FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::int8[]) AS k(a, x, ts, o, lu)
        WHERE d.app_id = k.a AND d.activity_id = k.x AND d.timestamp = k.ts AND d.owner = k.o
        """

    /// Supersessions and deletions first, then upserts, leases and renewals, each in key order.
    func write(on session: PostgresSession) async throws {
        func run(_ sql: String, _ binds: PostgresBindings) async throws {
            try await session.query(PostgresQuery(unsafeSQL: sql, binds: binds))
        }
        func keyBindings(_ keys: [IntentKey]) -> PostgresBindings {
            var b = PostgresBindings(capacity: 5)
            b.append(keys.map(\.appID)); b.append(keys.map(\.activityID)); b.append(keys.map(\.timestamp))
            return b
        }
        let order = { (a: IntentKey, b: IntentKey) in (a.appID, a.activityID, a.timestamp) < (b.appID, b.activityID, b.timestamp) }
        func supersessionBindings(_ newer: [DispatchIntent]) -> PostgresBindings {
            var b = keyBindings(newer.map(\.key))
            b.append(newer.map { $0.owner ?? "" }); b.append(newer.map { session.databaseTime($0.createdAt.milliseconds) })
            return b
        }
        // ``DispatchIntent/isSuperseded(by:)``: an older update to the tokens alone goes once a newer one reaches
        // the tokens; one to a channel only once a newer one reaches every target of it.
        let newer = superseding.values.sorted { order($0.key, $1.key) }
        let reachingTokens = newer.filter { $0.targets == nil || $0.withUpdateTokens || $0.event == .end }
        if !reachingTokens.isEmpty { try await run(Self.supersedeSQL, supersessionBindings(reachingTokens)) }
        var superseded: [IntentKey] = []
        let withChannels = newer.filter { $0.targets?.contains(where: \.isChannel) == true }
        if !withChannels.isEmpty {
            let query = PostgresQuery(unsafeSQL: Self.supersedableSQL, binds: supersessionBindings(withChannels))
            for row in try await session.query(query) {
                let older = PostgresTables.intent(try row.decode(PostgresTables.IntentRow.self), on: session)
                if let newest = superseding[older.key.activity], older.isSuperseded(by: newest) { superseded.append(older.key) }
            }
        }
        let deleted = (rows.filter { $0.value == nil }.map(\.key) + superseded).sorted(by: order)
        if !deleted.isEmpty { try await run(Self.deleteSQL, keyBindings(deleted)) }
        let put = rows.values.compactMap { $0 }.sorted { order($0.key, $1.key) }
        if !put.isEmpty {
            var b = keyBindings(put.map(\.key))
            b.append(put.map { Int32($0.version) }); b.append(put.map(\.event.rawValue))
            b.append(put.map { ByteBuffer(bytes: $0.payload.bytes) }); b.append(put.map(\.topic))
            b.append(put.map { Int16($0.priority) }); b.append(put.map(\.expiration))
            b.append(put.map { $0.expiresAt?.milliseconds ?? 0 }); b.append(put.map { $0.expiresAt == nil })
            b.append(put.map { ByteBuffer(bytes: $0.encodedTargets ?? []) }); b.append(put.map { $0.targets == nil })
            b.append(put.map(\.createdAt.milliseconds))
            b.append(put.map { $0.owner ?? "" }); b.append(put.map { $0.owner == nil })
            b.append(put.map { session.databaseTime($0.leaseUntil.milliseconds) })
            try await run(Self.putSQL, b)
        }
        if !leases.isEmpty {
            let leased = leases.sorted { order($0.key, $1.key) }
            var b = keyBindings(leased.map(\.key))
            b.append(leased.map(\.value.owner)); b.append(leased.map { session.databaseTime($0.value.until.milliseconds) })
            try await run(Self.leaseSQL, b)
        }
        if !renewals.isEmpty {
            let renewed = renewals.sorted { order($0.key, $1.key) }
            var b = keyBindings(renewed.map(\.key))
            b.append(renewed.map(\.value.owner)); b.append(renewed.map { session.databaseTime($0.value.until.milliseconds) })
            try await run(Self.renewSQL, b)
        }
    }
}

extension PostgresTables {
    /// `FOR UPDATE SKIP LOCKED`: a row another node's transaction is claiming
    /// right now is passed over instead of waited for (that claim wins; the
    /// serializable transaction still refuses any claim that would overlap).
    /// ``DispatchIntent/isClaimable(by:evenIfLeased:at:)``: `$2` is now, or the largest value with `evenIfLeased`; `$4` is now.
    static let claimableIntentsSQL = """
        SELECT \(StoreColumns.intent) FROM dispatch_intents
        WHERE lease_until <= $2 AND (owner IS NULL OR owner <> $1 OR lease_until <= $4) ORDER BY lease_until, created_at LIMIT $3
        FOR UPDATE SKIP LOCKED
        """

    typealias IntentRow = (
        String, String, Int64, Int32, String, ByteBuffer, String, Int16, Int64, Int64?, ByteBuffer?, Int64, String?, Int64
    )

    static func claimableIntents(
        owner: String, upTo: Int64, now: Int64, limit: Int, on session: PostgresSession
    ) async throws -> [DispatchIntent] {
        var binds = PostgresBindings(capacity: 4)
        binds.append(owner); binds.append(session.databaseTime(upTo)); binds.append(Int64(limit))
        binds.append(session.databaseTime(now))
        var found: [DispatchIntent] = []
        for row in try await session.query(PostgresQuery(unsafeSQL: claimableIntentsSQL, binds: binds)) {
            found.append(intent(try row.decode(IntentRow.self), on: session))
        }
        return found
    }

    /// What cannot be read becomes the intent's ``DispatchIntent/damage``, so the claim reports and drops it.
    /// The lease is read in the node's time (``PostgresSession/nodeTime(_:)``).
    static func intent(_ r: IntentRow, on session: PostgresSession) -> DispatchIntent {
        let event = APNsEvent(rawValue: r.4)
        let decoded = r.10.map { DispatchIntent.decodeTargets(Array(buffer: $0)) }
        let targets = decoded.map { $0?.targets }
        var intent = DispatchIntent(
            key: IntentKey(appID: r.0, activityID: r.1, timestamp: r.2), event: event ?? .update,
            payload: APNsPayload(bytes: Array(buffer: r.5)), topic: r.6, priority: Int(r.7), expiration: r.8,
            expiresAt: r.9.map(UnixTime.init(milliseconds:)), targets: targets ?? nil,
            createdAt: UnixTime(milliseconds: r.11), owner: r.12, leaseUntil: UnixTime(milliseconds: session.nodeTime(r.13)),
            version: Int(r.3))
        if event == nil { intent.damage = "IntentDamaged(event \(r.4))" }
        if case .some(nil) = targets { intent.damage = "IntentDamaged(targets)" }
        intent.withUpdateTokens = decoded??.withUpdateTokens ?? false
        return intent
    }
}
