import LiveRelayAPNs
import LiveRelayMessages
import Testing

@testable import LiveRelayMockAPNs

/// The channel endpoints' rules as pure functions: the validator's stateless
/// table, then the registry's answers and subscriptions.
@Suite("Mock APNs channel rules")
struct MockAPNsChannelRuleTests {
    let validator = Fixture.validator()

    func judge(_ request: MockAPNsRequest) -> MockAPNsVerdict {
        var connection = MockAPNsConnectionState()
        return validator.validate(request, connection: &connection, nowMilliseconds: Fixture.nowMilliseconds, newAPNsID: "generated")
    }

    static func management(
        _ method: String = "POST", path: String = Fixture.channelsPath,
        headers: [(name: String, value: String)] = Fixture.managementHeaders(),
        body: String = Fixture.createBody()
    ) -> MockAPNsRequest {
        MockAPNsRequest(method: method, path: path, headers: headers, body: Array(body.utf8))
    }

    static func broadcast(
        method: String = "POST", path: String = Fixture.broadcastPath,
        headers: [(name: String, value: String)] = Fixture.broadcastHeaders(), body: String = Fixture.updateBody
    ) -> MockAPNsRequest {
        MockAPNsRequest(method: method, path: path, headers: headers, body: Array(body.utf8))
    }

    @Test("paths name their endpoint and bundle; anything else is no channel endpoint")
    func endpoints() {
        #expect(MockAPNsValidator.channelEndpoint("/1/apps/a.b/channels") == .channels(bundleID: "a.b"))
        #expect(MockAPNsValidator.channelEndpoint("/1/apps/a.b/all-channels") == .allChannels(bundleID: "a.b"))
        #expect(MockAPNsValidator.channelEndpoint("/4/broadcasts/apps/a.b") == .broadcast(bundleID: "a.b"))
        for path in [
            "/1/apps//channels", "/1/apps/a/channel", "/1/apps/a/channels/x", "/4/broadcasts/apps/", "/4/broadcasts/apps/a/b", "/1/x",
        ] {
            #expect(MockAPNsValidator.channelEndpoint(path) == nil, "\(path)")
        }
    }

    @Test("valid requests pass to the registry with their operation, answering with apns-request-id")
    func operations() {
        let id = "7d4f0b6a-2e1c-4a55-9f00-1b2c3d4e5f60"
        let create = judge(
            Self.management(headers: Fixture.managementHeaders(extra: [("apns-request-id", id)]), body: Fixture.createBody(policy: 0)))
        #expect(create.status == 200 && create.apnsID == id && create.usesRequestID)
        #expect(create.channelOperation == .create(bundleID: Fixture.bundleID, storagePolicy: .noStorage))
        let read = judge(Self.management("GET", headers: Fixture.managementHeaders(channelID: Fixture.unknownChannelID), body: ""))
        #expect(read.channelOperation == .read(bundleID: Fixture.bundleID, channelID: Fixture.unknownChannelID))
        let delete = judge(Self.management("DELETE", headers: Fixture.managementHeaders(channelID: Fixture.unknownChannelID), body: ""))
        #expect(delete.channelOperation == .delete(bundleID: Fixture.bundleID, channelID: Fixture.unknownChannelID))
        let list = judge(Self.management("GET", path: Fixture.allChannelsPath, body: ""))
        #expect(list.channelOperation == .list(bundleID: Fixture.bundleID))
        let send = judge(Self.broadcast())
        #expect(send.channelOperation == .broadcast(bundleID: Fixture.bundleID, channelID: Fixture.unknownChannelID, expiration: "0"))
        #expect(judge(Self.broadcast(body: Fixture.endBody)).status == 200)
        #expect(judge(Self.broadcast(headers: Fixture.broadcastHeaders(priority: "5", expiration: "1795395600"))).status == 200)
    }

    /// One mutation per reason, in the order the channel table checks them.
    static let rejections: [(name: String, request: MockAPNsRequest, status: Int, reason: String)] = {
        let channel = Fixture.managementHeaders(channelID: Fixture.unknownChannelID)
        let prefix = #"{"aps":{"timestamp":1,"event":"end","pad":""#
        let big = prefix + String(repeating: "x", count: APNsBroadcast.maxPayloadBytes + 1 - prefix.utf8.count - 3) + #""}}"#
        return [
            ("unknown management path", management(path: "/1/apps/" + Fixture.bundleID + "/channel"), 404, "BadPath"),
            ("unknown broadcast path", broadcast(path: "/4/broadcast/apps/" + Fixture.bundleID), 404, "BadPath"),
            ("PUT channels", management("PUT"), 405, "MethodNotAllowed"),
            ("POST all-channels", management("POST", path: Fixture.allChannelsPath), 405, "MethodNotAllowed"),
            ("GET broadcast", broadcast(method: "GET"), 405, "MethodNotAllowed"),
            ("duplicate channel id", management("GET", headers: channel + [("apns-channel-id", "x")], body: ""), 400, "DuplicateHeaders"),
            ("no token", management(headers: Fixture.managementHeaders(authorization: nil)), 403, "MissingProviderToken"),
            (
                "other key", management(headers: Fixture.managementHeaders(authorization: "bearer " + Fixture.jwt(key: Fixture.otherKey))),
                403, "InvalidProviderToken"
            ),
            (
                "expired token",
                broadcast(headers: Fixture.broadcastHeaders(authorization: "bearer " + Fixture.jwt(issuedAt: Fixture.nowSeconds - 3601))),
                403, "ExpiredProviderToken"
            ),
            ("bundle of no key", management(path: "/1/apps/com.other/channels"), 400, "TopicDisallowed"),
            ("bad request id", management(headers: Fixture.managementHeaders(extra: [("apns-request-id", "nope")])), 400, "BadMessageId"),
            ("create not JSON", management(body: "{"), 400, MockAPNsReasons.malformedPayload),
            ("create without push type", management(body: #"{"message-storage-policy":1}"#), 400, "MissingPushType"),
            ("create alert push type", management(body: #"{"message-storage-policy":1,"push-type":"alert"}"#), 400, "InvalidPushType"),
            ("create policy 2", management(body: Fixture.createBody(policy: 2)), 400, MockAPNsReasons.badMessageStoragePolicy),
            ("create without policy", management(body: #"{"push-type":"LiveActivity"}"#), 400, MockAPNsReasons.badMessageStoragePolicy),
            ("read without channel", management("GET", body: ""), 400, "MissingChannelId"),
            ("delete without channel", management("DELETE", body: ""), 400, "MissingChannelId"),
            (
                "read malformed channel", management("GET", headers: Fixture.managementHeaders(channelID: "not base64!"), body: ""), 400,
                "BadChannelId"
            ),
            ("broadcast with topic", broadcast(headers: Fixture.broadcastHeaders(extra: [("apns-topic", Fixture.topic)])), 400, "BadTopic"),
            ("broadcast without push type", broadcast(headers: Fixture.broadcastHeaders(pushType: nil)), 400, "MissingPushType"),
            ("broadcast alert push type", broadcast(headers: Fixture.broadcastHeaders(pushType: "alert")), 400, "InvalidPushType"),
            ("broadcast without channel", broadcast(headers: Fixture.broadcastHeaders(channelID: nil)), 400, "MissingChannelId"),
            ("broadcast malformed channel", broadcast(headers: Fixture.broadcastHeaders(channelID: "a b")), 400, "BadChannelId"),
            ("broadcast priority 1", broadcast(headers: Fixture.broadcastHeaders(priority: "1")), 400, "BadPriority"),
            ("broadcast expiration text", broadcast(headers: Fixture.broadcastHeaders(expiration: "soon")), 400, "BadExpirationDate"),
            ("broadcast empty", broadcast(body: ""), 400, "PayloadEmpty"),
            ("broadcast 5 KiB + 1", broadcast(body: big), 413, "PayloadTooLarge"),
            ("broadcast start", broadcast(body: Fixture.startBody), 400, MockAPNsReasons.badEvent),
            ("broadcast without aps", broadcast(body: #"{"x":1}"#), 400, MockAPNsReasons.missingAps),
            (
                "broadcast with a collapse id", broadcast(headers: Fixture.broadcastHeaders(extra: [("apns-collapse-id", "score")])), 400,
                "BadCollapseId"
            ),
            (
                "broadcast asking for an update token",
                broadcast(body: #"{"aps":{"timestamp":1,"event":"update","content-state":{},"input-push-token":1}}"#), 400,
                MockAPNsReasons.startFieldInBroadcast
            ),
            (
                "broadcast naming attributes",
                broadcast(body: #"{"aps":{"timestamp":1,"event":"end","attributes-type":"Game","attributes":{}}}"#), 400,
                MockAPNsReasons.startFieldInBroadcast
            ),
        ]
    }()

    @Test("each channel reason for its mutation", arguments: 0..<rejections.count)
    func rejection(_ index: Int) {
        let c = Self.rejections[index]
        let verdict = judge(c.request)
        #expect(verdict.status == c.status, "\(c.name)")
        #expect(verdict.reason == c.reason, "\(c.name)")
        #expect(verdict.channelOperation == nil, "\(c.name)")
        #expect(verdict.usesRequestID, "\(c.name)")
    }

    @Test("a broadcast may carry 5120 bytes, more than a push")
    func broadcastLimit() {
        let prefix = #"{"aps":{"timestamp":1,"event":"end","pad":""#
        let body = prefix + String(repeating: "x", count: APNsBroadcast.maxPayloadBytes - prefix.utf8.count - 3) + #""}}"#
        #expect(body.utf8.count == 5120)
        #expect(judge(Self.broadcast(body: body)).status == 200)
    }

    @Test("a push-to-start naming a channel asks for a subscription of its app; other pushes do not")
    func subscriptionRequest() {
        let start = judge(Fixture.request(body: Fixture.startBody(subscribingTo: "Q2hhbm5lbA==")))
        #expect(start.status == 200)
        #expect(start.subscription == MockAPNsSubscription(channelID: "Q2hhbm5lbA==", bundleID: Fixture.bundleID))
        #expect(!start.usesRequestID && start.channelOperation == nil)
        #expect(judge(Fixture.request(body: Fixture.startBody)).subscription == nil)
        #expect(judge(Fixture.request()).subscription == nil)
    }

    // MARK: The registry

    var ids: () -> String {
        var n = 0
        return {
            n += 1
            return MockAPNsChannelStore.base64([UInt8](repeating: UInt8(n), count: 16))
        }
    }

    @Test("create, read, list and delete, per app and environment, in creation order")
    func registryLifecycle() {
        var registry = MockAPNsChannelRegistry()
        let next = ids
        func apply(_ op: MockAPNsChannelOperation, _ environment: APNsEnvironment = .sandbox) -> MockAPNsChannelOutcome {
            registry.apply(op, environment: environment, maxChannelsPerApp: 10_000, newChannelID: next)
        }
        let first = apply(.create(bundleID: "a", storagePolicy: .noStorage))
        let second = apply(.create(bundleID: "a", storagePolicy: .mostRecentMessage))
        let other = apply(.create(bundleID: "b", storagePolicy: .mostRecentMessage))
        #expect(first.status == 201 && second.status == 201 && other.status == 201)
        let (a1, a2, b1) = (first.channelID!, second.channelID!, other.channelID!)
        #expect(apply(.read(bundleID: "a", channelID: a1)).body == Array(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#.utf8))
        #expect(apply(.list(bundleID: "a")).body == Array("{\"channels\":[\"\(a1)\",\"\(a2)\"]}".utf8))
        #expect(apply(.list(bundleID: "c")).body == Array(#"{"channels":[]}"#.utf8))
        // Another app's channel, or the other environment's, is not registered for this one.
        #expect(apply(.read(bundleID: "a", channelID: b1)).reason == "ChannelNotRegistered")
        #expect(apply(.read(bundleID: "a", channelID: a1), .production).reason == "ChannelNotRegistered")
        #expect(apply(.delete(bundleID: "b", channelID: a1)).reason == "ChannelNotRegistered")
        #expect(apply(.delete(bundleID: "a", channelID: a1)) == MockAPNsChannelOutcome(status: 204))
        #expect(apply(.delete(bundleID: "a", channelID: a1)) == MockAPNsChannelOutcome(status: 400, reason: "ChannelNotRegistered"))
        #expect(registry.channels(bundleID: "a", environment: .sandbox).map(\.id) == [a2])
    }

    @Test("the per-app limit refuses one more create, per environment, and frees a slot on delete")
    func registryLimit() {
        var registry = MockAPNsChannelRegistry()
        let next = ids
        func create(_ environment: APNsEnvironment = .sandbox) -> MockAPNsChannelOutcome {
            registry.apply(
                .create(bundleID: "a", storagePolicy: .noStorage), environment: environment, maxChannelsPerApp: 2, newChannelID: next)
        }
        let kept = create().channelID!
        #expect(create().status == 201)
        #expect(create() == MockAPNsChannelOutcome(status: 400, reason: "CannotCreateChannelConfig"))
        #expect(create(.production).status == 201)
        _ = registry.apply(.delete(bundleID: "a", channelID: kept), environment: .sandbox, maxChannelsPerApp: 2, newChannelID: next)
        #expect(create().status == 201)
    }

    @Test("a no-storage channel takes only apns-expiration 0; a storing one any; an unknown one none")
    func registryBroadcast() {
        var registry = MockAPNsChannelRegistry()
        let next = ids
        func apply(_ op: MockAPNsChannelOperation) -> MockAPNsChannelOutcome {
            registry.apply(op, environment: .sandbox, maxChannelsPerApp: 10, newChannelID: next)
        }
        let none = apply(.create(bundleID: "a", storagePolicy: .noStorage)).channelID!
        let kept = apply(.create(bundleID: "a", storagePolicy: .mostRecentMessage)).channelID!
        #expect(apply(.broadcast(bundleID: "a", channelID: none, expiration: "0")).status == 200)
        #expect(apply(.broadcast(bundleID: "a", channelID: none, expiration: "1795395600")).reason == "BadExpirationDate")
        #expect(apply(.broadcast(bundleID: "a", channelID: none, expiration: nil)).reason == "BadExpirationDate")
        #expect(apply(.broadcast(bundleID: "a", channelID: kept, expiration: "1795395600")).status == 200)
        #expect(apply(.broadcast(bundleID: "b", channelID: kept, expiration: "0")).reason == "ChannelNotRegistered")
        #expect(apply(.broadcast(bundleID: "a", channelID: Fixture.unknownChannelID, expiration: "0")).reason == "ChannelNotRegistered")
    }

    @Test("subscriptions: once per token, lowercase, only to the app's channels, gone with the channel")
    func registrySubscriptions() {
        var registry = MockAPNsChannelRegistry()
        let id = registry.apply(
            .create(bundleID: "a", storagePolicy: .noStorage), environment: .sandbox, maxChannelsPerApp: 10, newChannelID: ids
        ).channelID!
        let results = [
            registry.subscribe(deviceToken: "AB01", to: id, bundleID: "a", environment: .sandbox),
            registry.subscribe(deviceToken: "ab01", to: id, bundleID: "a", environment: .sandbox),
            registry.subscribe(deviceToken: "cd02", to: id, bundleID: "a", environment: .sandbox),
            registry.subscribe(deviceToken: "ef03", to: id, bundleID: "b", environment: .sandbox),
            registry.subscribe(deviceToken: "ef03", to: id, bundleID: "a", environment: .production),
        ]
        #expect(results == [true, true, true, false, false])
        #expect(registry.subscribers(of: id) == ["ab01", "cd02"])
        _ = registry.apply(.delete(bundleID: "a", channelID: id), environment: .sandbox, maxChannelsPerApp: 10, newChannelID: ids)
        #expect(registry.subscribers(of: id).isEmpty)
    }

    @Test("channel ids are 16 random bytes in padded base64")
    func channelIDs() {
        #expect(MockAPNsChannelStore.base64(Array("Channel".utf8)) == "Q2hhbm5lbA==")
        #expect(MockAPNsChannelStore.base64([0xFB, 0xFF]) == "+/8=")
        let made = (0..<100).map { _ in MockAPNsChannelStore.randomChannelID() }
        #expect(Set(made).count == 100)
        #expect(made.allSatisfy { $0.utf8.count == 24 && $0.hasSuffix("==") && BroadcastChannel.isValidID($0) })
    }
}
