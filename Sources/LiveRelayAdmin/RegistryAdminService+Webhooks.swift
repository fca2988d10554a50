import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import NIOCore

/// What the admin API's webhook calls need from the rest of `serve`: the
/// signing secret's minting (OpenSSL's random bytes live with the webhook
/// client), the feed's last cursor and backlog, and the deliverer to tell of a reset.
public struct WebhookAdminHooks: Sendable {
    /// A new signing secret: `whsec_` and 64 hex digits.
    public var mintSecret: @Sendable () -> String
    /// The app's feed's last cursor (``ActivityStore/lastEventCursor(appID:on:)``): where a new webhook starts.
    public var lastCursor: @Sendable (_ appID: String) async throws -> UInt64
    /// Events in the app's feed after `cursor`, counted up to a bound; nil when the feed cannot be read.
    public var backlog: @Sendable (_ appID: String, _ after: UInt64) async -> UInt64?
    /// The app's progress was reset: this node's deliverer stops waiting for the app at once.
    public var wasReset: @Sendable (_ appID: String) -> Void

    public init(
        mintSecret: @escaping @Sendable () -> String, lastCursor: @escaping @Sendable (String) async throws -> UInt64 = { _ in 0 },
        backlog: @escaping @Sendable (String, UInt64) async -> UInt64? = { _, _ in nil },
        wasReset: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.mintSecret = mintSecret
        self.lastCursor = lastCursor
        self.backlog = backlog
        self.wasReset = wasReset
    }
}

// Webhooks: the webhook is the app's, in the registry (a change with its audit row); its delivery
// progress is the progress store's (the registry's bookkeeping), which GetWebhook reports.
extension RegistryAdminService {
    public func putWebhook(_ request: Admin.PutWebhookRequest, context: CallContext) -> EventLoopFuture<Admin.PutWebhookReply> {
        let appID = request.appID ?? ""
        let kinds = Set(request.eventKinds.compactMap(FeedEvent.Kind.init(protoName:)))
        return run(context) { [clock, webhookHooks] registry in
            guard try await registry.snapshot().apps[appID] != nil else { throw RegistryError.appNotFound(appID) }
            // Read before the change: every event committed after it has a higher cursor, so a new
            // webhook misses none of them. Used only if the change creates the webhook.
            let startCursor: UInt64
            do {
                startCursor = try await webhookHooks.lastCursor(appID)
            } catch {
                throw RPCError(.unavailable, "the app's event feed cannot be read (a new webhook starts at its last event); try again")
            }
            // Minted every time: whether it is used (no webhook yet, or a rotation) is the change's to decide.
            let secret = webhookHooks.mintSecret()
            let change = RegistryChange.putWebhook(
                appID: appID, url: request.url ?? "", eventKinds: kinds, newSecret: secret, rotate: request.rotateSecret == true,
                startCursor: startCursor)
            try await registry.apply(change, actor: context.principal.keyID, now: clock.now())
            let webhook = try await Self.webhook(of: appID, in: registry)
            // Shown only if it is the one in force: not when the webhook kept its own (it existed, or
            // another call created it first).
            return Admin.PutWebhookReply(
                webhook: try await Self.describe(webhook, appID: appID, registry), signingSecret: webhook.secret == secret ? secret : nil)
        }
    }

    public func getWebhook(_ request: Admin.GetWebhookRequest, context: CallContext) -> EventLoopFuture<Admin.WebhookReply> {
        let appID = request.appID ?? ""
        return run(context) { registry in
            let webhook = try await Self.webhook(of: appID, in: registry)
            return Admin.WebhookReply(webhook: try await Self.describe(webhook, appID: appID, registry))
        }
    }

    /// Answers the webhook as it was; the feed keeps its events.
    public func deleteWebhook(_ request: Admin.DeleteWebhookRequest, context: CallContext) -> EventLoopFuture<Admin.WebhookReply> {
        let appID = request.appID ?? ""
        return run(context) { [clock] registry in
            let webhook = try await Self.webhook(of: appID, in: registry)
            let described = try await Self.describe(webhook, appID: appID, registry)
            try await registry.apply(.deleteWebhook(appID: appID), actor: context.principal.keyID, now: clock.now())
            return Admin.WebhookReply(webhook: described)
        }
    }

    public func resetWebhook(_ request: Admin.ResetWebhookRequest, context: CallContext) -> EventLoopFuture<Admin.WebhookReply> {
        let appID = request.appID ?? ""
        return run(context) { [webhookHooks] registry in
            let webhook = try await Self.webhook(of: appID, in: registry)
            try await registry.resetWebhook(appID: appID)
            webhookHooks.wasReset(appID)
            return Admin.WebhookReply(webhook: try await Self.describe(webhook, appID: appID, registry))
        }
    }

    /// GetAppStats' webhook fields: the state, and the events not yet delivered.
    func webhookFigures(of app: RegisteredApp, in registry: any TenantRegistry) async throws -> (state: String, backlog: UInt64?)? {
        guard let webhook = app.webhook else { return nil }
        let progress = try await Self.progress(of: webhook, appID: app.id, registry)
        return (progress.state, await webhookHooks.backlog(app.id, progress.deliveredCursor))
    }

    private static func webhook(of appID: String, in registry: any TenantRegistry) async throws -> RegisteredWebhook {
        guard let app = try await registry.snapshot().apps[appID] else { throw RegistryError.appNotFound(appID) }
        guard let webhook = app.webhook else { throw RegistryError.webhookNotFound(appID) }
        return webhook
    }

    /// The saved progress of this webhook; a fresh one when none is saved yet, or the saved one
    /// belongs to a webhook deleted since.
    private static func progress(
        of webhook: RegisteredWebhook, appID: String, _ registry: any TenantRegistry
    ) async throws -> WebhookProgress {
        let fresh = WebhookProgress.fresh(for: webhook, appID: appID)
        guard let saved = try await registry.webhookProgress(appID: appID), saved.webhookCreatedAt == webhook.createdAt else {
            return fresh
        }
        return saved
    }

    private static func describe(
        _ webhook: RegisteredWebhook, appID: String, _ registry: any TenantRegistry
    ) async throws -> Admin.Webhook {
        let progress = try await progress(of: webhook, appID: appID, registry)
        return Admin.Webhook(
            appID: appID, url: webhook.url, eventKinds: webhook.sortedKinds.map(\.protoName),
            createdAtMS: webhook.createdAt.milliseconds, updatedAtMS: webhook.updatedAt.milliseconds, state: progress.state,
            deliveredCursor: progress.deliveredCursor, lastSuccessAtMS: progress.lastSuccessAt?.milliseconds,
            lastError: progress.lastError, failingSinceMS: progress.failingSince?.milliseconds,
            attempts: UInt32(clamping: progress.attempts))
    }
}
