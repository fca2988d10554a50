import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore

/// The `dispatch_intents` table (schema version 3): ``DispatchIntent`` rows,
/// their leases, and the claim query that resumes them.
extension SQLiteTables {
    enum IntentSQL {
        static let columns = StoreColumns.intent
        static let put = SQLiteQuery(
            22, "INSERT OR REPLACE INTO dispatch_intents (\(columns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)")
        /// The older updates to the update tokens alone (no target list): superseded by any newer update that reaches the tokens.
        static let supersede = SQLiteQuery(
            23,
            """
            DELETE FROM dispatch_intents
            WHERE app_id = ?1 AND activity_id = ?2 AND event = 'update' AND timestamp < ?3 AND (owner = ?4 OR lease_until <= ?5)
                AND targets IS NULL
            """)
        /// The older updates with a target list (a channel): read, and deleted only if the newer one reaches every target.
        static let supersedable = SQLiteQuery(
            31,
            """
            SELECT \(columns) FROM dispatch_intents
            WHERE app_id = ?1 AND activity_id = ?2 AND event = 'update' AND timestamp < ?3 AND (owner = ?4 OR lease_until <= ?5)
                AND targets IS NOT NULL
            """)
        static let delete = SQLiteQuery(24, "DELETE FROM dispatch_intents WHERE app_id = ?1 AND activity_id = ?2 AND timestamp = ?3")
        static let lease = SQLiteQuery(
            25, "UPDATE dispatch_intents SET owner = ?4, lease_until = ?5 WHERE app_id = ?1 AND activity_id = ?2 AND timestamp = ?3")
        static let renew = SQLiteQuery(
            26,
            "UPDATE dispatch_intents SET lease_until = ?5 WHERE app_id = ?1 AND activity_id = ?2 AND timestamp = ?3 AND owner = ?4")
        /// ``DispatchIntent/isClaimable(by:evenIfLeased:at:)``: `?2` is now, or the largest value with `evenIfLeased`.
        static let claimable = SQLiteQuery(
            27,
            """
            SELECT \(columns) FROM dispatch_intents INDEXED BY dispatch_intents_lease
            WHERE lease_until <= ?2 AND (owner IS NULL OR owner != ?1 OR lease_until <= ?4)
            ORDER BY lease_until, created_at LIMIT ?3
            """)
    }

    func writeIntent(_ write: StoreWrite) throws(SQLiteError) {
        switch write {
        case let .putIntent(intent):
            if intent.event != .start { try supersede(by: intent) }
            try db.run(IntentSQL.put) { s in
                s.bind(1, intent.key.appID)
                s.bind(2, intent.key.activityID)
                s.bind(3, intent.key.timestamp)
                s.bind(4, Int64(intent.version))
                s.bind(5, intent.event.rawValue)
                s.bind(6, intent.payload.bytes)
                s.bind(7, intent.topic)
                s.bind(8, Int64(intent.priority))
                s.bind(9, intent.expiration)
                s.bind(10, intent.expiresAt?.milliseconds)
                if let targets = intent.encodedTargets { s.bind(11, targets) }  // else NULL
                s.bind(12, intent.createdAt.milliseconds)
                s.bind(13, intent.owner)
                s.bind(14, intent.leaseUntil.milliseconds)
            }
        case let .deleteIntent(key):
            try db.run(IntentSQL.delete) {
                $0.bind(1, key.appID); $0.bind(2, key.activityID); $0.bind(3, key.timestamp)
            }
        case let .leaseIntent(key, owner, until):
            try db.run(IntentSQL.lease) {
                $0.bind(1, key.appID); $0.bind(2, key.activityID); $0.bind(3, key.timestamp)
                $0.bind(4, owner); $0.bind(5, until.milliseconds)
            }
        case let .renewIntent(key, owner, until):
            try db.run(IntentSQL.renew) {
                $0.bind(1, key.appID); $0.bind(2, key.activityID); $0.bind(3, key.timestamp)
                $0.bind(4, owner); $0.bind(5, until.milliseconds)
            }
        default:
            preconditionFailure("not an intent write: \(write)")
        }
    }

    /// Deletes the older update intents `newer` supersedes (``DispatchIntent/isSuperseded(by:)``): an
    /// older update to the tokens alone if `newer` reaches the tokens, one to a channel only if `newer`
    /// reaches every target of it (a newer update to the tokens alone leaves a channel's subscribers needing it).
    private func supersede(by newer: DispatchIntent) throws(SQLiteError) {
        let bind = { (s: SQLiteStatement) in
            s.bind(1, newer.key.appID); s.bind(2, newer.key.activityID); s.bind(3, newer.key.timestamp)
            s.bind(4, newer.owner); s.bind(5, newer.createdAt.milliseconds)
        }
        if newer.targets == nil || newer.withUpdateTokens || newer.event == .end { try db.run(IntentSQL.supersede, bind) }
        // Only a newer intent with a channel can reach every target of an older one with a list.
        guard newer.targets?.contains(where: \.isChannel) == true else { return }
        for older in try db.query(IntentSQL.supersedable, bind, row: Self.intent(from:)) where older.isSuperseded(by: newer) {
            try db.run(IntentSQL.delete) {
                $0.bind(1, older.key.appID); $0.bind(2, older.key.activityID); $0.bind(3, older.key.timestamp)
            }
        }
    }

    /// With `evenIfLeased`, every lease counts as over: the bound on `lease_until` is the largest value.
    func claimableIntents(by owner: String, evenIfLeased: Bool, at now: UnixTime, limit: Int) throws(SQLiteError) -> [DispatchIntent] {
        try db.query(
            IntentSQL.claimable,
            {
                $0.bind(1, owner); $0.bind(2, evenIfLeased ? Int64.max : now.milliseconds); $0.bind(3, Int64(limit))
                $0.bind(4, now.milliseconds)
            }, row: Self.intent(from:))
    }

    /// A row as an intent; what cannot be read becomes its ``DispatchIntent/damage``, so the claim reports and drops it.
    static func intent(from s: SQLiteStatement) -> DispatchIntent {
        let event = APNsEvent(rawValue: s.string(4))
        var targets: [PushTarget]?
        var withUpdateTokens = false
        var damage: String?
        if event == nil { damage = "IntentDamaged(event \(s.string(4)))" }
        if !s.isNull(10) {
            let decoded = DispatchIntent.decodeTargets(s.blob(10))
            targets = decoded?.targets
            withUpdateTokens = decoded?.withUpdateTokens ?? false
            if decoded == nil { damage = "IntentDamaged(targets)" }
        }
        var intent = DispatchIntent(
            key: IntentKey(appID: s.string(0), activityID: s.string(1), timestamp: s.int64(2)), event: event ?? .update,
            payload: APNsPayload(bytes: s.blob(5)), topic: s.string(6), priority: Int(s.int64(7)), expiration: s.int64(8),
            expiresAt: s.optionalInt64(9).map(UnixTime.init(milliseconds:)), targets: targets,
            createdAt: UnixTime(milliseconds: s.int64(11)), owner: s.optionalString(12),
            leaseUntil: UnixTime(milliseconds: s.int64(13)), version: Int(s.int64(3)))
        intent.damage = damage
        intent.withUpdateTokens = withUpdateTokens
        return intent
    }
}
