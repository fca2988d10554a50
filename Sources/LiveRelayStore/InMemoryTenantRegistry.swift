import LiveRelayAPNs
import LiveRelayDomain
import NIOConcurrencyHelpers

/// The registry of `--store memory` and of tests: a snapshot and an audit
/// log under one lock, so each apply (rule, writes, audit row, version) is
/// atomic. Forgotten on exit, like the memory activity store.
public final class InMemoryTenantRegistry: TenantRegistry {
    private struct State {
        var snapshot: RegistrySnapshot
        var audit: [AuditEntry] = []
        var webhooks: [String: WebhookRow] = [:]
        var closed = false
    }

    /// An app's webhook progress with its lease, as the SQL stores keep it in a row.
    private struct WebhookRow {
        var progress: WebhookProgress
        var leaseOwner: String?
        var leaseUntil: UnixTime?

        func isClaimable(by node: String, at now: UnixTime) -> Bool {
            guard let owner = leaseOwner, owner != node, let until = leaseUntil else { return true }
            return until <= now
        }
    }

    private let state: NIOLockedValueBox<State>
    private let feed = RegistryVersionFeed()

    /// Starts from `snapshot` (empty by default) with an empty audit log.
    public init(snapshot: RegistrySnapshot = RegistrySnapshot()) {
        state = NIOLockedValueBox(State(snapshot: snapshot))
    }

    private func read<T>(_ body: (State) -> T) throws -> T {
        try state.withLockedValue { state in
            guard !state.closed else { throw ActivityStoreError.closed }
            return body(state)
        }
    }

    public func snapshot() async throws -> RegistrySnapshot {
        try read(\.snapshot)
    }

    public func version() async throws -> Int64 {
        try read(\.snapshot.version)
    }

    @discardableResult
    public func apply(_ change: RegistryChange, actor: String, now: UnixTime) async throws -> RegistryApplied {
        let applied: RegistryApplied = try state.withLockedValue { state in
            guard !state.closed else { throw ActivityStoreError.closed }
            let (next, entry) = try RegistryRules.apply(change, to: state.snapshot, actor: actor, now: now)
            state.snapshot = next
            if let entry { state.audit.append(entry) }
            return RegistryApplied(version: next.version, entry: entry)
        }
        if applied.entry != nil { feed.publish(applied.version) }
        return applied
    }

    public func touch(_ lastUsed: [String: UnixTime]) async throws {
        try state.withLockedValue { state in
            guard !state.closed else { throw ActivityStoreError.closed }
            for (keyID, at) in lastUsed {
                guard let key = state.snapshot.keys[keyID], key.lastUsedAt.map({ $0 < at }) ?? true else { continue }
                state.snapshot.keys[keyID]!.lastUsedAt = at
            }
        }
    }

    public func audit(after sequence: Int64, limit: Int) async throws -> [AuditEntry] {
        try read { state in Array(state.audit.lazy.filter { $0.sequence > sequence }.prefix(max(0, limit))) }
    }

    // MARK: WebhookProgressStore

    private func write<T>(_ body: (inout State) -> T) throws -> T {
        try state.withLockedValue { state in
            guard !state.closed else { throw ActivityStoreError.closed }
            return body(&state)
        }
    }

    public func claimWebhook(appID: String, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> WebhookProgress? {
        try write { state in
            // A first claim: a fresh progress for the app's webhook, from its start cursor.
            let fresh = state.snapshot.apps[appID]?.webhook.map { WebhookProgress.fresh(for: $0, appID: appID) }
            var row =
                state.webhooks[appID]
                ?? WebhookRow(progress: fresh ?? WebhookProgress(appID: appID, webhookCreatedAt: UnixTime(milliseconds: 0)))
            guard row.isClaimable(by: node, at: now) else { return nil }
            row.leaseOwner = node
            row.leaseUntil = now + lease
            state.webhooks[appID] = row
            return row.progress
        }
    }

    public func saveWebhook(_ progress: WebhookProgress, node: String, now: UnixTime, lease: UnixTime.Duration) async throws -> Bool {
        try write { state in
            guard var row = state.webhooks[progress.appID], row.leaseOwner == node, row.progress.resets == progress.resets else {
                return false
            }
            row.progress = progress
            row.leaseUntil = now + lease
            state.webhooks[progress.appID] = row
            return true
        }
    }

    @discardableResult
    public func resetWebhook(appID: String) async throws -> WebhookProgress? {
        try write { state in
            guard let row = state.webhooks[appID] else { return nil }
            let progress = row.progress.reset()
            state.webhooks[appID]?.progress = progress
            return progress
        }
    }

    public func webhookProgress(appID: String) async throws -> WebhookProgress? {
        try read { $0.webhooks[appID]?.progress }
    }

    public func releaseWebhook(appID: String, node: String) async throws {
        try write { state in
            guard state.webhooks[appID]?.leaseOwner == node else { return }
            state.webhooks[appID]?.leaseOwner = nil
            state.webhooks[appID]?.leaseUntil = nil
        }
    }

    public func changes(pollEvery: Duration) -> AsyncStream<Int64> {
        feed.subscribe(pollEvery: pollEvery) { [weak self] in
            guard let self else { throw ActivityStoreError.closed }
            return try await self.version()
        }
    }

    public func close() async throws {
        state.withLockedValue { $0.closed = true }
        feed.finish()
    }
}
