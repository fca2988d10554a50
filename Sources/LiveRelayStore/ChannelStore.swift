import LiveRelayAPNs
import LiveRelayDomain
import ServiceLifecycle

/// Where an app's broadcast channels are recorded: the channels LiveRelay
/// created with APNs, keyed by (app, channel id).
///
/// ## Why a store of its own
/// Channels are few (APNs keeps at most ``APNsBroadcast/maxChannelsPerApp``
/// per app and environment) and change rarely, like the tenant registry,
/// but they are not tenant configuration: no audit log, no version every node
/// reloads, and an app may hold thousands. So they get a small store of their
/// own beside the registry (``InMemoryChannelStore``, ``SQLiteChannelStore``
/// in `<data dir>/channels.sqlite3`, and PostgreSQL's `channels` table), with
/// the same semantics everywhere, which one behavioural suite checks.
///
/// ## The limit
/// ``create(_:limit:)`` counts the app's channels in the new channel's
/// environment and inserts in one transaction that excludes every other
/// create of the same app (SQLite: `BEGIN IMMEDIATE` on one thread;
/// PostgreSQL: a transaction-scoped advisory lock per app), so two creates
/// racing for the last slot cannot both take it.
///
/// ## Keys
/// A channel is found by (app, id) only: an app naming another app's channel
/// id finds nothing, exactly as for an id that does not exist. Ids are compared
/// and ordered as bytes (UTF-8), the same in every backend.
///
/// ## Failures
/// Refusals and an unavailable store throw ``ChannelStoreError``; anything
/// else (a corrupt row, a disk error) is the backend's own error, an internal
/// failure.
public protocol ChannelStore: Sendable {
    /// Records `channel` unless its (app, id) is taken (``ChannelStoreError/alreadyExists``)
    /// or the app already has `limit` channels in its environment
    /// (``ChannelStoreError/limitReached(count:limit:)``); the duplicate is
    /// checked first.
    func create(_ channel: ChannelRecord, limit: Int) async throws

    /// Forgets a channel; false when the app has no channel of that id.
    @discardableResult
    func delete(appID: String, channelID: String) async throws -> Bool

    /// The app's channel of that id; nil when it has none (another app's included).
    func channel(appID: String, channelID: String) async throws -> ChannelRecord?

    /// The app's channels (in `environment`, or in both when nil) with an id
    /// above `after` (from the start when nil), in id order, at most `limit`:
    /// a page, the next one starting after its last id.
    func list(appID: String, environment: APNsEnvironment?, after: String?, limit: Int) async throws -> [ChannelRecord]

    /// How many channels the app has in `environment` (in both when nil).
    func count(appID: String, environment: APNsEnvironment?) async throws -> Int

    /// Releases the store; calls after it throw ``ChannelStoreError/unavailable(_:)``. Idempotent.
    func close() async throws
}

/// What a ``ChannelStore`` throws besides its backend's own errors.
public enum ChannelStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The app already has a channel of that id (ALREADY_EXISTS).
    case alreadyExists
    /// The app has `count` channels in the environment, and `limit` is the most
    /// it may have: deleting one makes room (RESOURCE_EXHAUSTED or FAILED_PRECONDITION).
    case limitReached(count: Int, limit: Int)
    /// The store is closed (shutting down) or its database could not be
    /// reached, or kept refusing, in time: nothing was done, and the same
    /// call may succeed later (UNAVAILABLE).
    case unavailable(String)
    /// The commit was sent but its answer never came (PostgreSQL): the change
    /// may or may not have been made; read it back before repeating it.
    case outcomeUnknown(String)

    public var description: String {
        switch self {
        case .alreadyExists: "the app already has a channel of that id"
        case let .limitReached(count, limit): "the app has \(count) channels in that environment, the most it may have is \(limit)"
        case let .unavailable(what): "the channel store is unavailable: \(what)"
        case let .outcomeUnknown(what): "the channel change may or may not have been made: \(what)"
        }
    }
}

/// The channel store as a member of the server's `ServiceGroup`: open until
/// graceful shutdown, closed then. Listed before the RPC server, it stops
/// after the server's drain.
public struct ChannelStoreService: Service {
    public let store: any ChannelStore

    public init(_ store: any ChannelStore) {
        self.store = store
    }

    public func run() async throws {
        try? await gracefulShutdown()
        try await store.close()
    }
}

extension String {
    /// Byte-wise (UTF-8) order: what SQLite's BINARY and PostgreSQL's "C"
    /// collations compare, and therefore the one order of channel pages.
    @inlinable
    func precedesAsBytes(_ other: String) -> Bool {
        utf8.lexicographicallyPrecedes(other.utf8)
    }
}
