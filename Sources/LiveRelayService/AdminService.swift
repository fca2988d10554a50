import LiveRelayMessages
import NIOCore

/// The admin API (liverelay.admin.v1.Admin) as the server calls it: the
/// tenant registry's apps, APNs credentials, API keys and webhooks.
///
/// A seam apart from ``LiveRelayService`` so that the server knows neither
/// the registry nor the store, and a server without an admin service answers
/// the admin methods UNIMPLEMENTED. The server calls it only for admin keys
/// (`Principal.isAdmin`); every request has been validated by its decoding.
public protocol AdminService: Sendable {
    func createApp(_ request: Admin.CreateAppRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply>
    func updateApp(_ request: Admin.UpdateAppRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply>
    func getApp(_ request: Admin.GetAppRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply>
    func listApps(_ request: Admin.ListAppsRequest, context: CallContext) -> EventLoopFuture<Admin.ListAppsReply>
    func disableApp(_ request: Admin.DisableAppRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply>
    func putAPNsCredentials(_ request: Admin.PutAPNsCredentialsRequest, context: CallContext) -> EventLoopFuture<Admin.AppReply>
    func createAPIKey(_ request: Admin.CreateAPIKeyRequest, context: CallContext) -> EventLoopFuture<Admin.CreateAPIKeyReply>
    func listAPIKeys(_ request: Admin.ListAPIKeysRequest, context: CallContext) -> EventLoopFuture<Admin.ListAPIKeysReply>
    func revokeAPIKey(_ request: Admin.RevokeAPIKeyRequest, context: CallContext) -> EventLoopFuture<Admin.APIKeyReply>
    func getAppStats(_ request: Admin.GetAppStatsRequest, context: CallContext) -> EventLoopFuture<Admin.AppStats>
    func putWebhook(_ request: Admin.PutWebhookRequest, context: CallContext) -> EventLoopFuture<Admin.PutWebhookReply>
    func getWebhook(_ request: Admin.GetWebhookRequest, context: CallContext) -> EventLoopFuture<Admin.WebhookReply>
    func deleteWebhook(_ request: Admin.DeleteWebhookRequest, context: CallContext) -> EventLoopFuture<Admin.WebhookReply>
    func resetWebhook(_ request: Admin.ResetWebhookRequest, context: CallContext) -> EventLoopFuture<Admin.WebhookReply>
}
