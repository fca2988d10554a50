import CLiveRelayProto
import NIOCore
import Testing

@testable import LiveRelayMessages

/// Valid admin requests to mutate one field at a time.
enum AdminFixtures {
    static let app = "com.example.app"
    static let pem = Array(
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n".utf8)

    static var quotas: Admin.Quotas {
        Admin.Quotas(callsPerSecond: 10, burst: 20, pushesPerHour: 250_000, maxTokens: 0, maxLiveActivities: 5000)
    }

    static var createApp: Admin.CreateAppRequest {
        Admin.CreateAppRequest(
            appID: app, bundleID: "com.example.App", queueCapacity: 100_000, weight: 1, maxPushLifetimeSeconds: 3600,
            quotas: quotas)
    }

    static var updateApp: Admin.UpdateAppRequest {
        Admin.UpdateAppRequest(
            appID: app, bundleID: "com.example.App2", queueCapacity: 5000, weight: 2, maxPushLifetimeSeconds: 0,
            quotas: Admin.Quotas(callsPerSecond: 0.5), enabled: true)
    }

    static var putCredentials: Admin.PutAPNsCredentialsRequest {
        Admin.PutAPNsCredentialsRequest(appID: app, teamID: "ABCDE12345", keyID: "KEY4567890", privateKeyPEM: pem)
    }

    static var tenantKey: Admin.CreateAPIKeyRequest {
        Admin.CreateAPIKeyRequest(appIDs: [app, "com.example.other"], allowedMethods: ["StartActivity", "Ping"], label: "worker")
    }

    static var adminKey: Admin.CreateAPIKeyRequest { Admin.CreateAPIKeyRequest(admin: true, label: "ops") }

    static var listApps: Admin.ListAppsRequest { Admin.ListAppsRequest(pageSize: 100, pageToken: "p2", includeDisabled: true) }

    static var listKeys: Admin.ListAPIKeysRequest {
        Admin.ListAPIKeysRequest(appID: app, includeRevoked: false, pageSize: 100, pageToken: "k2")
    }

    static var revoke: Admin.RevokeAPIKeyRequest { Admin.RevokeAPIKeyRequest(keyID: "abcdefgh2345") }

    static var putWebhook: Admin.PutWebhookRequest {
        Admin.PutWebhookRequest(
            appID: app, url: "https://hooks.example.com/liverelay", eventKinds: ["EVENT_KIND_PUSH_FAILED", "EVENT_KIND_CALL_SETTLED"])
    }

    /// Every admin request, valid.
    static var requests: [any LiveRelayMessage] {
        [
            createApp, updateApp, Admin.GetAppRequest(appID: app), Admin.DisableAppRequest(appID: app), listApps,
            putCredentials, tenantKey, adminKey, listKeys, revoke, Admin.GetAppStatsRequest(appID: app), putWebhook,
            Admin.GetWebhookRequest(appID: app), Admin.DeleteWebhookRequest(appID: app), Admin.ResetWebhookRequest(appID: app),
        ]
    }
}

@Suite struct AdminMessageTests {
    // MARK: round trips

    /// Encodes, checks the C struct protobuf-c unpacks with protobuf_c_message_check, decodes
    /// (validating requests), compares, and checks that re-encoding is byte-identical.
    static func roundTrip<M: LiveRelayMessage>(_ value: M, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let bytes = value.serializedBytes()
        let descriptor = try #require((M.self as? any CMessageConvertible.Type)?.cDescriptor)
        #expect(String(cString: descriptor.pointee.name) == M.protoName, sourceLocation: sourceLocation)
        #expect(TestWire.check(bytes, descriptor), "protobuf_c_message_check failed for \(M.protoName)", sourceLocation: sourceLocation)
        let decoded = try M(serializedBytes: bytes)
        #expect(decoded == value, sourceLocation: sourceLocation)
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        value.serialize(into: &buffer)
        #expect(Array(buffer.readableBytesView) == bytes, sourceLocation: sourceLocation)
        #expect(try M(serializedBytes: buffer) == value, sourceLocation: sourceLocation)
        #expect(decoded.serializedBytes() == bytes, sourceLocation: sourceLocation)
    }

    static func roundTripAny(_ value: any LiveRelayMessage, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try roundTrip(value, sourceLocation: sourceLocation)
    }

    /// Every admin value of the interop cases (every field set, present zeros, absent fields,
    /// every byte value in the bytes fields), one test each.
    static let interopNames = InteropCases.names.filter { $0.hasPrefix("admin_") }

    @Test(arguments: interopNames)
    func interopValueRoundTrips(_ name: String) throws {
        try Self.roundTripAny(try #require(InteropCases.expected[name]))
    }

    @Test func everyAdminTypeRoundTripsInTests() {
        let covered = Set(Self.interopNames.compactMap { InteropCases.expected[$0].map { type(of: $0).protoName } })
        #expect(covered == Set(BindingContract.adminSwiftTypes.map { $0.protoName }))
    }

    @Test func fixturesRoundTrip() throws {
        for request in AdminFixtures.requests { try Self.roundTripAny(request) }
        try Self.roundTrip(AdminFixtures.quotas)
        try Self.roundTrip(
            Admin.AppStats(
                appID: "é", queueDepth: .max, queueCapacity: 0, pushes: [Admin.OutcomeCount()], pushesLastHour: 1,
                tokens: 2, liveActivities: 3, quotas: Admin.Quotas(), nodes: .max))
        try Self.roundTrip(Admin.CreateAPIKeyReply(key: Admin.APIKey(appIDs: ["", "x"], allowedMethods: [""]), secret: ""))
        try Self.roundTrip(Admin.PutWebhookReply(webhook: Admin.Webhook(eventKinds: ["", "x"], attempts: 0), signingSecret: ""))
        try Self.roundTrip(Admin.AppStats(webhookState: "", webhookBacklog: 0))
    }

    /// Every field of PutAPNsCredentialsRequest at once (the three key sources together, which
    /// validation refuses): the codec itself carries them all.
    @Test func putCredentialsEveryFieldThroughTheCodec() throws {
        let every = Admin.PutAPNsCredentialsRequest(
            appID: "a", teamID: "ABCDE12345", keyID: "KEY4567890", privateKeyPEM: Array(0...255), privateKeyFile: "/k.p8",
            privateKeyEnv: "K", endpoint: "h:1", trustCertificatePEM: Array((0...255).reversed()))
        let bytes = every.serializedBytes()
        #expect(TestWire.check(bytes, lr_admin_put_apns_credentials_request_descriptor()))
        let decoded = try TestWire.decodeUnvalidated(bytes, as: Admin.PutAPNsCredentialsRequest.self)
        #expect(decoded == every)
        #expect(decoded.serializedBytes() == bytes)
        #expect(expectError(Admin.PutAPNsCredentialsRequest.self, bytes)?.field == "private_key_file")
    }

    @Test func largeRepeatedFieldsRoundTrip() throws {
        let keys = (0..<400).map { i in
            Admin.APIKey(
                keyID: "key\(i)", appIDs: (0..<5).map { "app-\(i)-\($0)" }, allowedMethods: ["Ping"], createdAtMS: Int64(i))
        }
        try Self.roundTrip(Admin.ListAPIKeysReply(keys: keys, nextPageToken: String(repeating: "t", count: 512)))
        try Self.roundTrip(
            Admin.AppStats(pushes: (0..<1000).map { Admin.OutcomeCount(outcome: "failed", reason: "r\($0)", count: UInt64($0)) }))
    }

    // MARK: encoding

    @Test func absentEncodesToNothingAndPresentZeroIsSent() throws {
        #expect(Admin.Quotas().serializedBytes() == [])
        #expect(Admin.CreateAPIKeyRequest().serializedBytes() == [])
        #expect(Admin.AppStats().serializedBytes() == [])
        #expect(Admin.Webhook().serializedBytes() == [])
        #expect(Admin.PutWebhookRequest().serializedBytes() == [])
        // rotate_secret = false is sent: 20 00.
        #expect(Admin.PutWebhookRequest(rotateSecret: false).serializedBytes() == [0x20, 0x00])
        // AppStats.webhook_backlog = 0 (field 13, varint): 68 00; webhook_state = "" (field 12): 62 00.
        #expect(Admin.AppStats(webhookState: "", webhookBacklog: 0).serializedBytes() == [0x62, 0x00, 0x68, 0x00])
        // Quotas.burst = 0: 10 00; calls_per_second = 0: 09 + 8 zero bytes.
        #expect(Admin.Quotas(burst: 0).serializedBytes() == [0x10, 0x00])
        #expect(Admin.Quotas(callsPerSecond: 0).serializedBytes() == [0x09, 0, 0, 0, 0, 0, 0, 0, 0])
        // A present empty sub-message, string and bytes.
        #expect(Admin.AppReply(app: Admin.App()).serializedBytes() == [0x0A, 0x00])
        #expect(Admin.GetAppRequest(appID: "").serializedBytes() == [0x0A, 0x00])
        let emptyPEM = Admin.PutAPNsCredentialsRequest(privateKeyPEM: [], trustCertificatePEM: [])
        #expect(emptyPEM.serializedBytes() == [0x22, 0x00, 0x42, 0x00])
        let decoded = try TestWire.decodeUnvalidated(emptyPEM.serializedBytes(), as: Admin.PutAPNsCredentialsRequest.self)
        #expect(decoded.privateKeyPEM == [] && decoded.trustCertificatePEM == [] && decoded.privateKeyFile == nil)
        #expect(try TestWire.decodeUnvalidated([], as: Admin.PutAPNsCredentialsRequest.self).privateKeyPEM == nil)
        // uint64 max: 10 bytes; int64 -1: 10 bytes.
        #expect(Admin.OutcomeCount(count: .max).serializedBytes() == [0x18] + Array(repeating: 0xFF, count: 9) + [0x01])
        #expect(Admin.APIKey(revokedAtMS: -1).serializedBytes() == [0x48] + Array(repeating: 0xFF, count: 9) + [0x01])
        // Repeated strings are never packed.
        #expect(Admin.CreateAPIKeyRequest(appIDs: ["a", "b"]).serializedBytes() == [0x0A, 0x01, 0x61, 0x0A, 0x01, 0x62])
        #expect(Admin.PutWebhookRequest(eventKinds: ["a", "b"]).serializedBytes() == [0x1A, 0x01, 0x61, 0x1A, 0x01, 0x62])
    }

    @Test func unknownFieldsAreDropped() throws {
        let known = Admin.GetAppStatsRequest(appID: "a").serializedBytes()
        let withUnknown =
            known + TestWire.string(99, "future") + TestWire.int(100, 7) + TestWire.tag(101, 1) + Array(repeating: 1, count: 8)
        let decoded = try Admin.GetAppStatsRequest(serializedBytes: withUnknown)
        #expect(decoded == Admin.GetAppStatsRequest(appID: "a"))
        #expect(decoded.serializedBytes() == known)
    }

    @Test func requestsAreValidatedOnDecodeRepliesAreNot() throws {
        for request in AdminFixtures.requests {
            #expect(validationError(request) == nil, "\(type(of: request).protoName)")
        }
        let bad = Admin.CreateAppRequest(appID: "bad app", bundleID: "com.example")
        #expect(
            expectError(Admin.CreateAppRequest.self, bad.serializedBytes())
                == MessageError(.invalidValue, field: "app_id", detail: "only A-Z, a-z, 0-9, '.', '_' and '-' are allowed"))
        #expect(expectError(Admin.RevokeAPIKeyRequest.self, [])?.field == "key_id")
        // A reply keeps what the server sent: no request rules.
        let reply = Admin.AppReply(app: Admin.App(appID: "bad app", weight: 0, quotas: Admin.Quotas(callsPerSecond: -1)))
        #expect(try Admin.AppReply(serializedBytes: reply.serializedBytes()) == reply)
        #expect(validationError(reply) == nil)
    }

    @Test func wireScanNamesAdminFields() {
        // Invalid UTF-8 in a repeated string of a nested message.
        let key = TestWire.string(1, "abcdefgh2345") + TestWire.string(2, "ok") + TestWire.bytes(2, [0x61, 0xFF])
        let reply = TestWire.bytes(1, key)
        #expect(
            expectError(Admin.CreateAPIKeyReply.self, reply)
                == MessageError(.invalidUTF8, field: "key.app_ids[1]", detail: "invalid UTF-8 at byte 1"))
        // NUL in a string of a request.
        #expect(expectError(Admin.ListAppsRequest.self, TestWire.bytes(2, [0x61, 0x00]))?.kind == .embeddedNUL)
        // Bytes fields may hold anything, NUL included.
        let pem = AdminFixtures.pem + [0x00, 0xFF, 0xC0]
        var put = AdminFixtures.putCredentials
        put.privateKeyPEM = pem
        #expect((try? Admin.PutAPNsCredentialsRequest(serializedBytes: put.serializedBytes())) == put)
    }

    @Test func nulInSwiftBuiltReplies() {
        #expect(
            validationError(Admin.AppReply(app: Admin.App(credentials: Admin.APNsCredentialsInfo(keySource: "a\u{0}"))))?.field
                == "app.credentials.key_source")
        #expect(
            validationError(Admin.ListAPIKeysReply(keys: [Admin.APIKey(), Admin.APIKey(allowedMethods: ["P\u{0}"])]))?.field
                == "keys[1].allowed_methods[0]")
        #expect(validationError(Admin.AppStats(pushes: [Admin.OutcomeCount(reason: "\u{0}")]))?.field == "pushes[0].reason")
        #expect(validationError(Admin.CreateAPIKeyReply(secret: "\u{0}")) == MessageError(.embeddedNUL, field: "secret"))
        #expect(validationError(Admin.ListAppsReply(nextPageToken: "\u{0}"))?.field == "next_page_token")
        #expect(
            validationError(Admin.WebhookReply(webhook: Admin.Webhook(eventKinds: ["EVENT_KIND_PUSH_FAILED", "\u{0}"])))?.field
                == "webhook.event_kinds[1]")
        #expect(validationError(Admin.PutWebhookReply(webhook: Admin.Webhook(lastError: "\u{0}")))?.field == "webhook.last_error")
        #expect(validationError(Admin.PutWebhookReply(signingSecret: "\u{0}")) == MessageError(.embeddedNUL, field: "signing_secret"))
        #expect(validationError(Admin.AppStats(webhookState: "\u{0}"))?.field == "webhook_state")
    }

    // MARK: descriptors

    static var descriptors: [UnsafePointer<ProtobufCMessageDescriptor>] {
        (0..<lr_admin_message_descriptor_count()).map { lr_admin_message_descriptor_at($0)! }
    }

    @Test func adminRegistryListsEverything() {
        #expect(Self.descriptors.count == 28)
        #expect(lr_admin_message_descriptor_at(28) == nil)
        #expect(lr_admin_app_descriptor() == lr_admin_app_descriptor())
        // The v1 registry (27 with the broadcast channels and the event feed) does not hold the admin messages.
        #expect(lr_message_descriptor_count() == 27)
        let names = Set(Self.descriptors.map { String(cString: $0.pointee.name) })
        #expect(names == Set(BindingContract.adminSwiftTypes.map { $0.protoName }))
    }

    @Test(arguments: 0..<28)
    func adminDescriptorInvariants(index: Int) throws {
        let descriptors = Self.descriptors
        try #require(index < descriptors.count, "the registry lists \(descriptors.count) messages")
        let descriptor = descriptors[index]
        let d = descriptor.pointee
        #expect(d.magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
        #expect(String(cString: d.package_name) == "liverelay.admin.v1")
        #expect(String(cString: d.name) == "liverelay.admin.v1." + String(cString: d.short_name))
        #expect(String(cString: d.c_name) == "LrAdmin" + String(cString: d.short_name))
        let fields = (0..<Int(d.n_fields)).map { d.fields[$0] }
        #expect(fields.map { Int($0.id) } == Array(1...fields.count), "numbered 1...n")
        for f in fields {
            // proto2: optional or repeated, never a default, never packed.
            #expect(f.label == PROTOBUF_C_LABEL_OPTIONAL || f.label == PROTOBUF_C_LABEL_REPEATED)
            #expect(f.default_value == nil)
            #expect(f.flags == 0)
            #expect(protobuf_c_message_descriptor_get_field(descriptor, f.id)?.pointee.name == f.name)
            #expect(protobuf_c_message_descriptor_get_field_by_name(descriptor, f.name)?.pointee.id == f.id)
            let scalar = f.type != PROTOBUF_C_TYPE_STRING && f.type != PROTOBUF_C_TYPE_MESSAGE
            #expect((f.quantifier_offset != 0) == (f.label == PROTOBUF_C_LABEL_REPEATED || scalar))
        }
        #expect(TestWire.check([], descriptor))
    }

    @Test func initLeavesEverythingAbsent() {
        var m = LrAdminPutAPNsCredentialsRequest()
        lr_admin_put_apns_credentials_request_init(&m)
        #expect(m.base.descriptor == lr_admin_put_apns_credentials_request_descriptor())
        #expect(m.app_id == nil && m.has_private_key_pem == 0 && m.private_key_pem.len == 0)
        var k = LrAdminAPIKey()
        lr_admin_api_key_init(&k)
        #expect(k.n_app_ids == 0 && k.app_ids == nil && k.has_admin == 0)
        var w = LrAdminPutWebhookRequest()
        lr_admin_put_webhook_request_init(&w)
        #expect(w.base.descriptor == lr_admin_put_webhook_request_descriptor())
        #expect(w.url == nil && w.n_event_kinds == 0 && w.event_kinds == nil && w.has_rotate_secret == 0)
    }

    // MARK: methods

    @Test func adminMethodsNameTheirMessages() {
        #expect(AdminMethod.allCases.count == 14)
        #expect(AdminMethod.createApp.rawValue == "/liverelay.admin.v1.Admin/CreateApp")
        #expect(AdminMethod.putAPNsCredentials.methodName == "PutAPNsCredentials")
        #expect(AdminMethod(methodName: "RevokeAPIKey") == .revokeAPIKey)
        #expect(AdminMethod(methodName: "Ping") == nil)
        #expect(AdminMethod(methodName: "/liverelay.admin.v1.Admin/GetApp") == nil)
        #expect(AdminMethod.getAppStats.replyProtoName == "liverelay.admin.v1.AppStats")
        #expect(ObjectIdentifier(AdminMethod.disableApp.replyType) == ObjectIdentifier(Admin.AppReply.self))
        #expect(AdminMethod.putWebhook.rawValue == "/liverelay.admin.v1.Admin/PutWebhook")
        #expect(AdminMethod.putWebhook.replyProtoName == "liverelay.admin.v1.PutWebhookReply")
        #expect(AdminMethod(methodName: "ResetWebhook") == .resetWebhook)
        for method in [AdminMethod.getWebhook, .deleteWebhook, .resetWebhook] {
            #expect(method.replyProtoName == "liverelay.admin.v1.WebhookReply")
        }
        let registered = Set(Self.descriptors.map { String(cString: $0.pointee.name) })
        for method in AdminMethod.allCases {
            #expect(method.rawValue == "/liverelay.admin.v1.Admin/" + method.methodName)
            #expect(method.requestProtoName == "liverelay.admin.v1.\(method.methodName)Request")
            #expect(registered.contains(method.requestProtoName) && registered.contains(method.replyProtoName))
            // Tenant methods and admin methods never share a name or a path.
            #expect(LiveRelayMethod(methodName: method.methodName) == nil)
            #expect(LiveRelayMethod(rawValue: method.rawValue) == nil)
        }
    }

    /// The names a webhook's event_kinds may hold are liverelay.v1.EventKind's, but
    /// EVENT_KIND_UNSPECIFIED, in number order.
    @Test func webhookEventKindNamesAreTheEventKindEnum() throws {
        let e = try #require(lr_event_kind_enum_descriptor()).pointee
        let values = UnsafeBufferPointer(start: e.values, count: Int(e.n_values))
            .filter { $0.value != 0 }
            .sorted { $0.value < $1.value }
            .map { String(cString: $0.name) }
        #expect(Admin.Webhook.eventKindNames == values)
    }

    /// LiveRelayMethod.methodName moved here from LiveRelayServer unchanged.
    @Test func liveRelayMethodNames() {
        #expect(
            LiveRelayMethod.allCases.map(\.methodName) == [
                "RegisterToken", "StartActivity", "UpdateActivity", "EndActivity", "Ping", "CreateChannel", "ListChannels",
                "DeleteChannel", "ListEvents",
            ])
        for method in LiveRelayMethod.allCases { #expect(LiveRelayMethod(methodName: method.methodName) == method) }
        #expect(LiveRelayMethod(methodName: "ping") == nil)
        #expect(LiveRelayMethod(methodName: "") == nil)
    }
}
