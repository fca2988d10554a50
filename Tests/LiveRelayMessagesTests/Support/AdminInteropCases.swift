import LiveRelayMessages

/// The Swift values of the admin API's interop cases: Vectors/admin.json and the admin cases
/// Tests/Interop/interop.py generates (`generated_admin_cases`), written out field by field.
extension InteropCases {
    static let keyPEM = Array(
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgbGl2ZXJlbGF5LXRlc3Qta2V5\n-----END PRIVATE KEY-----\n"
            .utf8)
    static let trustPEM = Array(
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUbW9jay1hcG5zLWNhLWZvci10ZXN0cw==\n-----END CERTIFICATE-----\n".utf8)
    static let publicKeySHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    static let allMethods = ["RegisterToken", "StartActivity", "UpdateActivity", "EndActivity", "Ping"]

    /// interop.py `every_byte_value(n)`.
    static func everyByteValue(_ times: Int) -> [UInt8] { Array(repeating: Array(0...255), count: times).flatMap { $0 } }

    static let fullApp = Admin.App(
        appID: app, bundleID: "com.example.Scores", enabled: true, queueCapacity: 100_000, weight: 3,
        maxPushLifetimeSeconds: 3600,
        quotas: Admin.Quotas(
            callsPerSecond: 12.5, burst: 50, pushesPerHour: 250_000, maxTokens: 1_000_000, maxLiveActivities: 0,
            priorityBudgetPerHour: 60),
        credentials: Admin.APNsCredentialsInfo(
            teamID: "ABCDE12345", keyID: "KEY4567890", endpoint: "apple", keySource: "registry",
            publicKeySHA256: publicKeySHA256, updatedAtMS: 1_767_225_600_000),
        createdAtMS: 1_767_225_500_000, updatedAtMS: 1_767_225_600_000)

    static let fullKey = Admin.APIKey(
        keyID: "abcdefgh2345", appIDs: [app, "com.example.news"], allApps: false, allowedMethods: allMethods,
        admin: false, label: "staging push worker — ✓", createdAtMS: 1_767_225_500_000, lastUsedAtMS: 1_767_225_540_000,
        revokedAtMS: -1)

    static let fullWebhook = Admin.Webhook(
        appID: app, url: "https://hooks.example.com:8443/liverelay?app=scores&v=%E2%9C%93",
        eventKinds: ["EVENT_KIND_PUSH_FAILED", "EVENT_KIND_TOKEN_PRUNED"], createdAtMS: 1_767_225_500_000,
        updatedAtMS: 1_767_225_600_000, state: "failing", deliveredCursor: .max, lastSuccessAtMS: 1_767_225_540_000,
        lastError: "connect: connection refused — ✓", failingSinceMS: -1, attempts: .max)

    static let zeroQuotas = Admin.Quotas(
        callsPerSecond: 0, burst: 0, pushesPerHour: 0, maxTokens: 0, maxLiveActivities: 0, priorityBudgetPerHour: 0)

    static let adminApps: [String: any LiveRelayMessage] = [
        "admin_quotas_every_field": Admin.Quotas(
            callsPerSecond: 12.5, burst: .max, pushesPerHour: .max, maxTokens: 1_000_000, maxLiveActivities: 7,
            priorityBudgetPerHour: UInt32(Int32.max)),
        "admin_quotas_present_zero": zeroQuotas,
        "admin_quotas_empty": Admin.Quotas(),
        "admin_credentials_info_every_field": Admin.APNsCredentialsInfo(
            teamID: "ABCDE12345", keyID: "KEY4567890", endpoint: "[::1]:8443", keySource: "file:/etc/liverelay/AuthKey_é.p8",
            publicKeySHA256: publicKeySHA256, updatedAtMS: -62_135_596_800_000),
        "admin_credentials_info_empty": Admin.APNsCredentialsInfo(),
        "admin_app_every_field": fullApp,
        "admin_app_present_zero": Admin.App(
            appID: "", bundleID: "", enabled: false, queueCapacity: 0, weight: 0, maxPushLifetimeSeconds: 0,
            quotas: Admin.Quotas(), credentials: Admin.APNsCredentialsInfo(), createdAtMS: 0, updatedAtMS: 0),
        "admin_app_empty": Admin.App(),
        "admin_create_app_every_field": Admin.CreateAppRequest(
            appID: app, bundleID: "com.example.Scores-App_2", queueCapacity: 10_000_000, weight: 1000,
            maxPushLifetimeSeconds: 31_536_000,
            quotas: Admin.Quotas(callsPerSecond: 0.5, burst: 10, pushesPerHour: 250_000, maxTokens: 0, maxLiveActivities: .max)),
        "admin_create_app_minimal": Admin.CreateAppRequest(appID: "a", bundleID: "b"),
        "admin_create_app_unknown_fields": Admin.CreateAppRequest(
            appID: app, bundleID: "com.example.Scores", quotas: Admin.Quotas(burst: 1)),
        "admin_update_app_every_field": Admin.UpdateAppRequest(
            appID: app, bundleID: "com.example.Scores2", queueCapacity: 1, weight: 1, maxPushLifetimeSeconds: 0,
            quotas: Admin.Quotas(), enabled: true),
        "admin_update_app_present_zero": Admin.UpdateAppRequest(
            appID: app, maxPushLifetimeSeconds: 0, quotas: zeroQuotas, enabled: false),
        "admin_update_app_minimal": Admin.UpdateAppRequest(appID: app),
        "admin_get_app": Admin.GetAppRequest(appID: app),
        "admin_disable_app": Admin.DisableAppRequest(appID: "com.example.news_2"),
        "admin_app_reply_every_field": Admin.AppReply(app: fullApp),
        "admin_app_reply_empty_app": Admin.AppReply(app: Admin.App()),
        "admin_app_reply_empty": Admin.AppReply(),
        "admin_list_apps_every_field": Admin.ListAppsRequest(pageSize: 1000, pageToken: "cGFnZS0yIOKckw==", includeDisabled: true),
        "admin_list_apps_present_zero": Admin.ListAppsRequest(pageSize: 0, pageToken: "", includeDisabled: false),
        "admin_list_apps_empty": Admin.ListAppsRequest(),
        "admin_list_apps_reply_every_field": Admin.ListAppsReply(
            apps: [fullApp, Admin.App(appID: "com.example.news", bundleID: "com.example.News", enabled: false), Admin.App()],
            nextPageToken: "next-✓"),
        "admin_list_apps_reply_unknown_in_repeated": Admin.ListAppsReply(apps: [Admin.App(appID: "x")]),
        "admin_list_apps_reply_empty": Admin.ListAppsReply(),
    ]

    static let adminCredentialsAndKeys: [String: any LiveRelayMessage] = [
        "admin_put_credentials_pem": Admin.PutAPNsCredentialsRequest(
            appID: app, teamID: "ABCDE12345", keyID: "KEY4567890", privateKeyPEM: keyPEM, endpoint: "apple"),
        "admin_put_credentials_file_and_trust": Admin.PutAPNsCredentialsRequest(
            appID: app, teamID: "0000000000", keyID: "ZZZZZZZZZZ", privateKeyFile: "/run/secrets/AuthKey_é.p8",
            endpoint: "[::1]:8443", trustCertificatePEM: trustPEM),
        "admin_put_credentials_env_empty_trust": Admin.PutAPNsCredentialsRequest(
            appID: app, teamID: "ABCDE12345", keyID: "KEY4567890", privateKeyEnv: "_APNS_KEY_2",
            endpoint: "mock-apns.internal:65535", trustCertificatePEM: []),
        "admin_put_credentials_env_minimal": Admin.PutAPNsCredentialsRequest(
            appID: "a", teamID: "ABCDE12345", keyID: "KEY4567890", privateKeyEnv: "K"),
        "admin_api_key_every_field": fullKey,
        "admin_api_key_admin": Admin.APIKey(keyID: "zzzzzzzz7777", allApps: false, admin: true, label: "", createdAtMS: 0),
        "admin_api_key_empty": Admin.APIKey(),
        "admin_create_api_key_every_field": Admin.CreateAPIKeyRequest(
            appIDs: [app, "com.example.news"], allApps: false, allowedMethods: allMethods, admin: false,
            label: "staging push worker — ✓"),
        "admin_create_api_key_all_apps": Admin.CreateAPIKeyRequest(allApps: true, allowedMethods: ["Ping"]),
        "admin_create_api_key_admin": Admin.CreateAPIKeyRequest(allApps: false, admin: true, label: "ops"),
        "admin_create_api_key_reply_every_field": Admin.CreateAPIKeyReply(
            key: fullKey, secret: "lrk_abcdefgh2345_" + String(repeating: "0123456789abcdef", count: 4)),
        "admin_create_api_key_reply_empty": Admin.CreateAPIKeyReply(),
        "admin_list_api_keys_every_field": Admin.ListAPIKeysRequest(
            appID: app, includeRevoked: true, pageSize: 50, pageToken: "k-2"),
        "admin_list_api_keys_empty": Admin.ListAPIKeysRequest(),
        "admin_list_api_keys_reply_every_field": Admin.ListAPIKeysReply(
            keys: [fullKey, Admin.APIKey(keyID: "zzzzzzzz7777", admin: true)], nextPageToken: "k-3"),
        "admin_list_api_keys_reply_empty": Admin.ListAPIKeysReply(),
        "admin_revoke_api_key": Admin.RevokeAPIKeyRequest(keyID: "abcdefgh2345"),
        "admin_api_key_reply_every_field": Admin.APIKeyReply(key: fullKey),
        "admin_api_key_reply_empty": Admin.APIKeyReply(),
        "admin_get_app_stats": Admin.GetAppStatsRequest(appID: app),
        "admin_outcome_count_every_field": Admin.OutcomeCount(outcome: "failed", reason: "BadDeviceToken", count: .max),
        "admin_outcome_count_empty": Admin.OutcomeCount(),
        "admin_app_stats_every_field": Admin.AppStats(
            appID: app, queueDepth: 12, queueCapacity: 100_000,
            pushes: [
                Admin.OutcomeCount(outcome: "delivered", count: 1000),
                Admin.OutcomeCount(outcome: "failed", reason: "Unregistered", count: 3),
                Admin.OutcomeCount(outcome: "expired", reason: "", count: 0),
            ],
            pushesLastHour: 1003, tokens: 250, liveActivities: 17,
            quotas: Admin.Quotas(callsPerSecond: 6.25, pushesPerHour: 125_000), nodes: 2, heldReason: "InvalidProviderToken",
            heldForMS: 61_000, webhookState: "retrying", webhookBacklog: 1200),
        "admin_app_stats_empty": Admin.AppStats(),
    ]

    static let adminWebhooks: [String: any LiveRelayMessage] = [
        "admin_webhook_every_field": fullWebhook,
        "admin_webhook_present_zero": Admin.Webhook(
            appID: "", url: "", createdAtMS: 0, updatedAtMS: 0, state: "", deliveredCursor: 0, lastSuccessAtMS: 0, lastError: "",
            failingSinceMS: 0, attempts: 0),
        "admin_webhook_empty": Admin.Webhook(),
        "admin_put_webhook_every_field": Admin.PutWebhookRequest(
            appID: app, url: "https://[2001:db8::1]/in", eventKinds: Admin.Webhook.eventKindNames, rotateSecret: true),
        "admin_put_webhook_minimal": Admin.PutWebhookRequest(appID: "a", url: "https://h"),
        "admin_put_webhook_rotate_false": Admin.PutWebhookRequest(
            appID: app, url: "https://10.0.0.1:1/", eventKinds: ["EVENT_KIND_CHANNEL_DELETED"], rotateSecret: false),
        "admin_put_webhook_reply_every_field": Admin.PutWebhookReply(
            webhook: fullWebhook, signingSecret: "whsec_" + String(repeating: "0123456789abcdef", count: 4)),
        "admin_put_webhook_reply_empty": Admin.PutWebhookReply(),
        "admin_get_webhook": Admin.GetWebhookRequest(appID: app),
        "admin_delete_webhook": Admin.DeleteWebhookRequest(appID: "com.example.news_2"),
        "admin_reset_webhook": Admin.ResetWebhookRequest(appID: app),
        "admin_webhook_reply_every_field": Admin.WebhookReply(webhook: fullWebhook),
        "admin_webhook_reply_empty_webhook": Admin.WebhookReply(webhook: Admin.Webhook()),
        "admin_webhook_reply_empty": Admin.WebhookReply(),
    ]

    /// interop.py `generated_admin_cases()`.
    static let adminGenerated: [String: any LiveRelayMessage] = [
        "admin_put_credentials_pem_every_byte_value": Admin.PutAPNsCredentialsRequest(
            appID: app, teamID: "ABCDE12345", keyID: "KEY4567890",
            privateKeyPEM: Array("-----BEGIN PRIVATE KEY-----\n".utf8) + everyByteValue(60)
                + Array("\n-----END PRIVATE KEY-----\n".utf8)),
        "admin_put_credentials_trust_every_byte_value": Admin.PutAPNsCredentialsRequest(
            appID: app, teamID: "ABCDE12345", keyID: "KEY4567890", privateKeyFile: "/run/secrets/AuthKey.p8",
            endpoint: "mock-apns:2197", trustCertificatePEM: everyByteValue(255)),
        "admin_list_apps_reply_300_apps": Admin.ListAppsReply(
            apps: (0..<300).map {
                Admin.App(
                    appID: "app-\($0)", bundleID: "com.example.app\($0)", enabled: $0 % 2 == 0, queueCapacity: UInt32($0),
                    createdAtMS: Int64(-$0))
            },
            nextPageToken: largeText(50)),
    ]
}
