import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import PostgresNIO

/// The batch's events for `feed_events` (schema version 6), in the order its
/// plans appended them. No plan reads a feed, so nothing reads through them:
/// they are written after every other table, as late before `COMMIT` as can be.
struct PostgresEventOverlay {
    private(set) var events: [FeedEvent] = []
    /// De-duplication keys already appended by the batch, per app: a second event with one is dropped here.
    private var keys: Set<[String]> = []

    var isEmpty: Bool { events.isEmpty }

    /// The apps whose feeds the batch appends to.
    var appIDs: Set<String> { Set(events.map(\.appID)) }

    mutating func append(_ event: FeedEvent) {
        if let key = event.dedupeKey, !keys.insert([event.appID, key]).inserted { return }
        events.append(event)
    }

    /// Each app's transaction-scoped advisory lock, in app order (so two batches never wait on
    /// each other in a cycle): held until this transaction ends, so a batch that appends to the
    /// app after it takes its cursors only once this one's are committed and visible.
    static let lockSQL = """
        SELECT pg_advisory_xact_lock(hashtext('liverelay.feed.' || current_schema()), hashtext(a))
        FROM unnest($1::text[]) AS a ORDER BY a
        """
    /// Cursors taken in the events' order (a volatile function runs after the sort); a key the app's
    /// feed holds drops the row, and the cursor it took is simply never used.
    static let insertSQL = """
        INSERT INTO feed_events (app_id, cursor, time_ms, dedupe_key, body)
        SELECT a, nextval('feed_events_cursor'), t, CASE WHEN k_n THEN NULL ELSE k END, b
        FROM unnest($1::text[], $2::int8[], $3::text[], $4::bool[], $5::text[]) WITH ORDINALITY AS r(a, t, k, k_n, b, n)
        ORDER BY n
        ON CONFLICT (app_id, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
        """

    /// Why a lock and a sequence rather than a counter row per app: batches run SERIALIZABLE,
    /// where a row updated by a transaction that committed meanwhile fails the second updater
    /// (40001), so two batches of one app overlapping at all would make one start over; an
    /// advisory lock only makes the second wait for the first's commit.
    func write(on session: PostgresSession) async throws {
        guard !events.isEmpty else { return }
        var lock = PostgresBindings(capacity: 1)
        lock.append(appIDs.sorted())
        try await session.query(PostgresQuery(unsafeSQL: Self.lockSQL, binds: lock))
        var b = PostgresBindings(capacity: 5)
        b.append(events.map(\.appID)); b.append(events.map(\.time.milliseconds))
        b.append(events.map { $0.dedupeKey ?? "" }); b.append(events.map { $0.dedupeKey == nil })
        b.append(events.map(\.bodyJSON))
        try await session.query(PostgresQuery(unsafeSQL: Self.insertSQL, binds: b))
    }
}

extension PostgresTables {
    /// One statement, one snapshot: the retention mark, then the page (no rows of it: one row of NULLs).
    static let eventsSQL = """
        SELECT f.t, e.cursor, e.time_ms, e.dedupe_key, e.body
        FROM (SELECT coalesce((SELECT trimmed_through FROM event_feeds WHERE app_id = $1), 0) AS t) f
        LEFT JOIN LATERAL (
            SELECT cursor, time_ms, dedupe_key, body FROM feed_events WHERE app_id = $1 AND cursor > $2 ORDER BY cursor LIMIT $3
        ) e ON true
        ORDER BY e.cursor
        """

    static func events(appID: String, after cursor: UInt64, limit: Int, on session: PostgresSession) async throws -> EventPage {
        let limit = max(0, limit)
        var binds = PostgresBindings(capacity: 3)
        binds.append(appID); binds.append(Int64(clamping: cursor)); binds.append(Int64(limit) + 1)
        var page = EventPage()
        var found = 0
        for row in try await session.query(PostgresQuery(unsafeSQL: eventsSQL, binds: binds)) {
            let (trimmed, entryCursor, time, key, body) = try row.decode((Int64, Int64?, Int64?, String?, String?).self)
            page.trimmedThrough = UInt64(max(0, trimmed))
            guard let entryCursor, let time, let body else { continue }
            found += 1
            guard found <= limit else {
                page.more = true
                continue
            }
            page.scannedThrough = UInt64(entryCursor)
            if let event = FeedEvent(appID: appID, time: UnixTime(milliseconds: time), dedupeKey: key, bodyJSON: body) {
                page.entries.append(FeedEntry(cursor: UInt64(entryCursor), event: event))
            }
        }
        return page
    }

    /// The app's newest cursor, or the retention mark once every event is gone (a sequence never
    /// hands a cursor out twice). The app's events commit in cursor order (the advisory lock of
    /// ``PostgresEventOverlay/lockSQL``): one committed after this read has a higher cursor.
    static let lastCursorSQL = """
        SELECT greatest(
            coalesce((SELECT max(cursor) FROM feed_events WHERE app_id = $1), 0),
            coalesce((SELECT trimmed_through FROM event_feeds WHERE app_id = $1), 0))
        """

    static func lastEventCursor(appID: String, on session: PostgresSession) async throws -> UInt64 {
        var binds = PostgresBindings(capacity: 1)
        binds.append(appID)
        let rows = try await session.query(PostgresQuery(unsafeSQL: lastCursorSQL, binds: binds))
        return UInt64(max(0, try rows.first?.decode(Int64.self) ?? 0))
    }

    /// The apps with events, one index probe each (a skip over the primary key, not a scan of its rows).
    static let feedAppsSQL = """
        WITH RECURSIVE apps(a) AS (
            (SELECT app_id FROM feed_events ORDER BY app_id LIMIT 1)
            UNION ALL
            SELECT (SELECT app_id FROM feed_events WHERE app_id > apps.a ORDER BY app_id LIMIT 1) FROM apps WHERE apps.a IS NOT NULL)
        SELECT a FROM apps WHERE a IS NOT NULL
        """
    /// The highest cursor the app's retention deletes: the newest beyond the `$2` kept by count, or
    /// the one before the oldest event young enough to keep (every event, if none is): a feed is
    /// trimmed from its start, as the memory store does. 0: nothing.
    static let trimThroughSQL = """
        SELECT greatest(
            coalesce((SELECT cursor FROM feed_events WHERE app_id = $1 ORDER BY cursor DESC OFFSET $2 LIMIT 1), 0),
            coalesce(
                (SELECT cursor - 1 FROM feed_events WHERE app_id = $1 AND time_ms >= $3 ORDER BY cursor LIMIT 1),
                (SELECT max(cursor) FROM feed_events WHERE app_id = $1), 0))
        """
    /// One chunk: the app's oldest `$3` events up to `$2` go, and the mark moves to the last of them.
    static let trimChunkSQL = """
        WITH gone AS (
            DELETE FROM feed_events WHERE app_id = $1 AND cursor IN (
                SELECT cursor FROM feed_events WHERE app_id = $1 AND cursor <= $2 ORDER BY cursor LIMIT $3)
            RETURNING cursor),
        mark AS (
            INSERT INTO event_feeds (app_id, trimmed_through) SELECT $1, max(cursor) FROM gone HAVING count(*) > 0
            ON CONFLICT (app_id) DO UPDATE SET trimmed_through = greatest(event_feeds.trimmed_through, excluded.trimmed_through))
        SELECT count(*) FROM gone
        """

    /// Every app's feed trimmed, `chunk` events per statement (each its own transaction, so a large
    /// trim never holds many row locks nor one long transaction); answers how many events went.
    static func trimEvents(before: UnixTime, keep: Int, chunk: Int, on session: PostgresSession) async throws -> Int {
        var apps: [String] = []
        for row in try await session.query(PostgresQuery(unsafeSQL: feedAppsSQL)) { apps.append(try row.decode(String.self)) }
        var deleted = 0
        for appID in apps {
            var binds = PostgresBindings(capacity: 3)
            binds.append(appID); binds.append(Int64(max(0, keep))); binds.append(before.milliseconds)
            let rows = try await session.query(PostgresQuery(unsafeSQL: trimThroughSQL, binds: binds))
            guard let through = try rows.first?.decode(Int64?.self), through > 0 else { continue }
            while true {
                var b = PostgresBindings(capacity: 3)
                b.append(appID); b.append(through); b.append(Int64(chunk))
                let gone = try await session.query(PostgresQuery(unsafeSQL: trimChunkSQL, binds: b)).first?.decode(Int64.self) ?? 0
                deleted += Int(gone)
                if gone < chunk { break }
            }
        }
        return deleted
    }
}
