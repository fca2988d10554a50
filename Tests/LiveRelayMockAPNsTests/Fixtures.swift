import LiveRelayAPNs

@testable import LiveRelayMockAPNs

/// Keys and requests shared by the validator and socket tests. Keys are
/// generated per process (P-256 generation is cheap) so no key material is
/// checked in.
enum Fixture {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let bundleID = "com.example.rides"
    static let topic = bundleID + ".push-type.liveactivity"
    static let token = String(repeating: "ab", count: 32)
    /// 2026-11-23T00:00:00Z in milliseconds: a fixed "now" for pure tests.
    static let nowMilliseconds: Int64 = 1_795_392_000_000
    static var nowSeconds: Int64 { nowMilliseconds / 1000 }

    static let key: APNsSigningKey = try! APNsSigningKey.generate(keyID: keyID, teamID: teamID)
    static let otherKey: APNsSigningKey = try! APNsSigningKey.generate(keyID: "OTHER12345", teamID: teamID)

    static var app: MockAPNsApp {
        MockAPNsApp(bundleID: bundleID, teamID: teamID, keyID: keyID, publicKeyPEM: try! key.publicKeyPEM)
    }

    static func jwt(issuedAt: Int64 = nowSeconds, key: APNsSigningKey = key) -> String {
        try! key.makeProviderToken(issuedAt: issuedAt)
    }

    /// One token for every request that does not ask for another: ES256 signatures are randomized,
    /// so signing again would give a new token, and a connection that switches tokens is refused (429).
    static let defaultJWT = jwt()

    static let updateBody = #"{"aps":{"timestamp":1795392000,"event":"update","content-state":{"eta":5}}}"#
    static let startBody =
        #"{"aps":{"timestamp":1795392000,"event":"start","content-state":{"eta":9},"attributes-type":"RideAttributes","attributes":{"driver":"Ann"},"input-push-token":1,"alert":{"title":"Ride","body":"On the way"}}}"#
    static let endBody = #"{"aps":{"timestamp":1795392001,"event":"end","dismissal-date":0}}"#

    static func headers(
        authorization: String? = "bearer " + defaultJWT, topic: String? = topic, pushType: String? = "liveactivity",
        priority: String? = "10", extra: [(String, String)] = []
    ) -> [(name: String, value: String)] {
        var h: [(name: String, value: String)] = []
        if let authorization { h.append(("authorization", authorization)) }
        if let topic { h.append(("apns-topic", topic)) }
        if let pushType { h.append(("apns-push-type", pushType)) }
        if let priority { h.append(("apns-priority", priority)) }
        h.append(("apns-expiration", "1795395600"))
        for (n, v) in extra { h.append((n, v)) }
        return h
    }

    static func request(
        method: String? = "POST", path: String? = "/3/device/" + token,
        headers: [(name: String, value: String)] = headers(), body: String = updateBody
    ) -> MockAPNsRequest {
        MockAPNsRequest(method: method, path: path, headers: headers, body: Array(body.utf8))
    }

    /// A second app of the same key: its channels are not Fixture.app's.
    static let otherBundleID = "com.example.food"
    static var otherApp: MockAPNsApp {
        MockAPNsApp(bundleID: otherBundleID, teamID: teamID, keyID: keyID, publicKeyPEM: try! key.publicKeyPEM)
    }

    static let channelsPath = "/1/apps/" + bundleID + "/channels"
    static let allChannelsPath = "/1/apps/" + bundleID + "/all-channels"
    static let broadcastPath = "/4/broadcasts/apps/" + bundleID
    /// A well-formed channel id no registry has made.
    static let unknownChannelID = "AAAAAAAAAAAAAAAAAAAAAA=="

    static func createBody(policy: Int = 1) -> String { #"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"# }

    /// A push-to-start that subscribes the new activity to `channelID`.
    static func startBody(subscribingTo channelID: String) -> String {
        #"{"aps":{"timestamp":1795392000,"event":"start","content-state":{"eta":9},"attributes-type":"RideAttributes","attributes":{"driver":"Ann"},"input-push-channel":"\#(channelID)","alert":{"title":"Ride","body":"On the way"}}}"#
    }

    /// A broadcast's headers: no apns-topic, the channel id, expiration 0.
    static func broadcastHeaders(
        channelID: String? = unknownChannelID, authorization: String? = "bearer " + defaultJWT, pushType: String? = "liveactivity",
        priority: String? = "10", expiration: String? = "0", extra: [(String, String)] = []
    ) -> [(name: String, value: String)] {
        var h: [(name: String, value: String)] = []
        if let authorization { h.append(("authorization", authorization)) }
        if let pushType { h.append(("apns-push-type", pushType)) }
        if let channelID { h.append(("apns-channel-id", channelID)) }
        if let priority { h.append(("apns-priority", priority)) }
        if let expiration { h.append(("apns-expiration", expiration)) }
        for (n, v) in extra { h.append((n, v)) }
        return h
    }

    /// Management headers: the token, and the channel id for a read or delete.
    static func managementHeaders(
        channelID: String? = nil, authorization: String? = "bearer " + defaultJWT, extra: [(String, String)] = []
    ) -> [(name: String, value: String)] {
        var h: [(name: String, value: String)] = []
        if let authorization { h.append(("authorization", authorization)) }
        if let channelID { h.append(("apns-channel-id", channelID)) }
        for (n, v) in extra { h.append((n, v)) }
        return h
    }

    static func validator(
        apps: [MockAPNsApp] = [app, otherApp], unregistered: [String: Int64] = [:], bundles: [String: String] = [:]
    ) -> MockAPNsValidator {
        try! MockAPNsValidator(apps: apps, unregisteredTokens: unregistered, deviceTokenBundles: bundles)
    }
}
