import LiveRelayMessages

/// FuzzAdminRequest: byte 0 picks the admin request type, `AdminMethod.allCases[byte % count]`,
/// and the rest of the input goes through `fuzzRequest` as that type. One target for the ten
/// admin requests: they share their rules, and the selector lets libFuzzer move an input
/// from one type to another.
public func fuzzAdminRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) {
    guard let data, size > 0 else { return }
    let method = AdminMethod.allCases[Int(data[0]) % AdminMethod.allCases.count]
    fuzzRequest(method.requestType, data + 1, size - 1)
}

/// The selector byte of an admin request type's inputs.
public func adminSelector(_ method: AdminMethod) -> UInt8 {
    UInt8(AdminMethod.allCases.firstIndex(of: method)!)
}

extension Seeds {
    static let pem = Array(
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgbGl2ZXJlbGF5LWZ1enota2V5\n-----END PRIVATE KEY-----\n"
            .utf8)

    /// A valid request of every admin method, each prefixed with its selector byte.
    public static var adminRequests: [(String, [UInt8])] {
        let app = "com.example.scores"
        let requests: [(String, AdminMethod, any LiveRelayMessage)] = [
            (
                "swift-create-app", .createApp,
                Admin.CreateAppRequest(
                    appID: app, bundleID: "com.example.Scores", queueCapacity: 100_000, weight: 2, maxPushLifetimeSeconds: 3600,
                    quotas: Admin.Quotas(callsPerSecond: 50, burst: 100, pushesPerHour: 250_000, maxTokens: 0, maxLiveActivities: 0))
            ),
            ("swift-update-app", .updateApp, Admin.UpdateAppRequest(appID: app, weight: 1, quotas: Admin.Quotas(), enabled: true)),
            ("swift-get-app", .getApp, Admin.GetAppRequest(appID: app)),
            ("swift-list-apps", .listApps, Admin.ListAppsRequest(pageSize: 100, pageToken: "cGFnZS0y", includeDisabled: true)),
            ("swift-disable-app", .disableApp, Admin.DisableAppRequest(appID: app)),
            (
                "swift-put-credentials-pem", .putAPNsCredentials,
                Admin.PutAPNsCredentialsRequest(appID: app, teamID: "ABCDE12345", keyID: "KEY4567890", privateKeyPEM: pem)
            ),
            (
                "swift-put-credentials-env", .putAPNsCredentials,
                Admin.PutAPNsCredentialsRequest(
                    appID: app, teamID: "ABCDE12345", keyID: "KEY4567890", privateKeyEnv: "APNS_KEY", endpoint: "mock-apns:2197",
                    trustCertificatePEM: Array(0...255))
            ),
            (
                "swift-create-tenant-key", .createAPIKey,
                Admin.CreateAPIKeyRequest(appIDs: [app, "com.example.news"], allowedMethods: ["StartActivity", "Ping"], label: "worker ✓")
            ),
            ("swift-create-admin-key", .createAPIKey, Admin.CreateAPIKeyRequest(admin: true, label: "ops")),
            ("swift-list-keys", .listAPIKeys, Admin.ListAPIKeysRequest(appID: app, includeRevoked: true, pageSize: 50, pageToken: "k2")),
            ("swift-revoke-key", .revokeAPIKey, Admin.RevokeAPIKeyRequest(keyID: "abcdefgh2345")),
            ("swift-get-app-stats", .getAppStats, Admin.GetAppStatsRequest(appID: app)),
        ]
        return requests.map { name, method, request in (name, [adminSelector(method)] + request.serializedBytes()) }
    }
}
