// admin.proto (proto2, package liverelay.admin.v1): the admin API, the tenant
// registry's apps, APNs credentials, quotas, API keys and webhooks.

/// The messages of liverelay.admin.v1 (Protos/liverelay/admin/v1/admin.proto).
///
/// A namespace: `Admin.App`, `Admin.CreateAppRequest`, ... Admin keys and tenant
/// keys are separate roles, and some of these names (`App`, `Quotas`, `APIKey`)
/// are taken elsewhere by the server's own models; inside `Admin` they cannot clash.
/// Every field is optional on the wire (proto2); which ones a request needs is
/// enforced by `validate()`, which decoding runs for requests and which names the field.
public enum Admin {}

/// The admin API's RPC methods (service liverelay.admin.v1.Admin), with the wire
/// names the framing carries and the message names the contract check compares
/// with the service descriptor. Only admin keys may call them; a tenant key's
/// call is PERMISSION_DENIED. Apart from `LiveRelayMethod` on purpose: the two
/// are separate roles, and code that switches over one must not see the other.
public enum AdminMethod: String, CaseIterable, Sendable {
    case createApp = "/liverelay.admin.v1.Admin/CreateApp"
    case updateApp = "/liverelay.admin.v1.Admin/UpdateApp"
    case getApp = "/liverelay.admin.v1.Admin/GetApp"
    case listApps = "/liverelay.admin.v1.Admin/ListApps"
    case disableApp = "/liverelay.admin.v1.Admin/DisableApp"
    case putAPNsCredentials = "/liverelay.admin.v1.Admin/PutAPNsCredentials"
    case createAPIKey = "/liverelay.admin.v1.Admin/CreateAPIKey"
    case listAPIKeys = "/liverelay.admin.v1.Admin/ListAPIKeys"
    case revokeAPIKey = "/liverelay.admin.v1.Admin/RevokeAPIKey"
    case getAppStats = "/liverelay.admin.v1.Admin/GetAppStats"
    case putWebhook = "/liverelay.admin.v1.Admin/PutWebhook"
    case getWebhook = "/liverelay.admin.v1.Admin/GetWebhook"
    case deleteWebhook = "/liverelay.admin.v1.Admin/DeleteWebhook"
    case resetWebhook = "/liverelay.admin.v1.Admin/ResetWebhook"

    public var requestProtoName: String { requestType.protoName }
    public var replyProtoName: String { replyType.protoName }

    /// The Swift type that decodes (and validates) this method's request.
    public var requestType: any LiveRelayMessage.Type {
        switch self {
        case .createApp: Admin.CreateAppRequest.self
        case .updateApp: Admin.UpdateAppRequest.self
        case .getApp: Admin.GetAppRequest.self
        case .listApps: Admin.ListAppsRequest.self
        case .disableApp: Admin.DisableAppRequest.self
        case .putAPNsCredentials: Admin.PutAPNsCredentialsRequest.self
        case .createAPIKey: Admin.CreateAPIKeyRequest.self
        case .listAPIKeys: Admin.ListAPIKeysRequest.self
        case .revokeAPIKey: Admin.RevokeAPIKeyRequest.self
        case .getAppStats: Admin.GetAppStatsRequest.self
        case .putWebhook: Admin.PutWebhookRequest.self
        case .getWebhook: Admin.GetWebhookRequest.self
        case .deleteWebhook: Admin.DeleteWebhookRequest.self
        case .resetWebhook: Admin.ResetWebhookRequest.self
        }
    }

    /// The Swift type of this method's reply.
    public var replyType: any LiveRelayMessage.Type {
        switch self {
        case .createApp, .updateApp, .getApp, .disableApp, .putAPNsCredentials: Admin.AppReply.self
        case .listApps: Admin.ListAppsReply.self
        case .createAPIKey: Admin.CreateAPIKeyReply.self
        case .listAPIKeys: Admin.ListAPIKeysReply.self
        case .revokeAPIKey: Admin.APIKeyReply.self
        case .getAppStats: Admin.AppStats.self
        case .putWebhook: Admin.PutWebhookReply.self
        case .getWebhook, .deleteWebhook, .resetWebhook: Admin.WebhookReply.self
        }
    }

    /// The RPC's name without the service path ("CreateApp"), as operators write it.
    public var methodName: String { methodNameOfPath(rawValue) }

    public init?(methodName: String) {
        guard let method = AdminMethod.allCases.first(where: { $0.methodName == methodName }) else { return nil }
        self = method
    }
}
