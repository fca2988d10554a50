import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayDomain
import LiveRelayStore
import NIOCore

/// What an app's deliverer sends next from a page of its feed, and what a
/// delivery's outcome does to its progress. Pure: the delivery loop reads the
/// feed, posts and saves, and acts on these answers; tests drive them with any
/// `now` and any random number.
public struct WebhookSchedule: Hashable, Sendable {
    /// Events per delivery at most.
    public var batchSize: Int
    /// The waits between failed attempts.
    public var backoff: Backoff
    /// How long a run of failed attempts is retried with back-off before the
    /// webhook is marked failing.
    public var retryFor: UnixTime.Duration
    /// While failing: the wait between probes (a delivery of the same events).
    public var probeEvery: UnixTime.Duration

    public init(
        batchSize: Int = 100, backoff: Backoff = Backoff(initial: .seconds(1), maximum: .minutes(5)),
        retryFor: UnixTime.Duration = .hours(1), probeEvery: UnixTime.Duration = .minutes(5)
    ) {
        self.batchSize = max(1, batchSize)
        self.backoff = backoff
        self.retryFor = retryFor
        self.probeEvery = probeEvery
    }

    /// One delivery: the events, and the cursor the progress moves to once the endpoint acknowledges it.
    public struct Batch: Hashable, Sendable {
        public var entries: [FeedEntry]
        /// The last cursor the batch covers (events of other kinds, and rows this build cannot read, included).
        public var through: UInt64
        /// Set when the feed's retention deleted events after the delivered cursor before
        /// they were delivered: the cursor up to which they went. The endpoint is told, never
        /// left to guess.
        public var missedThrough: UInt64?

        public init(entries: [FeedEntry], through: UInt64, missedThrough: UInt64? = nil) {
            self.entries = entries
            self.through = through
            self.missedThrough = missedThrough
        }
    }

    public enum Next: Hashable, Sendable {
        /// Deliver the batch.
        case send(Batch)
        /// Nothing to deliver up to this cursor (events of other kinds, or rows this build cannot
        /// read): move the progress there without a delivery.
        case skip(through: UInt64)
        /// Nothing after the cursor yet.
        case wait
    }

    /// What to do with `page`, the feed after `progress.deliveredCursor` (``batchSize`` events at most).
    /// The webhook's events are those after its progress's cursor, which starts at its
    /// ``RegisteredWebhook/startCursor``: every one of its kinds there is delivered, and retention
    /// deleting any before delivery is reported (``Batch/missedThrough``).
    public func next(after progress: WebhookProgress, page: EventPage, webhook: RegisteredWebhook) -> Next {
        // Past every row the read looked at, unreadable ones (a newer build's kinds) included.
        let through = page.nextCursor(after: progress.deliveredCursor)
        guard through > progress.deliveredCursor else { return .wait }
        let entries = page.entries.filter { webhook.delivers($0.event.kind) }
        let missed = page.trimmedThrough > progress.deliveredCursor ? page.trimmedThrough : nil
        guard !entries.isEmpty || missed != nil else { return .skip(through: through) }
        return .send(Batch(entries: entries, through: through, missedThrough: missed))
    }

    /// The progress after the endpoint acknowledged `batch` (or after a skip to its cursor): the run
    /// of failures ends.
    public func succeeded(_ progress: WebhookProgress, through cursor: UInt64, at now: UnixTime) -> WebhookProgress {
        var next = progress
        next.deliveredCursor = max(progress.deliveredCursor, cursor)
        next.lastSuccessAt = now
        next.lastError = nil
        next.failingSince = nil
        next.attempts = 0
        next.failing = false
        return next
    }

    /// A failed attempt: the progress with it counted, when to try again, and whether this attempt
    /// made the webhook failing (the retry window ran out). `random` in 0...1 picks the jitter.
    public func failed(
        _ progress: WebhookProgress, error: String, at now: UnixTime, random: Double
    ) -> (
        progress: WebhookProgress, retryAt: UnixTime, becameFailing: Bool
    ) {
        var next = progress
        next.attempts += 1
        next.lastError = error
        let since = progress.failingSince ?? now
        next.failingSince = since
        let becameFailing = !progress.failing && now.milliseconds - since.milliseconds >= retryFor.milliseconds
        if becameFailing { next.failing = true }
        let wait = next.failing ? probeEvery.milliseconds : backoff.delay(after: next.attempts, random: random).nanoseconds / 1_000_000
        return (next, UnixTime(milliseconds: now.milliseconds + wait), becameFailing)
    }
}
