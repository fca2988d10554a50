import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore

/// The `feed_events` and `event_feeds` tables (schema version 6): the apps'
/// event feeds, their pages and their retention.
extension SQLiteTables {
    enum EventSQL {
        /// The cursor is the rowid SQLite hands out; a key the app's feed still holds ignores the row.
        static let append = SQLiteQuery(
            37, "INSERT OR IGNORE INTO feed_events (app_id, time_ms, dedupe_key, body) VALUES (?1, ?2, ?3, ?4)")
        static let page = SQLiteQuery(
            38,
            """
            SELECT cursor, time_ms, dedupe_key, body FROM feed_events INDEXED BY feed_events_app
            WHERE app_id = ?1 AND cursor > ?2 ORDER BY cursor LIMIT ?3
            """)
        static let trimmedThrough = SQLiteQuery(39, "SELECT trimmed_through FROM event_feeds WHERE app_id = ?1")
        /// The apps with events, one index step each (a skip over the index, not a scan of its rows).
        static let firstApp = SQLiteQuery(40, "SELECT app_id FROM feed_events INDEXED BY feed_events_app ORDER BY app_id LIMIT 1")
        static let nextApp = SQLiteQuery(
            41, "SELECT app_id FROM feed_events INDEXED BY feed_events_app WHERE app_id > ?1 ORDER BY app_id LIMIT 1")
        /// The newest event beyond the `?2` kept by count.
        static let cutByCount = SQLiteQuery(
            42, "SELECT cursor FROM feed_events INDEXED BY feed_events_app WHERE app_id = ?1 ORDER BY cursor DESC LIMIT 1 OFFSET ?2")
        /// The oldest event young enough to keep: everything before it goes (a feed is trimmed from its start).
        static let firstKeptByAge = SQLiteQuery(
            43,
            "SELECT cursor FROM feed_events INDEXED BY feed_events_app WHERE app_id = ?1 AND time_ms >= ?2 ORDER BY cursor LIMIT 1")
        static let lastCursor = SQLiteQuery(44, "SELECT max(cursor) FROM feed_events INDEXED BY feed_events_app WHERE app_id = ?1")
        /// The highest cursor of the next `?3` events up to `?2`: one chunk of a trim.
        static let chunkEnd = SQLiteQuery(
            45,
            """
            SELECT max(cursor) FROM (
                SELECT cursor FROM feed_events INDEXED BY feed_events_app WHERE app_id = ?1 AND cursor <= ?2 ORDER BY cursor LIMIT ?3)
            """)
        static let delete = SQLiteQuery(46, "DELETE FROM feed_events WHERE app_id = ?1 AND cursor <= ?2")
        static let markTrimmed = SQLiteQuery(
            47,
            """
            INSERT INTO event_feeds (app_id, trimmed_through) VALUES (?1, ?2)
            ON CONFLICT (app_id) DO UPDATE SET trimmed_through = max(trimmed_through, excluded.trimmed_through)
            """)
    }

    func appendEvent(_ event: FeedEvent) throws(SQLiteError) {
        try db.run(EventSQL.append) {
            $0.bind(1, event.appID); $0.bind(2, event.time.milliseconds); $0.bind(3, event.dedupeKey)
            $0.bind(4, event.bodyJSON)
        }
    }

    /// A page of the app's feed; the caller reads it inside one transaction, so the entries and the
    /// retention mark are of one snapshot. Rows this build cannot read are skipped.
    func events(appID: String, after cursor: UInt64, limit: Int) throws(SQLiteError) -> EventPage {
        let limit = max(0, limit)
        let rows = try db.query(
            EventSQL.page,
            {
                $0.bind(1, appID); $0.bind(2, Int64(clamping: cursor)); $0.bind(3, Int64(limit) + 1)
            },
            row: { s in
                (
                    cursor: UInt64(s.int64(0)),
                    event: FeedEvent(
                        appID: appID, time: UnixTime(milliseconds: s.int64(1)), dedupeKey: s.optionalString(2),
                        bodyJSON: s.string(3))
                )
            })
        let trimmed = try db.queryFirst(EventSQL.trimmedThrough, { $0.bind(1, appID) }, row: { $0.int64(0) }) ?? 0
        var entries: [FeedEntry] = []
        entries.reserveCapacity(min(rows.count, limit))
        for row in rows.prefix(limit) {
            if let event = row.event { entries.append(FeedEntry(cursor: row.cursor, event: event)) }
        }
        return EventPage(
            entries: entries, trimmedThrough: UInt64(max(0, trimmed)), more: rows.count > limit,
            scannedThrough: rows.prefix(limit).last?.cursor ?? 0)
    }

    /// The app's last cursor: its newest event's, or the retention mark once every event is gone
    /// (cursors are never handed out twice: AUTOINCREMENT). The caller reads it inside one transaction.
    func lastEventCursor(appID: String) throws(SQLiteError) -> UInt64 {
        let last = try db.queryFirst(EventSQL.lastCursor, { $0.bind(1, appID) }, row: { $0.optionalInt64(0) }) ?? nil
        let trimmed = try db.queryFirst(EventSQL.trimmedThrough, { $0.bind(1, appID) }, row: { $0.int64(0) }) ?? 0
        return UInt64(max(0, last ?? 0, trimmed))
    }

    /// Deletes, app by app, each feed's events older than `before` and those beyond its newest `keep`
    /// (from the start of the feed, as the memory store does), at most `limit` in all; answers how
    /// many went. Fewer than `limit` means every feed is trimmed.
    func trimEvents(before: UnixTime, keep: Int, limit: Int) throws(SQLiteError) -> Int {
        var deleted = 0
        var app = try db.queryFirst(EventSQL.firstApp, row: { $0.string(0) })
        while let appID = app, deleted < limit {
            let byCount =
                try db.queryFirst(
                    EventSQL.cutByCount,
                    {
                        $0.bind(1, appID); $0.bind(2, Int64(max(0, keep)))
                    }, row: { $0.int64(0) })
                ?? 0
            let byAge: Int64
            if let kept = try db.queryFirst(
                EventSQL.firstKeptByAge,
                {
                    $0.bind(1, appID); $0.bind(2, before.milliseconds)
                }, row: { $0.int64(0) })
            {
                byAge = kept - 1
            } else {
                let last = try db.queryFirst(EventSQL.lastCursor, { $0.bind(1, appID) }, row: { $0.optionalInt64(0) })
                byAge = (last ?? nil) ?? 0
            }
            let through = max(byCount, byAge)
            if through > 0,
                let end = try db.queryFirst(
                    EventSQL.chunkEnd,
                    {
                        $0.bind(1, appID); $0.bind(2, through); $0.bind(3, Int64(limit - deleted))
                    },
                    row: { $0.optionalInt64(0) }) ?? nil
            {
                try db.run(EventSQL.delete) {
                    $0.bind(1, appID); $0.bind(2, end)
                }
                deleted += db.changes
                try db.run(EventSQL.markTrimmed) {
                    $0.bind(1, appID); $0.bind(2, end)
                }
            }
            app = try db.queryFirst(EventSQL.nextApp, { $0.bind(1, appID) }, row: { $0.string(0) })
        }
        return deleted
    }
}
