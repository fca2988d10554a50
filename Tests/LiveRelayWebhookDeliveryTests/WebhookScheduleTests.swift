import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayDomain
import LiveRelayStore
import LiveRelayWebhookDelivery
import Testing

/// The delivery rules without I/O: what goes in a batch, and how failures
/// turn into retries, a failing webhook and a recovery, on any clock.
@Suite("WebhookSchedule")
struct WebhookScheduleTests {
    static let app = "com.example.app"
    static let created = UnixTime(milliseconds: 1_000_000)
    static let webhook = RegisteredWebhook(
        url: "https://hooks.example.com/in", secret: String(repeating: "a", count: 70), createdAt: created)
    let schedule = WebhookSchedule(
        batchSize: 100, backoff: Backoff(initial: .seconds(1), maximum: .seconds(60), jitter: 0), retryFor: .minutes(10),
        probeEvery: .minutes(5))

    static func entry(_ cursor: UInt64, _ kind: FeedEvent.Kind = .pushFailed, at time: UnixTime = created) -> FeedEntry {
        FeedEntry(cursor: cursor, event: FeedEvent(appID: app, kind: kind, time: time))
    }

    static func progress(cursor: UInt64 = 0) -> WebhookProgress {
        WebhookProgress(appID: app, webhookCreatedAt: created, deliveredCursor: cursor)
    }

    @Test func anEmptyPageWaits() {
        #expect(schedule.next(after: Self.progress(), page: EventPage(), webhook: Self.webhook) == .wait)
    }

    @Test func aPageIsOneBatchThroughItsLastCursor() {
        let page = EventPage(entries: [Self.entry(3), Self.entry(5), Self.entry(9)])
        guard case let .send(batch) = schedule.next(after: Self.progress(cursor: 2), page: page, webhook: Self.webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(batch.entries.map(\.cursor) == [3, 5, 9])
        #expect(batch.through == 9)
        #expect(batch.missedThrough == nil)
    }

    @Test func kindsNotSubscribedAreSkippedButTheCursorPassesThem() {
        var webhook = Self.webhook
        webhook.eventKinds = [.tokenPruned]
        let page = EventPage(entries: [Self.entry(1, .callSettled), Self.entry(2, .tokenPruned), Self.entry(3, .pushFailed)])
        guard case let .send(batch) = schedule.next(after: Self.progress(), page: page, webhook: webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(batch.entries.map(\.cursor) == [2])
        #expect(batch.through == 3)
        let others = EventPage(entries: [Self.entry(4, .callSettled), Self.entry(5, .pushFailed)])
        #expect(schedule.next(after: Self.progress(cursor: 3), page: others, webhook: webhook) == .skip(through: 5))
    }

    /// Where a webhook starts is a cursor, not a time: an event after its start cursor stamped
    /// before it was set (a node whose clock is behind) is still its to deliver.
    @Test func aNewWebhookStartsAtItsStartCursorWhateverTheEventsTimes() {
        var webhook = Self.webhook
        webhook.startCursor = 2
        let fresh = WebhookProgress.fresh(for: webhook, appID: Self.app, resets: 3)
        #expect(fresh == WebhookProgress(appID: Self.app, webhookCreatedAt: Self.created, deliveredCursor: 2, resets: 3))
        let skewed = UnixTime(milliseconds: Self.created.milliseconds - 5_000)
        let page = EventPage(entries: [Self.entry(3, at: skewed), Self.entry(4)])
        guard case let .send(batch) = schedule.next(after: fresh, page: page, webhook: webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(batch.entries.map(\.cursor) == [3, 4])
        #expect(batch.through == 4 && batch.missedThrough == nil)
    }

    /// Rows this build cannot read (a newer build's kinds) are left out of a page: the cursor moves
    /// past them, so a page of nothing else never stalls the webhook.
    @Test func rowsThisBuildCannotReadAreSkippedNotWaitedFor() {
        let unreadable = EventPage(entries: [], more: true, scannedThrough: 50)
        #expect(schedule.next(after: Self.progress(cursor: 40), page: unreadable, webhook: Self.webhook) == .skip(through: 50))
        // Already past them (a page read before a save): nothing to do.
        #expect(schedule.next(after: Self.progress(cursor: 50), page: unreadable, webhook: Self.webhook) == .wait)
        // Readable events with unreadable rows after them: the batch goes through the last row looked at.
        let mixed = EventPage(entries: [Self.entry(41)], scannedThrough: 45)
        guard case let .send(batch) = schedule.next(after: Self.progress(cursor: 40), page: mixed, webhook: Self.webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(batch.entries.map(\.cursor) == [41])
        #expect(batch.through == 45)
    }

    @Test func eventsRetentionDeletedBeforeDeliveryAreReportedNotSkippedSilently() {
        let page = EventPage(entries: [Self.entry(40)], trimmedThrough: 39)
        guard case let .send(batch) = schedule.next(after: Self.progress(cursor: 10), page: page, webhook: Self.webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(batch.missedThrough == 39)
        // Retention behind the cursor missed nothing.
        guard case let .send(caughtUp) = schedule.next(after: Self.progress(cursor: 39), page: page, webhook: Self.webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(caughtUp.missedThrough == nil)
        // A new webhook starts at its start cursor: events trimmed before it are none of its own,
        // whatever their times; one that never delivered, and whose own events were trimmed, is told.
        var webhook = Self.webhook
        webhook.startCursor = 39
        let old = EventPage(entries: [Self.entry(40, at: UnixTime(milliseconds: 5))], trimmedThrough: 39)
        guard case let .send(fresh) = schedule.next(after: .fresh(for: webhook, appID: Self.app), page: old, webhook: webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(fresh.missedThrough == nil && fresh.entries.map(\.cursor) == [40])
        webhook.startCursor = 30
        guard case let .send(missed) = schedule.next(after: .fresh(for: webhook, appID: Self.app), page: old, webhook: webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(missed.missedThrough == 39)
        // Only events of other kinds left, and some trimmed undelivered: still told, in an empty batch.
        webhook.eventKinds = [.tokenPruned]
        guard case let .send(told) = schedule.next(after: .fresh(for: webhook, appID: Self.app), page: old, webhook: webhook) else {
            Issue.record("expected a batch")
            return
        }
        #expect(told.entries.isEmpty && told.missedThrough == 39 && told.through == 40)
    }

    @Test func failuresBackOffThenTheWebhookFailsAfterItsWindowAndIsProbed() throws {
        var progress = Self.progress(cursor: 7)
        var now = UnixTime(milliseconds: 2_000_000)
        let start = now
        var waits: [Int64] = []
        var becameFailingAt: Int?
        for attempt in 1...20 {
            let (next, retryAt, became) = schedule.failed(progress, error: "HTTP 503", at: now, random: 0)
            #expect(next.attempts == attempt)
            #expect(next.failingSince == start)
            #expect(next.lastError == "HTTP 503")
            #expect(next.deliveredCursor == 7, "a failure never moves the cursor")
            if became { becameFailingAt = attempt }
            waits.append(retryAt.milliseconds - now.milliseconds)
            progress = next
            now = retryAt
        }
        // 1, 2, 4, 8, 16, 32, 60, 60, ... seconds until ten minutes have gone by.
        #expect(Array(waits.prefix(8)) == [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000])
        let failingAt = try #require(becameFailingAt)
        #expect(progress.failing)
        #expect(progress.state == "failing")
        #expect(waits[failingAt - 1] == 300_000, "a failing webhook is probed every five minutes")
        #expect(waits[(failingAt - 1)...].allSatisfy { $0 == 300_000 })
        let (_, _, againBecame) = schedule.failed(progress, error: "timeout", at: now, random: 0)
        #expect(!againBecame, "the transition is reported once")
    }

    @Test func aSuccessEndsTheRunOfFailuresAndMovesTheCursor() {
        var progress = Self.progress(cursor: 7)
        progress.attempts = 30
        progress.failing = true
        progress.failingSince = Self.created
        progress.lastError = "HTTP 500"
        let now = UnixTime(milliseconds: 9_000_000)
        let next = schedule.succeeded(progress, through: 12, at: now)
        #expect(next.deliveredCursor == 12)
        #expect(next.attempts == 0 && !next.failing && next.failingSince == nil && next.lastError == nil)
        #expect(next.lastSuccessAt == now)
        #expect(next.state == "delivering")
        #expect(schedule.succeeded(next, through: 3, at: now).deliveredCursor == 12, "a cursor never goes back")
    }

    @Test func aResetForgetsTheFailuresAndKeepsTheCursor() {
        var progress = Self.progress(cursor: 44)
        progress.attempts = 3
        progress.failing = true
        progress.failingSince = Self.created
        let reset = progress.reset()
        #expect(reset.deliveredCursor == 44)
        #expect(reset.attempts == 0 && !reset.failing && reset.failingSince == nil)
        #expect(reset.resets == progress.resets + 1)
    }
}
