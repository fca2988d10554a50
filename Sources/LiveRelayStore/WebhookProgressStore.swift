import LiveRelayAPNs
import LiveRelayDomain

/// Where each app's webhook progress lives (``WebhookProgress``): the cursor
/// its endpoint acknowledged and its run of failures, with a lease so that
/// one node at a time delivers an app's events, in order.
///
/// The tenant registry keeps it, next to the webhook it belongs to: every
/// node reads the registry, and on PostgreSQL its tables are shared. Like
/// ``TenantRegistry/touch(_:)`` it is bookkeeping: no version bump (nodes do
/// not reload for it) and no audit row.
///
/// ## The lease
/// ``claimWebhook(appID:node:now:lease:)`` takes the app's row for `node`
/// until `now + lease` when it is free, expired or already `node`'s, and
/// answers nil while another node's lease runs. A holder renews it with each
/// claim and save; a node that dies holding it delays the app's deliveries
/// by at most `lease`, after which another node takes over from the last
/// saved cursor (events after it are delivered again: at least once, with
/// the same ids). ``releaseWebhook(appID:node:)`` hands it over at once on a
/// graceful stop.
public protocol WebhookProgressStore: Sendable {
    /// The app's progress for `node` with the lease taken or renewed; a
    /// fresh one (``WebhookProgress/fresh(for:appID:resets:)`` of the app's
    /// webhook: from its start cursor, no failures) when none was saved. Nil
    /// while another node holds the lease.
    func claimWebhook(appID: String, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> WebhookProgress?

    /// Saves `progress` and renews the lease, if `node` still holds it and no
    /// reset came since `progress.resets` was read. False otherwise: nothing
    /// was written, and the caller claims again before going on.
    func saveWebhook(_ progress: WebhookProgress, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> Bool

    /// ResetWebhook: forgets the run of failures (``WebhookProgress/reset()``) whoever holds
    /// the lease; the holder's next save is refused and it claims the reset progress.
    /// Answers the progress after the reset (nil when none was ever saved).
    @discardableResult
    func resetWebhook(appID: String) async throws -> WebhookProgress?

    /// The app's progress as saved, without taking anything (GetWebhook, GetAppStats).
    func webhookProgress(appID: String) async throws -> WebhookProgress?

    /// Ends `node`'s lease on the app (a graceful stop): another node may claim it at once.
    func releaseWebhook(appID: String, node: String) async throws
}
