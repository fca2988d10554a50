import LiveRelayAPNs
import Testing

@testable import LiveRelayMockAPNs

/// The APNs rules of the mock as a pure function: no sockets, a fixed clock.
@Suite("MockAPNsValidator")
struct MockAPNsValidatorTests {
    let validator = Fixture.validator()

    func judge(_ request: MockAPNsRequest, now: Int64 = Fixture.nowMilliseconds) -> MockAPNsVerdict {
        var connection = MockAPNsConnectionState()
        return validator.validate(request, connection: &connection, nowMilliseconds: now, newAPNsID: "generated")
    }

    @Test("a valid update, start and end are accepted and the connection remembers the token")
    func validPushes() {
        var connection = MockAPNsConnectionState()
        for body in [Fixture.updateBody, Fixture.startBody, Fixture.endBody] {
            let verdict = validator.validate(
                Fixture.request(body: body), connection: &connection,
                nowMilliseconds: Fixture.nowMilliseconds, newAPNsID: "generated")
            #expect(verdict == MockAPNsVerdict(status: 200, apnsID: "generated", providerTokenAccepted: true))
            #expect(verdict.responseBody == nil)
        }
        #expect(
            connection.acceptedClaims
                == ProviderTokenClaims(
                    keyID: Fixture.keyID, teamID: Fixture.teamID,
                    issuedAt: Fixture.nowSeconds))
        #expect(connection.tokenChangedAtSeconds == Fixture.nowSeconds)
    }

    @Test("apns-id is echoed when it is a UUID, generated otherwise")
    func apnsIDEcho() {
        let id = "7d4f0b6a-2e1c-4a55-9f00-1b2c3d4e5f60"
        let echoed = judge(Fixture.request(headers: Fixture.headers(extra: [("apns-id", id)])))
        #expect(echoed.status == 200 && echoed.apnsID == id)
        let upper = judge(Fixture.request(headers: Fixture.headers(extra: [("apns-id", id.uppercased())])))
        #expect(upper.status == 200 && upper.apnsID == id.uppercased())
        let bad = judge(Fixture.request(headers: Fixture.headers(extra: [("apns-id", "not-a-uuid")])))
        #expect(bad.status == 400 && bad.reason == "BadMessageId" && bad.apnsID == "generated")
    }

    /// One mutation of a valid request per APNs reason, in the order the validator checks them.
    static let rejections: [(name: String, request: MockAPNsRequest, status: Int, reason: String)] = {
        let big = #"{"aps":{"timestamp":1,"event":"end","pad":""# + String(repeating: "x", count: 4100) + #""}}"#
        return [
            ("GET", Fixture.request(method: "GET"), 405, "MethodNotAllowed"),
            ("no method", Fixture.request(method: nil), 405, "MethodNotAllowed"),
            ("other path", Fixture.request(path: "/3/devices/" + Fixture.token), 404, "BadPath"),
            ("broadcast-like path", Fixture.request(path: "/3/broadcasts/apps/x"), 404, "BadPath"),
            ("no path", Fixture.request(path: nil), 404, "BadPath"),
            ("empty token", Fixture.request(path: "/3/device/"), 400, "MissingDeviceToken"),
            ("duplicate topic", Fixture.request(headers: Fixture.headers(extra: [("apns-topic", Fixture.topic)])), 400, "DuplicateHeaders"),
            ("no authorization", Fixture.request(headers: Fixture.headers(authorization: nil)), 403, "MissingProviderToken"),
            ("basic scheme", Fixture.request(headers: Fixture.headers(authorization: "basic abc")), 403, "MissingProviderToken"),
            ("garbage token", Fixture.request(headers: Fixture.headers(authorization: "bearer abc.def.ghi")), 403, "InvalidProviderToken"),
            (
                "other key", Fixture.request(headers: Fixture.headers(authorization: "bearer " + Fixture.jwt(key: Fixture.otherKey))), 403,
                "InvalidProviderToken"
            ),
            (
                "expired",
                Fixture.request(headers: Fixture.headers(authorization: "bearer " + Fixture.jwt(issuedAt: Fixture.nowSeconds - 3601))), 403,
                "ExpiredProviderToken"
            ),
            (
                "future",
                Fixture.request(headers: Fixture.headers(authorization: "bearer " + Fixture.jwt(issuedAt: Fixture.nowSeconds + 600))), 403,
                "InvalidProviderToken"
            ),
            ("odd token", Fixture.request(path: "/3/device/" + Fixture.token + "a"), 400, "BadDeviceToken"),
            ("short token", Fixture.request(path: "/3/device/abcd"), 400, "BadDeviceToken"),
            ("non-hex token", Fixture.request(path: "/3/device/" + String(repeating: "zz", count: 32)), 400, "BadDeviceToken"),
            ("long token", Fixture.request(path: "/3/device/" + String(repeating: "ab", count: 101)), 400, "BadDeviceToken"),
            ("no topic", Fixture.request(headers: Fixture.headers(topic: nil)), 400, "MissingTopic"),
            ("bare bundle topic", Fixture.request(headers: Fixture.headers(topic: Fixture.bundleID)), 400, "BadTopic"),
            ("other app", Fixture.request(headers: Fixture.headers(topic: "com.other.push-type.liveactivity")), 400, "TopicDisallowed"),
            ("no push type", Fixture.request(headers: Fixture.headers(pushType: nil)), 400, "InvalidPushType"),
            ("alert push type", Fixture.request(headers: Fixture.headers(pushType: "alert")), 400, "InvalidPushType"),
            ("priority 1", Fixture.request(headers: Fixture.headers(priority: "1")), 400, "BadPriority"),
            ("priority text", Fixture.request(headers: Fixture.headers(priority: "high")), 400, "BadPriority"),
            (
                "expiration text",
                Fixture.request(
                    headers: Fixture.headers(extra: []).map { field -> (name: String, value: String) in
                        field.name == "apns-expiration" ? (name: field.name, value: "tomorrow") : field
                    }), 400, "BadExpirationDate"
            ),
            (
                "collapse 65", Fixture.request(headers: Fixture.headers(extra: [("apns-collapse-id", String(repeating: "c", count: 65))])),
                400, "BadCollapseId"
            ),
            ("empty body", Fixture.request(body: ""), 400, "PayloadEmpty"),
            ("4 KiB + 1", Fixture.request(body: big), 413, "PayloadTooLarge"),
            ("not JSON", Fixture.request(body: "{\"aps\":"), 400, MockAPNsReasons.malformedPayload),
            ("array", Fixture.request(body: "[]"), 400, MockAPNsReasons.malformedPayload),
            ("no aps", Fixture.request(body: #"{"alert":"x"}"#), 400, MockAPNsReasons.missingAps),
            ("aps string", Fixture.request(body: #"{"aps":"x"}"#), 400, MockAPNsReasons.missingAps),
            ("no timestamp", Fixture.request(body: #"{"aps":{"event":"end"}}"#), 400, MockAPNsReasons.badTimestamp),
            ("float timestamp", Fixture.request(body: #"{"aps":{"timestamp":1.5,"event":"end"}}"#), 400, MockAPNsReasons.badTimestamp),
            ("string timestamp", Fixture.request(body: #"{"aps":{"timestamp":"1","event":"end"}}"#), 400, MockAPNsReasons.badTimestamp),
            ("bad event", Fixture.request(body: #"{"aps":{"timestamp":1,"event":"stop"}}"#), 400, MockAPNsReasons.badEvent),
            ("no event", Fixture.request(body: #"{"aps":{"timestamp":1}}"#), 400, MockAPNsReasons.badEvent),
            (
                "update without state", Fixture.request(body: #"{"aps":{"timestamp":1,"event":"update"}}"#), 400,
                MockAPNsReasons.badContentState
            ),
            (
                "state not object", Fixture.request(body: #"{"aps":{"timestamp":1,"event":"end","content-state":[1]}}"#), 400,
                MockAPNsReasons.badContentState
            ),
            (
                "start without attributes",
                Fixture.request(body: #"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A"}}"#), 400,
                MockAPNsReasons.badAttributes
            ),
            (
                "start without type", Fixture.request(body: #"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes":{}}}"#),
                400, MockAPNsReasons.badAttributes
            ),
        ]
    }()

    @Test("each APNs reason for its mutation", arguments: 0..<rejections.count)
    func rejection(_ index: Int) {
        let c = Self.rejections[index]
        let verdict = judge(c.request)
        #expect(verdict.status == c.status, "\(c.name)")
        #expect(verdict.reason == c.reason, "\(c.name)")
        #expect(verdict.responseBody == Array("{\"reason\":\"\(c.reason)\"}".utf8), "\(c.name)")
    }

    @Test("limits are inclusive: 4096-byte body, 64-byte collapse id, 200-digit and uppercase tokens, priority 5")
    func boundaries() {
        let prefix = #"{"aps":{"timestamp":1,"event":"end","pad":""#
        let body = prefix + String(repeating: "x", count: 4096 - prefix.utf8.count - 3) + #""}}"#
        #expect(body.utf8.count == 4096)
        #expect(judge(Fixture.request(body: body)).status == 200)
        #expect(
            judge(Fixture.request(headers: Fixture.headers(extra: [("apns-collapse-id", String(repeating: "c", count: 64))]))).status == 200
        )
        #expect(judge(Fixture.request(path: "/3/device/" + String(repeating: "AB", count: 100))).status == 200)
        #expect(judge(Fixture.request(headers: Fixture.headers(priority: "5"))).status == 200)
        #expect(judge(Fixture.request(headers: Fixture.headers(priority: nil))).status == 200)
        #expect(judge(Fixture.request(headers: Fixture.headers(authorization: "Bearer " + Fixture.jwt()))).status == 200)
    }

    @Test("410 Unregistered carries the configured timestamp, whatever the token's case")
    func unregistered() {
        let validator = Fixture.validator(unregistered: [Fixture.token.uppercased(): 1_700_000_000_123])
        var connection = MockAPNsConnectionState()
        let verdict = validator.validate(
            Fixture.request(), connection: &connection,
            nowMilliseconds: Fixture.nowMilliseconds, newAPNsID: "id")
        #expect(verdict.status == 410 && verdict.reason == "Unregistered")
        #expect(verdict.timestampMilliseconds == 1_700_000_000_123)
        #expect(verdict.responseBody == Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
    }

    @Test("a token bound to another bundle is DeviceTokenNotForTopic")
    func tokenForOtherTopic() {
        let validator = Fixture.validator(bundles: [Fixture.token: "com.example.other"])
        var connection = MockAPNsConnectionState()
        let verdict = validator.validate(
            Fixture.request(), connection: &connection,
            nowMilliseconds: Fixture.nowMilliseconds, newAPNsID: "id")
        #expect(verdict.status == 400 && verdict.reason == "DeviceTokenNotForTopic")
    }

    @Test("a key shared by two apps may push to both topics, and to no third")
    func sharedKey() {
        let second = MockAPNsApp(
            bundleID: "com.example.food", teamID: Fixture.teamID, keyID: Fixture.keyID,
            publicKeyPEM: try! Fixture.key.publicKeyPEM)
        let validator = Fixture.validator(apps: [Fixture.app, second])
        var connection = MockAPNsConnectionState()
        for (topic, status) in [(Fixture.topic, 200), (second.liveActivityTopic, 200), ("com.x.push-type.liveactivity", 400)] {
            let verdict = validator.validate(
                Fixture.request(headers: Fixture.headers(topic: topic)), connection: &connection,
                nowMilliseconds: Fixture.nowMilliseconds, newAPNsID: "id")
            #expect(verdict.status == status, "\(topic)")
        }
    }

    @Test("the token accepted on a connection expires an hour after it was issued, even when cached")
    func cachedTokenExpires() {
        var connection = MockAPNsConnectionState()
        let request = Fixture.request()
        let first = validator.validate(request, connection: &connection, nowMilliseconds: Fixture.nowMilliseconds, newAPNsID: "a")
        #expect(first.status == 200)
        let stillFine = validator.validate(
            request, connection: &connection,
            nowMilliseconds: Fixture.nowMilliseconds + 3_600_000, newAPNsID: "b")
        #expect(stillFine.status == 200)
        let expired = validator.validate(
            request, connection: &connection,
            nowMilliseconds: Fixture.nowMilliseconds + 3_601_000, newAPNsID: "c")
        #expect(expired.status == 403 && expired.reason == "ExpiredProviderToken" && !expired.providerTokenAccepted)
    }

    @Test("a connection may switch tokens once per 20 minutes; sooner is 429 TooManyProviderTokenUpdates")
    func tokenUpdateRate() {
        var connection = MockAPNsConnectionState()
        let t0 = Fixture.nowMilliseconds
        let first = Fixture.request(headers: Fixture.headers(authorization: "bearer " + Fixture.jwt(issuedAt: Fixture.nowSeconds)))
        #expect(validator.validate(first, connection: &connection, nowMilliseconds: t0, newAPNsID: "a").status == 200)

        let secondToken = "bearer " + Fixture.jwt(issuedAt: Fixture.nowSeconds + 600)
        let second = Fixture.request(headers: Fixture.headers(authorization: secondToken))
        let tooSoon = validator.validate(second, connection: &connection, nowMilliseconds: t0 + 600_000, newAPNsID: "b")
        #expect(tooSoon.status == 429 && tooSoon.reason == "TooManyProviderTokenUpdates")
        // The refused token did not replace the accepted one: the old one still works.
        #expect(validator.validate(first, connection: &connection, nowMilliseconds: t0 + 600_000, newAPNsID: "c").status == 200)

        let later = validator.validate(second, connection: &connection, nowMilliseconds: t0 + 1_200_000, newAPNsID: "d")
        #expect(later.status == 200)
        #expect(connection.tokenChangedAtSeconds == Fixture.nowSeconds + 1200)
        // A fresh connection is not limited by another connection's history.
        var fresh = MockAPNsConnectionState()
        #expect(validator.validate(second, connection: &fresh, nowMilliseconds: t0 + 600_000, newAPNsID: "e").status == 200)
    }

    @Test("a token that verified on one connection is checked again (signature) when it changes")
    func changedTokenIsVerified() {
        var connection = MockAPNsConnectionState()
        #expect(
            validator.validate(
                Fixture.request(), connection: &connection,
                nowMilliseconds: Fixture.nowMilliseconds, newAPNsID: "a"
            ).status == 200)
        let forged = "bearer " + Fixture.jwt(key: Fixture.otherKey)
        let verdict = validator.validate(
            Fixture.request(headers: Fixture.headers(authorization: forged)), connection: &connection,
            nowMilliseconds: Fixture.nowMilliseconds + 1_300_000, newAPNsID: "b")
        #expect(verdict.status == 403 && verdict.reason == "InvalidProviderToken")
    }

    @Test("an app with a public key that is not P-256 PEM is refused at construction")
    func badPublicKey() {
        let bad = MockAPNsApp(
            bundleID: "b", teamID: "T", keyID: "K", publicKeyPEM: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
        #expect(throws: APNsKeyError.self) { try MockAPNsValidator(apps: [bad]) }
    }
}
