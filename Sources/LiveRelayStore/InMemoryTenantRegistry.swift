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
        var closed = false
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
