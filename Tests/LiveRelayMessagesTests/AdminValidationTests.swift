import Testing

@testable import LiveRelayMessages

/// One test per admin rule: each breaks exactly one rule of a valid fixture (AdminFixtures),
/// and each boundary value that must pass does.
@Suite struct AdminValidationTests {
    typealias F = AdminFixtures

    // MARK: app_id

    @Test func appIDRequiredWhereTheRPCNeedsIt() {
        var create = F.createApp; create.appID = nil
        var update = F.updateApp; update.appID = ""
        var put = F.putCredentials; put.appID = nil
        var webhook = F.putWebhook; webhook.appID = ""
        let requests: [any LiveRelayMessage] = [
            create, update, Admin.GetAppRequest(), Admin.DisableAppRequest(appID: ""), put, Admin.GetAppStatsRequest(), webhook,
            Admin.GetWebhookRequest(), Admin.DeleteWebhookRequest(appID: ""), Admin.ResetWebhookRequest(),
        ]
        for request in requests {
            #expect(validationError(request) == MessageError(.missing, field: "app_id"), "\(type(of: request).protoName)")
        }
    }

    @Test func appIDIsTheTenantAPIsAppID() {
        var create = F.createApp; create.appID = String(repeating: "a", count: 129)
        #expect(validationError(create) == MessageError(.tooLong(length: 129, max: 128), field: "app_id"))
        create.appID = String(repeating: "a", count: 128)
        #expect(validationError(create) == nil)
        #expect(validationError(Admin.GetAppStatsRequest(appID: "com/example"))?.field == "app_id")
        #expect(validationError(Admin.DisableAppRequest(appID: "com example"))?.kind == .invalidValue)
        #expect(validationError(Admin.GetAppRequest(appID: "Com.Example-app_2")) == nil)
        #expect(validationError(Admin.ResetWebhookRequest(appID: "com example"))?.field == "app_id")
        var webhook = F.putWebhook; webhook.appID = String(repeating: "a", count: 129)
        #expect(validationError(webhook) == MessageError(.tooLong(length: 129, max: 128), field: "app_id"))
    }

    @Test func listAPIKeysAppIDIsOptionalButValid() {
        var list = F.listKeys; list.appID = nil
        #expect(validationError(list) == nil)
        list.appID = ""
        #expect(validationError(list) == MessageError(.invalidValue, field: "app_id", detail: "empty: leave it out instead"))
        list.appID = "bad app"
        #expect(validationError(list)?.field == "app_id")
    }

    // MARK: bundle_id

    @Test func bundleIDRequiredForCreateApp() {
        var create = F.createApp; create.bundleID = nil
        #expect(validationError(create) == MessageError(.missing, field: "bundle_id"))
        create.bundleID = ""
        #expect(validationError(create) == MessageError(.missing, field: "bundle_id"))
        var update = F.updateApp; update.bundleID = nil
        #expect(validationError(update) == nil)
        update.bundleID = ""
        #expect(validationError(update)?.field == "bundle_id")
    }

    @Test func bundleIDLength() {
        var create = F.createApp; create.bundleID = String(repeating: "b", count: 255)
        #expect(validationError(create) == nil)
        create.bundleID = String(repeating: "b", count: 256)
        #expect(validationError(create) == MessageError(.tooLong(length: 256, max: 255), field: "bundle_id"))
        var update = F.updateApp; update.bundleID = String(repeating: "b", count: 256)
        #expect(validationError(update)?.kind == .tooLong(length: 256, max: 255))
    }

    @Test func bundleIDCharacters() {
        var create = F.createApp
        for bad in ["com.example/app", "com example", "com.exämple", "com.example+app", "com.example\u{0}"] {
            create.bundleID = bad
            #expect(validationError(create)?.field == "bundle_id", "\(bad)")
        }
        create.bundleID = "-Com.example_2-app"
        #expect(validationError(create) == nil)
    }

    @Test func bundleIDNoLeadingDot() {
        var create = F.createApp; create.bundleID = ".com.example"
        #expect(validationError(create) == MessageError(.invalidValue, field: "bundle_id", detail: "must not start with '.'"))
        var update = F.updateApp; update.bundleID = "."
        #expect(validationError(update)?.field == "bundle_id")
        create.bundleID = "com.example."
        #expect(validationError(create) == nil)
    }

    // MARK: team_id, key_id

    @Test func teamIDAndKeyIDAreTenUppercaseAlphanumerics() {
        for name in ["team_id", "key_id"] {
            func with(_ value: String?) -> Admin.PutAPNsCredentialsRequest {
                var put = F.putCredentials
                if name == "team_id" { put.teamID = value } else { put.keyID = value }
                return put
            }
            #expect(validationError(with(nil)) == MessageError(.missing, field: name))
            #expect(validationError(with("")) == MessageError(.missing, field: name))
            for bad in ["ABCDE1234", "ABCDE123456", "abcde12345", "ABCDE-1234", "ABCDE 1234", "ÄBCDE1234"] {
                #expect(validationError(with(bad))?.field == name, "\(name) \(bad)")
                #expect(validationError(with(bad))?.kind == .invalidValue, "\(name) \(bad)")
            }
            #expect(validationError(with("0123456789")) == nil)
            #expect(validationError(with("ZZZZZZZZZZ")) == nil)
        }
    }

    // MARK: endpoint

    @Test func endpointIsAppleOrHostPort() {
        var put = F.putCredentials
        for good in [
            nil, "apple", "api.push.apple.com:443", "localhost:1", "mock:65535", "[::1]:8443", "10.0.0.1:2197", "mock_apns:2197",
            "[2001:db8::10.0.0.1]:443",
        ] {
            put.endpoint = good
            #expect(validationError(put) == nil, "\(good ?? "nil")")
        }
        let bad = [
            "", "Apple", "apple.com", ":443", "host:", "host:0", "host:65536", "host:99999999999999999999", "host:44a",
            "host:-1", "host:+1", "ho st:443", "host\t:443", "host\u{85}:443", " host:443", "host: 443",
            // A host is a DNS name, an IPv4 address or a bracketed IPv6 address: no URL, path or bare IPv6.
            "https://h:443", "h/x:443", "::1:8443", "[::1:8443", "[fe80::1%eth0]:443", "h..x:443", "-h:443", "256.0.0.1:443",
        ]
        for value in bad {
            put.endpoint = value
            #expect(validationError(put)?.field == "endpoint", "\(value.debugDescription)")
            #expect(validationError(put)?.kind == .invalidValue, "\(value.debugDescription)")
        }
        // 253 bytes: three labels of 63 and one of 61; a label is at most 63.
        let label = String(repeating: "h", count: 63)
        put.endpoint = [label, label, label, String(repeating: "h", count: 61)].joined(separator: ".") + ":443"
        #expect(validationError(put) == nil)
        put.endpoint = [label, label, label, String(repeating: "h", count: 62)].joined(separator: ".") + ":443"
        #expect(validationError(put)?.field == "endpoint")
        put.endpoint = label + "h:443"
        #expect(validationError(put)?.field == "endpoint")
    }

    // MARK: the key's source

    @Test func exactlyOneKeySource() {
        var put = F.putCredentials; put.privateKeyPEM = nil
        #expect(validationError(put)?.field == "private_key_pem")
        #expect(validationError(put)?.kind == .missing)
        put.privateKeyFile = "/k.p8"
        #expect(validationError(put) == nil)
        put.privateKeyEnv = "APNS_KEY"
        #expect(validationError(put)?.field == "private_key_env")
        put.privateKeyPEM = F.pem
        #expect(validationError(put)?.field == "private_key_file")
        put.privateKeyFile = nil
        #expect(validationError(put)?.field == "private_key_env")
        #expect(validationError(put)?.kind == .invalidValue)
        put.privateKeyEnv = nil
        #expect(validationError(put) == nil)
        // A present empty source counts as given.
        put.privateKeyFile = ""
        #expect(validationError(put)?.field == "private_key_file")
    }

    @Test func keySourcesAreNonEmpty() {
        var put = F.putCredentials; put.privateKeyPEM = []
        #expect(validationError(put) == MessageError(.invalidValue, field: "private_key_pem", detail: "empty"))
        put.privateKeyPEM = nil; put.privateKeyFile = ""
        #expect(validationError(put) == MessageError(.invalidValue, field: "private_key_file", detail: "empty"))
        put.privateKeyFile = nil; put.privateKeyEnv = ""
        #expect(validationError(put) == MessageError(.invalidValue, field: "private_key_env", detail: "empty"))
    }

    @Test func privateKeyPEMSizeAndHeader() {
        var put = F.putCredentials
        let header = Array("-----BEGIN PRIVATE KEY-----\n".utf8)
        put.privateKeyPEM = header + Array(repeating: 0x41, count: 16 * 1024 - header.count)
        #expect(validationError(put) == nil)
        put.privateKeyPEM = header + Array(repeating: 0x41, count: 16 * 1024 - header.count + 1)
        #expect(validationError(put) == MessageError(.tooLong(length: 16_385, max: 16_384), field: "private_key_pem"))
        for bad in [
            "-----BEGIN EC PRIVATE KEY-----\nAAAA\n", "-----BEGIN PRIVATE KEY----\n", "MIGHAgEAMBMGByqGSM49", "-----begin private key-----",
        ] {
            put.privateKeyPEM = Array(bad.utf8)
            #expect(validationError(put)?.field == "private_key_pem", "\(bad)")
            #expect(validationError(put)?.kind == .invalidValue, "\(bad)")
        }
        // The header anywhere (after comments, at the very end) will do; the server parses the key.
        put.privateKeyPEM = Array("comment\r\n".utf8) + [0, 0xFF] + header.dropLast()
        #expect(validationError(put) == nil)
    }

    @Test func privateKeyFile() {
        var put = F.putCredentials; put.privateKeyPEM = nil
        put.privateKeyFile = "/" + String(repeating: "k", count: 4095)
        #expect(validationError(put) == nil)
        put.privateKeyFile = "/" + String(repeating: "k", count: 4096)
        #expect(validationError(put) == MessageError(.tooLong(length: 4097, max: 4096), field: "private_key_file"))
        put.privateKeyFile = "/keys/a\u{0}b.p8"
        #expect(validationError(put) == MessageError(.embeddedNUL, field: "private_key_file"))
    }

    @Test func privateKeyEnvIsAnEnvironmentName() {
        var put = F.putCredentials; put.privateKeyPEM = nil
        for good in ["K", "_", "APNS_KEY_2", "_9", String(repeating: "K", count: 128)] {
            put.privateKeyEnv = good
            #expect(validationError(put) == nil, "\(good)")
        }
        for bad in ["apns_key", "1KEY", "KEY-1", "KEY 1", "KEY=1", "$KEY", "KÉY"] {
            put.privateKeyEnv = bad
            #expect(
                validationError(put) == MessageError(.invalidValue, field: "private_key_env", detail: "must match [A-Z_][A-Z0-9_]*"),
                "\(bad)")
        }
        put.privateKeyEnv = String(repeating: "K", count: 129)
        #expect(validationError(put)?.kind == .tooLong(length: 129, max: 128))
    }

    // MARK: trust_certificate_pem

    @Test func trustCertificateOnlyWithHostPort() {
        var put = F.putCredentials; put.trustCertificatePEM = Array("-----BEGIN CERTIFICATE-----".utf8)
        #expect(validationError(put)?.field == "trust_certificate_pem")
        put.endpoint = "apple"
        #expect(validationError(put)?.field == "trust_certificate_pem")
        #expect(validationError(put)?.kind == .invalidValue)
        put.endpoint = "mock-apns:2197"
        #expect(validationError(put) == nil)
        put.trustCertificatePEM = nil; put.endpoint = "apple"
        #expect(validationError(put) == nil)
    }

    @Test func trustCertificateSize() {
        var put = F.putCredentials; put.endpoint = "mock-apns:2197"
        put.trustCertificatePEM = Array(repeating: 0x43, count: 64 * 1024)
        #expect(validationError(put) == nil)
        put.trustCertificatePEM = Array(repeating: 0x43, count: 64 * 1024 + 1)
        #expect(validationError(put) == MessageError(.tooLong(length: 65_537, max: 65_536), field: "trust_certificate_pem"))
    }

    // MARK: the app's limits

    @Test func queueCapacityRange() {
        var create = F.createApp
        var update = F.updateApp
        for (value, ok) in [(0, false), (1, true), (10_000_000, true), (10_000_001, false), (UInt32.max, false)] {
            create.queueCapacity = UInt32(value)
            update.queueCapacity = UInt32(value)
            #expect((validationError(create) == nil) == ok, "\(value)")
            #expect((validationError(update) == nil) == ok, "\(value)")
            if !ok { #expect(validationError(create)?.field == "queue_capacity") }
        }
        create.queueCapacity = 0
        #expect(validationError(create) == MessageError(.outOfRange, field: "queue_capacity", detail: "0 is outside 1...10000000"))
    }

    @Test func weightRange() {
        var create = F.createApp
        var update = F.updateApp
        for (value, ok) in [(0, false), (1, true), (1000, true), (1001, false)] {
            create.weight = UInt32(value)
            update.weight = UInt32(value)
            #expect((validationError(create) == nil) == ok, "\(value)")
            #expect((validationError(update) == nil) == ok, "\(value)")
            if !ok {
                #expect(validationError(update) == MessageError(.outOfRange, field: "weight", detail: "\(value) is outside 1...1000"))
            }
        }
    }

    @Test func maxPushLifetimeAtMostAYear() {
        var create = F.createApp
        var update = F.updateApp
        for (value, ok) in [(0, true), (31_536_000, true), (31_536_001, false), (Int(UInt32.max), false)] {
            create.maxPushLifetimeSeconds = UInt32(value)
            update.maxPushLifetimeSeconds = UInt32(value)
            #expect((validationError(create) == nil) == ok, "\(value)")
            #expect((validationError(update) == nil) == ok, "\(value)")
            if !ok { #expect(validationError(create)?.field == "max_push_lifetime_s") }
        }
    }

    @Test func absentLimitsAreFine() {
        #expect(validationError(Admin.CreateAppRequest(appID: "a", bundleID: "b")) == nil)
        #expect(validationError(Admin.UpdateAppRequest(appID: "a")) == nil)
    }

    @Test func quotasCallsPerSecondFiniteAndNotNegative() {
        var create = F.createApp
        var update = F.updateApp
        for bad in [-1, -0.000_001, .nan, .infinity, -.infinity] as [Double] {
            create.quotas?.callsPerSecond = bad
            update.quotas?.callsPerSecond = bad
            let expected = MessageError(.outOfRange, field: "quotas.calls_per_second", detail: "must be finite and not negative")
            #expect(validationError(create) == expected, "\(bad)")
            #expect(validationError(update) == expected, "\(bad)")
        }
        for good in [0, -0.0, 0.001, 1e12, .greatestFiniteMagnitude] as [Double] {
            create.quotas?.callsPerSecond = good
            #expect(validationError(create) == nil, "\(good)")
        }
        // The other limits may be anything: 0 means no limit. The priority budget stays within an int32.
        create.quotas = Admin.Quotas(
            callsPerSecond: 0, burst: 0, pushesPerHour: .max, maxTokens: 0, maxLiveActivities: .max,
            priorityBudgetPerHour: UInt32(Int32.max))
        #expect(validationError(create) == nil)
        create.quotas?.priorityBudgetPerHour = UInt32(Int32.max) + 1
        #expect(validationError(create)?.field == "quotas.priority_budget_per_hour")
        create.quotas = Admin.Quotas()
        #expect(validationError(create) == nil)
        #expect(validationError(Admin.Quotas(callsPerSecond: -1))?.field == "calls_per_second")
    }

    // MARK: CreateAPIKey

    @Test func adminKeyForbidsAppsAllAppsAndMethods() {
        #expect(validationError(F.adminKey) == nil)
        var key = F.adminKey; key.allApps = false
        #expect(validationError(key) == nil)
        key.appIDs = [F.app]
        #expect(validationError(key)?.field == "app_ids")
        key.appIDs = []; key.allApps = true
        #expect(validationError(key)?.field == "all_apps")
        key.allApps = nil; key.allowedMethods = ["Ping"]
        #expect(validationError(key)?.field == "allowed_methods")
        #expect(validationError(key)?.kind == .invalidValue)
    }

    @Test func tenantKeyNamesItsAppsOneWay() {
        var key = F.tenantKey; key.appIDs = []
        #expect(
            validationError(key) == MessageError(.missing, field: "app_ids", detail: "list the apps the key may act for, or set all_apps"))
        key.allApps = false
        #expect(validationError(key)?.kind == .missing)
        key.allApps = true
        #expect(validationError(key) == nil)
        key.appIDs = [F.app]
        #expect(validationError(key)?.field == "app_ids")
        #expect(validationError(key)?.kind == .invalidValue)
        key.allApps = false
        #expect(validationError(key) == nil)
        key.admin = false
        #expect(validationError(key) == nil)
    }

    @Test func tenantKeyAppIDsAreValidAndDistinct() {
        var key = F.tenantKey; key.appIDs = [F.app, "bad app"]
        #expect(validationError(key)?.field == "app_ids[1]")
        key.appIDs = [F.app, ""]
        #expect(validationError(key) == MessageError(.missing, field: "app_ids[1]"))
        key.appIDs = ["a", String(repeating: "b", count: 129)]
        #expect(validationError(key)?.kind == .tooLong(length: 129, max: 128))
        key.appIDs = ["a", "b", "a"]
        #expect(validationError(key) == MessageError(.invalidValue, field: "app_ids[2]", detail: "repeats app_ids[0]"))
        key.appIDs = ["a", "A"]
        #expect(validationError(key) == nil)
    }

    @Test func tenantKeyMethodsAreKnownLiveRelayMethods() {
        var key = F.tenantKey; key.allowedMethods = []
        #expect(validationError(key)?.field == "allowed_methods")
        #expect(validationError(key)?.kind == .missing)
        key.allowedMethods = LiveRelayMethod.allCases.map(\.methodName)
        #expect(validationError(key) == nil)
        for bad in ["CreateApp", "ping", "/liverelay.v1.LiveRelay/Ping", "", "Ping "] {
            key.allowedMethods = ["StartActivity", bad]
            #expect(validationError(key)?.field == "allowed_methods[1]", "\(bad.debugDescription)")
            #expect(validationError(key)?.kind == .invalidValue, "\(bad.debugDescription)")
        }
        key.allowedMethods = ["Ping", "StartActivity", "Ping"]
        #expect(validationError(key) == MessageError(.invalidValue, field: "allowed_methods[2]", detail: "repeats allowed_methods[0]"))
        key.allowedMethods = ["Pi\u{0}ng"]
        #expect(validationError(key) == MessageError(.embeddedNUL, field: "allowed_methods[0]"))
    }

    @Test func labelLengthAndCharacters() {
        for var key in [F.tenantKey, F.adminKey] {
            key.label = String(repeating: "l", count: 200)
            #expect(validationError(key) == nil)
            key.label = String(repeating: "é", count: 100)  // 200 bytes
            #expect(validationError(key) == nil)
            key.label = String(repeating: "l", count: 201)
            #expect(validationError(key) == MessageError(.tooLong(length: 201, max: 200), field: "label"))
            key.label = String(repeating: "é", count: 101)  // 101 characters, 202 bytes
            #expect(validationError(key) == MessageError(.tooLong(length: 202, max: 200), field: "label"))
            for bad in ["a\tb", "line\n", "del\u{7F}", "c1\u{85}"] {
                key.label = bad
                #expect(
                    validationError(key) == MessageError(.invalidValue, field: "label", detail: "contains a control character"),
                    "\(bad.debugDescription)")
            }
            key.label = "ops\u{0}"
            #expect(validationError(key) == MessageError(.embeddedNUL, field: "label"))
            key.label = "push worker — 東京 🚀"
            #expect(validationError(key) == nil)
            key.label = ""
            #expect(validationError(key) == nil)
        }
    }

    // MARK: RevokeAPIKey, pages

    @Test func revokeKeyIDIsTwelveBase32Characters() {
        #expect(validationError(Admin.RevokeAPIKeyRequest()) == MessageError(.missing, field: "key_id"))
        #expect(validationError(Admin.RevokeAPIKeyRequest(keyID: "")) == MessageError(.missing, field: "key_id"))
        for bad in [
            "abcdefgh234", "abcdefgh23456", "ABCDEFGH2345", "abcdefgh2341", "abcdefgh0000", "abcdefgh8888", "abcdefgh234=", "abcdéfgh2345",
        ] {
            #expect(
                validationError(Admin.RevokeAPIKeyRequest(keyID: bad))
                    == MessageError(.invalidValue, field: "key_id", detail: "must be exactly 12 characters of a-z and 2-7"), "\(bad)")
        }
        #expect(validationError(Admin.RevokeAPIKeyRequest(keyID: "zyxwvuts7654")) == nil)
    }

    @Test func pageSizeAtMostAThousand() {
        var apps = F.listApps
        var keys = F.listKeys
        for (size, ok) in [(0, true), (1, true), (1000, true), (1001, false), (Int(UInt32.max), false)] {
            apps.pageSize = UInt32(size)
            keys.pageSize = UInt32(size)
            #expect((validationError(apps) == nil) == ok, "\(size)")
            #expect((validationError(keys) == nil) == ok, "\(size)")
            if !ok {
                #expect(validationError(keys) == MessageError(.outOfRange, field: "page_size", detail: "\(size) is outside 0...1000"))
            }
        }
    }

    @Test func pageTokenAtMost512Bytes() {
        var apps = F.listApps
        var keys = F.listKeys
        apps.pageToken = String(repeating: "t", count: 512)
        keys.pageToken = apps.pageToken
        #expect(validationError(apps) == nil)
        #expect(validationError(keys) == nil)
        apps.pageToken = String(repeating: "t", count: 513)
        keys.pageToken = String(repeating: "é", count: 257)  // 514 bytes
        #expect(validationError(apps) == MessageError(.tooLong(length: 513, max: 512), field: "page_token"))
        #expect(validationError(keys) == MessageError(.tooLong(length: 514, max: 512), field: "page_token"))
        apps.pageToken = "t\u{0}"
        #expect(validationError(apps) == MessageError(.embeddedNUL, field: "page_token"))
        #expect(validationError(Admin.ListAppsRequest()) == nil)
        #expect(validationError(Admin.ListAPIKeysRequest()) == nil)
    }

    // MARK: webhooks

    @Test func webhookURLIsRequired() {
        var put = F.putWebhook; put.url = nil
        #expect(validationError(put) == MessageError(.missing, field: "url"))
        put.url = ""
        #expect(validationError(put) == MessageError(.missing, field: "url"))
    }

    @Test func webhookURLAtMost2048BytesWithoutNUL() {
        var put = F.putWebhook
        let base = "https://hooks.example.com/"
        put.url = base + String(repeating: "p", count: 2048 - base.utf8.count)
        #expect(validationError(put) == nil)
        put.url = base + String(repeating: "p", count: 2049 - base.utf8.count)
        #expect(validationError(put) == MessageError(.tooLong(length: 2049, max: 2048), field: "url"))
        put.url = base + "a\u{0}b"
        #expect(validationError(put) == MessageError(.embeddedNUL, field: "url"))
    }

    @Test func webhookURLIsAnHTTPSURLWithAHost() {
        var put = F.putWebhook
        for good in [
            "https://h", "HTTPS://Hooks.Example.com:8443/in?x=1&y=%2F", "https://10.0.0.1/", "https://[::1]:1/", "https://h?q",
        ] {
            put.url = good
            #expect(validationError(put) == nil, "\(good)")
        }
        for bad in [
            "http://hooks.example.com/", "hooks.example.com/in", "https://", "https:///in", "https://user@h/", "https://h/#top",
            "https://h:0/", "https://h:65536/", "https://::1/", "https://h/a b", "https://h/ü", "https://h/%zz", "https://h\\x/",
            "ftp://h/",
        ] {
            put.url = bad
            #expect(validationError(put)?.field == "url", "\(bad)")
            #expect(validationError(put)?.kind == .invalidValue, "\(bad)")
        }
    }

    @Test func webhookEventKindsAreKnownNamesOnce() {
        var put = F.putWebhook; put.eventKinds = []
        #expect(validationError(put) == nil)
        put.eventKinds = Admin.Webhook.eventKindNames
        #expect(validationError(put) == nil)
        for bad in ["EVENT_KIND_UNSPECIFIED", "PUSH_FAILED", "event_kind_push_failed", "", "EVENT_KIND_PUSH_FAILED "] {
            put.eventKinds = ["EVENT_KIND_CALL_SETTLED", bad]
            #expect(validationError(put)?.field == "event_kinds[1]", "\(bad)")
            #expect(validationError(put)?.kind == .invalidValue, "\(bad)")
        }
        put.eventKinds = ["EVENT_KIND_CALL_SETTLED", "X\u{0}"]
        #expect(validationError(put) == MessageError(.embeddedNUL, field: "event_kinds[1]"))
        put.eventKinds = ["EVENT_KIND_PUSH_FAILED", "EVENT_KIND_TOKEN_PRUNED", "EVENT_KIND_PUSH_FAILED"]
        #expect(validationError(put) == MessageError(.invalidValue, field: "event_kinds[2]", detail: "repeats event_kinds[0]"))
    }

    @Test func errorsBecomeFieldViolations() {
        var create = F.createApp; create.quotas = Admin.Quotas(callsPerSecond: .nan)
        let error = expectError(Admin.CreateAppRequest.self, create.serializedBytes())
        #expect(error?.fieldViolation == FieldViolation(field: "quotas.calls_per_second", description: "must be finite and not negative"))
    }
}
