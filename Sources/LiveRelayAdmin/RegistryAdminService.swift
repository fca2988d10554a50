import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import NIOCore

/// The admin API over the tenant registry: each RPC is one registry change
/// (one transaction with its audit row, the caller's key id as the actor),
/// or a read of its snapshot. Every node follows the registry, so a change
/// made here takes effect on every node without a restart.
///
/// What the registry cannot know is injected by the composition root: how a
/// key is minted (random bytes and SHA-256 live with the server's
/// authenticator), what an app uses on this node (``AppUsageFigures``), and
/// the key files and endpoints the operator allows credentials to name
/// (``CredentialAllowance``; by default Apple's endpoint and no key file), and
/// what webhooks need (``WebhookAdminHooks``).
public struct RegistryAdminService: AdminService {
    /// A new key: its plaintext (`lrk_<key_id>_<64 hex>`), its id and the SHA-256 of its secret.
    public typealias KeyMinter = @Sendable () -> (plaintext: String, keyID: String, secretSHA256: String)

    private let registry: any TenantRegistry
    let clock: any WallClock
    private let mintKey: KeyMinter
    private let usage: @Sendable (RegisteredApp) -> AppUsageFigures
    private let allowance: CredentialAllowance
    let webhookHooks: WebhookAdminHooks

    public init(
        registry: any TenantRegistry, clock: any WallClock = SystemClock(), mintKey: @escaping KeyMinter,
        usage: @escaping @Sendable (RegisteredApp) -> AppUsageFigures, credentials allowance: CredentialAllowance = CredentialAllowance(),
        webhooks: WebhookAdminHooks
    ) {
        self.registry = registry
        self.clock = clock
        self.mintKey = mintKey
        self.usage = usage
        self.allowance = allowance
        self.webhookHooks = webhooks
    }

    // MARK: Apps

    public func createApp(_ request: Admin.CreateAppRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply> {
        let app = RegisteredApp(
            id: request.appID ?? "", bundleID: request.bundleID ?? "", queueCapacity: request.queueCapacity.map(Int.init),
            weight: request.weight.map(Int.init), maxPushLifetimeSeconds: request.maxPushLifetimeSeconds.map(Int.init),
            quotas: RegisteredQuotas(request.quotas))
        return changeApp(.createApp(app), appID: app.id, context: context)
    }

    public func updateApp(_ request: Admin.UpdateAppRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply> {
        let patch = RegisteredAppPatch(
            bundleID: request.bundleID, queueCapacity: request.queueCapacity.map(Int.init), weight: request.weight.map(Int.init),
            maxPushLifetimeSeconds: request.maxPushLifetimeSeconds.map(Int.init), quotas: request.quotas.map(RegisteredQuotas.init),
            enabled: request.enabled)
        return changeApp(.updateApp(id: request.appID ?? "", patch), appID: request.appID ?? "", context: context)
    }

    public func getApp(_ request: Admin.GetAppRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply> {
        run(context) { registry in
            let id = request.appID ?? ""
            guard let app = try await registry.snapshot().apps[id] else { throw RegistryError.appNotFound(id) }
            return Admin.AppReply(app: Admin.App(app))
        }
    }

    public func listApps(_ request: Admin.ListAppsRequest, context: CallContext) -> EventLoopFuture<Admin.ListAppsReply> {
        run(context) { registry in
            let apps = try await registry.snapshot().apps.values
                .filter { request.includeDisabled == true || $0.enabled }
                .sorted { $0.id < $1.id }
            let page = Page(apps.map { ($0.id, $0) }, size: request.pageSize, after: request.pageToken)
            return Admin.ListAppsReply(apps: page.items.map(Admin.App.init), nextPageToken: page.next)
        }
    }

    public func disableApp(_ request: Admin.DisableAppRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply> {
        changeApp(.disableApp(id: request.appID ?? ""), appID: request.appID ?? "", context: context)
    }

    public func putAPNsCredentials(
        _ request: Admin.PutAPNsCredentialsRequest, context: CallContext
    ) -> EventLoopFuture<Admin.AppReply> {
        let credentials: RegisteredCredentials
        do {
            credentials = try CredentialsCheck.registered(request, allowance: allowance)
        } catch {
            return context.eventLoop.makeFailedFuture(error)
        }
        return changeApp(.putCredentials(appID: request.appID ?? "", credentials), appID: request.appID ?? "", context: context)
    }

    // MARK: Keys

    public func createAPIKey(_ request: Admin.CreateAPIKeyRequest, context: CallContext) -> EventLoopFuture<Admin.CreateAPIKeyReply> {
        let minted = mintKey()
        let role: RegisteredAPIKey.Role =
            request.admin == true
            ? .admin
            : .tenant(apps: request.allApps == true ? .all : .only(Set(request.appIDs)), methods: request.allowedMethods)
        let key = RegisteredAPIKey(keyID: minted.keyID, secretSHA256: minted.secretSHA256, role: role, label: request.label)
        return run(context) { [clock] registry in
            try await registry.apply(.createKey(key), actor: context.principal.keyID, now: clock.now())
            guard let stored = try await registry.snapshot().keys[key.keyID] else { throw RegistryError.keyNotFound(key.keyID) }
            return Admin.CreateAPIKeyReply(key: Admin.APIKey(stored), secret: minted.plaintext)
        }
    }

    public func listAPIKeys(_ request: Admin.ListAPIKeysRequest, context: CallContext) -> EventLoopFuture<Admin.ListAPIKeysReply> {
        run(context) { registry in
            let keys = try await registry.snapshot().keys.values
                .filter { request.includeRevoked == true || !$0.isRevoked }
                .filter { key in request.appID.map { key.mayActFor(appID: $0) } ?? true }
                .sorted { $0.keyID < $1.keyID }
            let page = Page(keys.map { ($0.keyID, $0) }, size: request.pageSize, after: request.pageToken)
            return Admin.ListAPIKeysReply(keys: page.items.map(Admin.APIKey.init), nextPageToken: page.next)
        }
    }

    public func revokeAPIKey(_ request: Admin.RevokeAPIKeyRequest, context: CallContext) -> EventLoopFuture<Admin.APIKeyReply> {
        let keyID = request.keyID ?? ""
        return run(context) { [clock] registry in
            try await registry.apply(.revokeKey(keyID: keyID), actor: context.principal.keyID, now: clock.now())
            guard let key = try await registry.snapshot().keys[keyID] else { throw RegistryError.keyNotFound(keyID) }
            return Admin.APIKeyReply(key: Admin.APIKey(key))
        }
    }

    // MARK: Stats

    public func getAppStats(_ request: Admin.GetAppStatsRequest, context: CallContext) -> EventLoopFuture<Admin.AppStats> {
        let id = request.appID ?? ""
        return run(context) { [usage] registry in
            guard let app = try await registry.snapshot().apps[id] else { throw RegistryError.appNotFound(id) }
            var stats = Admin.AppStats(id, usage(app))
            if let webhook = try await webhookFigures(of: app, in: registry) {
                stats.webhookState = webhook.state
                stats.webhookBacklog = webhook.backlog
            }
            return stats
        }
    }

    // MARK: Internals

    private func changeApp(_ change: RegistryChange, appID: String, context: CallContext) -> EventLoopFuture<Admin.AppReply> {
        run(context) { [clock] registry in
            try await registry.apply(change, actor: context.principal.keyID, now: clock.now())
            guard let app = try await registry.snapshot().apps[appID] else { throw RegistryError.appNotFound(appID) }
            return Admin.AppReply(app: Admin.App(app))
        }
    }

    /// Runs `body` against the registry, answering on the caller's loop; registry refusals become their status.
    func run<Reply: Sendable>(
        _ context: CallContext, _ body: @escaping @Sendable (any TenantRegistry) async throws -> Reply
    ) -> EventLoopFuture<Reply> {
        let promise = context.eventLoop.makePromise(of: Reply.self)
        promise.completeWithTask { [registry] in
            do {
                return try await body(registry)
            } catch let error as RegistryError {
                throw error.rpcError
            } catch ActivityStoreError.closed {
                throw RPCError(.unavailable, "the tenant registry is closed (server shutting down)")
            } catch let ActivityStoreError.outcomeUnknown(what) {
                throw RPCError(
                    .unavailable, "the change may or may not have been made (\(what)); read it back before repeating it",
                    details: ErrorDetails(reason: "OutcomeUnknown"))
            }
        }
        return promise.futureResult
    }
}

/// What one app uses on the node that answers GetAppStats.
public struct AppUsageFigures: Sendable {
    public var queueDepth: Int
    public var queueCapacity: Int
    /// Final outcomes since this node started: (outcome, reason, count).
    public var pushes: [(outcome: String, reason: String?, count: Int)]
    public var pushesLastHour: Int
    public var tokens: Int
    public var liveActivities: Int
    /// The limits in force on this node (its share of the rates); nil: none.
    public var callsPerSecond: Double?
    public var burst: Int?
    public var pushesPerHour: Int?
    public var maxTokens: Int?
    public var maxLiveActivities: Int?
    /// Per activity and per channel, on every node alike.
    public var priorityBudgetPerHour: Int?
    public var nodes: Int
    /// Set while this node holds the app's pushes for rejected credentials: APNs's reason, and for how long.
    public var held: (reason: String, forMS: Int)?

    public init(
        queueDepth: Int = 0, queueCapacity: Int = 0, pushes: [(outcome: String, reason: String?, count: Int)] = [],
        pushesLastHour: Int = 0, tokens: Int = 0, liveActivities: Int = 0, callsPerSecond: Double? = nil, burst: Int? = nil,
        pushesPerHour: Int? = nil, maxTokens: Int? = nil, maxLiveActivities: Int? = nil, nodes: Int = 1
    ) {
        self.queueDepth = queueDepth
        self.queueCapacity = queueCapacity
        self.pushes = pushes
        self.pushesLastHour = pushesLastHour
        self.tokens = tokens
        self.liveActivities = liveActivities
        self.callsPerSecond = callsPerSecond
        self.burst = burst
        self.pushesPerHour = pushesPerHour
        self.maxTokens = maxTokens
        self.maxLiveActivities = maxLiveActivities
        self.nodes = nodes
    }
}

/// One page of items in id order: at most `size` (default 100, at most
/// 1,000) after the id `after`; `next` is the last id given when more follow.
struct Page<Item> {
    var items: [Item]
    var next: String?

    init(_ all: [(id: String, item: Item)], size: UInt32?, after: String?) {
        let limit = Int(min(max(size ?? 100, 1), 1_000))
        let rest = after.map { token in all.drop { $0.id <= token } } ?? all[...]
        items = rest.prefix(limit).map(\.item)
        next = rest.count > limit ? rest.prefix(limit).last?.id : nil
    }
}
