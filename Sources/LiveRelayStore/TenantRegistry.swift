import LiveRelayAPNs
import LiveRelayDomain

/// Where apps, their credentials and quotas, and API keys live: the tenant
/// registry, changed through the admin API and seeded from the config file,
/// read by every node.
///
/// ## Why a store of its own
/// The activity store is built for thousands of small writes a second
/// (batched, group-committed); the registry has a few writes a day, each of
/// which every node must see. So it has its own file on SQLite
/// (`registry.sqlite3`, outside the activity store's single-writer pipeline)
/// and its own tables and version on PostgreSQL, and a node keeps a whole
/// ``RegistrySnapshot`` in memory, reloading it when ``changes(pollEvery:)``
/// reports a newer version.
///
/// ## One semantics
/// Stores decide nothing: ``apply(_:actor:now:)`` reads the registry inside
/// its transaction, runs ``RegistryRules`` (LiveRelayDomain) and writes the
/// plan, its ``AuditEntry`` and version + 1 in that same transaction, or
/// nothing when the plan is nil. Memory, SQLite and PostgreSQL thus refuse,
/// change and audit exactly alike, and one behavioural suite checks all three.
///
/// ## Versions
/// The version is 0 for an empty registry and goes up by exactly one with
/// each change that changed something; a no-op (revoking a revoked key, a
/// seed that finds everything as the file says) leaves it, and writes no
/// audit row. An audit row's sequence is the version its change produced,
/// so the log has no gaps and orders like the versions.
///
/// ## Failures
/// Refusals throw ``RegistryError``; a closed registry throws
/// ``ActivityStoreError/closed``; a PostgreSQL COMMIT that got no answer
/// throws ``ActivityStoreError/outcomeUnknown(_:)`` (the change may or may
/// not be in: read the snapshot to find out). Anything else is the store's
/// own error (SQLite, PostgreSQL).
///
/// ## Secrets
/// A stored key's PEM lives in its app's row (admin.proto asks for keys kept
/// in the registry). Implementations never log it and never put it in an
/// error; the values' descriptions redact it, and audit rows never carry it.
public protocol TenantRegistry: WebhookProgressStore {
    /// Everything, with the version it is at, read in one transaction: what
    /// a node loads at start and after each change.
    func snapshot() async throws -> RegistrySnapshot

    /// The version only: a cheap poll.
    func version() async throws -> Int64

    /// One change: the rule, the writes, the audit row and the version bump
    /// in one transaction. Returns the version after it and the row written
    /// (nil when nothing changed).
    @discardableResult
    func apply(_ change: RegistryChange, actor: String, now: UnixTime) async throws -> RegistryApplied

    /// Records keys' last use: each named key's `lastUsedAt` becomes the later
    /// of its own and the given time (unknown ids are ignored). The caller
    /// batches, at most once a minute per key, because this is bookkeeping:
    /// no version bump (nodes must not reload for it) and no audit row.
    func touch(_ lastUsed: [String: UnixTime]) async throws

    /// Audit rows with a sequence above `sequence`, oldest first, at most `limit`.
    func audit(after sequence: Int64, limit: Int) async throws -> [AuditEntry]

    /// Versions as they change, for a node to reload its snapshot.
    ///
    /// The first element is the version at subscription (so a change between
    /// a ``snapshot()`` and this call is not missed); each later one is
    /// higher than the one before. Versions in between may be skipped (a
    /// consumer only needs the newest), and a consumer that falls behind
    /// gets only the newest. Sources: on PostgreSQL, `LISTEN liverelay_registry`
    /// on a dedicated connection (other nodes' changes too), re-established
    /// after a lost connection; on SQLite and memory, this process's own
    /// applies. Everywhere, a poll of ``version()`` every `pollEvery` is the
    /// safety net (a notification lost with its connection, another process
    /// writing the SQLite file). The stream finishes when the registry closes
    /// and stops polling when its consumer goes away.
    func changes(pollEvery: Duration) -> AsyncStream<Int64>

    /// Finishes every change stream and releases the store; calls after it
    /// throw ``ActivityStoreError/closed``. Idempotent.
    func close() async throws
}
