import LiveRelayAPNs

/// One request as the mock received it, before any judgement.
public struct MockAPNsRequest: Sendable {
    /// The `:method` pseudo-header (nil when absent).
    public var method: String?
    /// The `:path` pseudo-header (nil when absent).
    public var path: String?
    /// The regular headers in arrival order, duplicates kept (pseudo-headers excluded).
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(method: String?, path: String?, headers: [(name: String, value: String)], body: [UInt8]) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    /// The first value of `name` (lowercase, as HTTP/2 sends names).
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// What one connection remembers between its streams: APNs judges provider
/// tokens per connection (how often the token changes; raising the stream
/// limit after the first valid one).
public struct MockAPNsConnectionState: Sendable, Hashable {
    /// The last token accepted on this connection, and what it said. Kept so
    /// the same token on the next stream costs a string compare and an age
    /// check, not an ECDSA verification.
    public var acceptedToken: String?
    public var acceptedClaims: ProviderTokenClaims?
    /// When the connection last switched to a different valid token (seconds).
    public var tokenChangedAtSeconds: Int64?

    public init() {}
}

/// The mock's answer to one request: the ``APNsResponse`` a client reads
/// (the same type, so the mock and the client cannot disagree on the answer
/// table or the error body), plus what only the mock needs.
public struct MockAPNsVerdict: Sendable, Hashable {
    public var response: APNsResponse
    /// True when this request carried a provider token the mock accepted (the
    /// connection may then raise its stream limit).
    public var providerTokenAccepted: Bool
    /// A channel request (management or broadcast) that passed every stateless check:
    /// the channel registry decides the answer (the 200 here is provisional).
    public var channelOperation: MockAPNsChannelOperation?
    /// A valid push-to-start whose `aps` names a channel in `input-push-channel`: once
    /// answered 200, its device token is subscribed to that channel of `bundleID` (when the
    /// app has it in the mock's environment; otherwise the device's subscription would fail,
    /// and the push is still delivered).
    public var subscription: MockAPNsSubscription?
    /// True on the channel endpoints (`/1/...`, `/4/...`): the request id travels as
    /// `apns-request-id` there, not `apns-id`.
    public var usesRequestID: Bool

    /// - Parameter apnsID: echoed from the request when it was a valid UUID, otherwise one the mock made.
    public init(
        status: Int, reason: String? = nil, timestampMilliseconds: Int64? = nil, apnsID: String,
        providerTokenAccepted: Bool = false, channelOperation: MockAPNsChannelOperation? = nil,
        subscription: MockAPNsSubscription? = nil, usesRequestID: Bool = false
    ) {
        self.response = APNsResponse(
            status: status, reason: reason, timestampMilliseconds: timestampMilliseconds,
            apnsID: apnsID)
        self.providerTokenAccepted = providerTokenAccepted
        self.channelOperation = channelOperation
        self.subscription = subscription
        self.usesRequestID = usesRequestID
    }

    public var status: Int { response.status }
    /// nil on 200.
    public var reason: String? { response.reason }
    /// 410 only: when the token became invalid, milliseconds since 1970.
    public var timestampMilliseconds: Int64? { response.timestampMilliseconds }
    public var apnsID: String { response.apnsID ?? "" }

    /// APNs's error body, `{"reason":"..."}` plus `"timestamp"` for 410, or a management
    /// success's JSON; nil when there is no body (a push's 200, a 201, a 204).
    public var responseBody: [UInt8]? {
        let body = response.bodyBytes
        return body.isEmpty ? nil : body
    }
}

/// A device subscribing to a channel through a push-to-start (`input-push-channel`).
public struct MockAPNsSubscription: Sendable, Hashable {
    public var channelID: String
    public var bundleID: String

    public init(channelID: String, bundleID: String) {
        self.channelID = channelID
        self.bundleID = bundleID
    }
}

/// Judges a request the way APNs would, as a pure function of the request,
/// the connection's state and the time: no I/O, so every rule is unit-tested
/// without a socket and the server only moves bytes.
///
/// Checks run in this order, and the first failure is the answer:
/// 405 MethodNotAllowed (not POST); 404 BadPath (not `/3/device/...`);
/// 400 MissingDeviceToken; 400 DuplicateHeaders (any regular header twice);
/// 403 Missing/Invalid/ExpiredProviderToken; 429 TooManyProviderTokenUpdates;
/// 400 BadDeviceToken (not 64...200 hex digits of even length, either case);
/// 400 MissingTopic; 400 BadTopic (not `<bundle>.push-type.liveactivity`);
/// 400 TopicDisallowed (the bundle is not one of the token's key);
/// 400 DeviceTokenNotForTopic (the token is bound to another bundle);
/// 400 InvalidPushType (missing or not `liveactivity`); 400 BadPriority (not 5 or 10);
/// 400 BadExpirationDate (not a non-negative integer); 400 BadMessageId (not a UUID);
/// 400 BadCollapseId (over 64 bytes); 400 PayloadEmpty; 413 PayloadTooLarge (over 4096 bytes);
/// then the `aps` shape (``MockAPNsReasons``); last 410 Unregistered for the configured tokens.
///
/// Requests to the channel endpoints (`/1/apps/...` management, `/4/broadcasts/...`)
/// have their own table (``validateChannelRequest(_:connection:nowMilliseconds:newRequestID:)``).
public struct MockAPNsValidator: Sendable {
    public static let devicePathPrefix = "/3/device/"
    public static let deviceTokenHexLength = 64...200
    public static let maxCollapseIDBytes = 64

    let verifier: ProviderTokenVerifier
    /// Topics each key id may push to.
    let topicsByKeyID: [String: Set<String>]
    /// Bundle ids each key id may manage channels of and broadcast to.
    let bundlesByKeyID: [String: Set<String>]
    private let unregisteredTokens: [String: Int64]
    private let deviceTokenBundles: [String: String]
    private let minimumTokenUpdateIntervalSeconds: Int64

    /// Fails when an app's public key is not a P-256 `PUBLIC KEY` PEM.
    public init(
        apps: [MockAPNsApp], unregisteredTokens: [String: Int64] = [:], deviceTokenBundles: [String: String] = [:],
        minimumTokenUpdateIntervalSeconds: Int64 = 1200
    ) throws(APNsKeyError) {
        var keys: [ProviderTokenVerifier.Key] = []
        var topics: [String: Set<String>] = [:]
        var bundles: [String: Set<String>] = [:]
        for app in apps {
            keys.append(try ProviderTokenVerifier.Key(publicKeyPEM: app.publicKeyPEM, keyID: app.keyID, teamID: app.teamID))
            topics[app.keyID, default: []].insert(app.liveActivityTopic)
            bundles[app.keyID, default: []].insert(app.bundleID)
        }
        self.verifier = ProviderTokenVerifier(keys: keys)
        self.topicsByKeyID = topics
        self.bundlesByKeyID = bundles
        self.unregisteredTokens = Dictionary(unregisteredTokens.map { ($0.key.lowercased(), $0.value) }) { a, _ in a }
        self.deviceTokenBundles = Dictionary(deviceTokenBundles.map { ($0.key.lowercased(), $0.value) }) { a, _ in a }
        self.minimumTokenUpdateIntervalSeconds = minimumTokenUpdateIntervalSeconds
    }

    public init(configuration: MockAPNsConfiguration) throws(APNsKeyError) {
        try self.init(
            apps: configuration.apps, unregisteredTokens: configuration.unregisteredTokens,
            deviceTokenBundles: configuration.deviceTokenBundles,
            minimumTokenUpdateIntervalSeconds: configuration.providerTokenMinimumUpdateIntervalSeconds)
    }

    /// - Parameters:
    ///   - connection: updated when a new provider token is accepted.
    ///   - newAPNsID: the `apns-id` to answer with when the request has none (or an invalid one).
    public func validate(
        _ request: MockAPNsRequest, connection: inout MockAPNsConnectionState, nowMilliseconds: Int64,
        newAPNsID: @autoclosure () -> String
    ) -> MockAPNsVerdict {
        if let path = request.path, Self.isChannelEndpoint(path) {
            return validateChannelRequest(request, connection: &connection, nowMilliseconds: nowMilliseconds, newRequestID: newAPNsID())
        }
        let requestID = request.header("apns-id")
        let apnsID = requestID.flatMap { Self.isUUID($0) ? $0 : nil } ?? newAPNsID()
        func reject(_ reason: String, accepted: Bool = false) -> MockAPNsVerdict {
            MockAPNsVerdict(
                status: MockAPNsReasons.status(for: reason), reason: reason, apnsID: apnsID,
                providerTokenAccepted: accepted)
        }

        guard request.method == "POST" else { return reject("MethodNotAllowed") }
        guard let path = request.path, path.hasPrefix(Self.devicePathPrefix) else { return reject("BadPath") }
        let deviceToken = String(path.utf8.dropFirst(Self.devicePathPrefix.utf8.count))!
        guard !deviceToken.isEmpty else { return reject("MissingDeviceToken") }
        if Self.hasDuplicateHeaders(request.headers) { return reject("DuplicateHeaders") }

        let claims: ProviderTokenClaims
        switch authenticate(request, connection: &connection, nowMilliseconds: nowMilliseconds) {
        case .rejected(let reason): return reject(reason)
        case .accepted(let verified): claims = verified
        }

        guard Self.isPlausibleDeviceToken(deviceToken) else { return reject("BadDeviceToken", accepted: true) }

        guard let topic = request.header("apns-topic"), !topic.isEmpty else { return reject("MissingTopic", accepted: true) }
        let suffix = ".push-type.liveactivity"
        guard topic.hasSuffix(suffix), topic.utf8.count > suffix.utf8.count else { return reject("BadTopic", accepted: true) }
        guard topicsByKeyID[claims.keyID]?.contains(topic) ?? false else { return reject("TopicDisallowed", accepted: true) }
        if let bundle = deviceTokenBundles[deviceToken.lowercased()], bundle + suffix != topic {
            return reject("DeviceTokenNotForTopic", accepted: true)
        }
        guard request.header("apns-push-type") == "liveactivity" else { return reject("InvalidPushType", accepted: true) }
        if let priority = request.header("apns-priority"), priority != "5", priority != "10" {
            return reject("BadPriority", accepted: true)
        }
        if let expiration = request.header("apns-expiration"),
            expiration.isEmpty || expiration.utf8.count > 19 || !expiration.utf8.allSatisfy(Self.isDigit)
        {
            return reject("BadExpirationDate", accepted: true)
        }
        if let requestID, !Self.isUUID(requestID) { return reject("BadMessageId", accepted: true) }
        if let collapse = request.header("apns-collapse-id"), collapse.utf8.count > Self.maxCollapseIDBytes {
            return reject("BadCollapseId", accepted: true)
        }
        guard !request.body.isEmpty else { return reject("PayloadEmpty", accepted: true) }
        guard request.body.count <= APNsPayload.maxBytes else { return reject("PayloadTooLarge", accepted: true) }
        let shape = Self.payloadShape(request.body)
        if let shapeError = shape.error { return reject(shapeError, accepted: true) }

        if let timestamp = unregisteredTokens[deviceToken.lowercased()] {
            return MockAPNsVerdict(
                status: 410, reason: "Unregistered", timestampMilliseconds: timestamp,
                apnsID: apnsID, providerTokenAccepted: true)
        }
        let subscription = shape.inputPushChannel.map {
            MockAPNsSubscription(channelID: $0, bundleID: String(topic.dropLast(suffix.count)))
        }
        return MockAPNsVerdict(status: 200, apnsID: apnsID, providerTokenAccepted: true, subscription: subscription)
    }

    /// What an `authorization` header comes to on this connection.
    enum Authentication {
        case accepted(ProviderTokenClaims)
        case rejected(String)
    }

    /// The provider token, judged per connection: the connection's accepted token costs an
    /// age check; a new one is verified, and refused when the connection switched too recently.
    func authenticate(
        _ request: MockAPNsRequest, connection: inout MockAPNsConnectionState, nowMilliseconds: Int64
    ) -> Authentication {
        let nowSeconds = nowMilliseconds / 1000
        let authorization = request.header("authorization")
        if let accepted = connection.acceptedToken, let acceptedClaims = connection.acceptedClaims,
            authorization.map({ Self.bearerToken($0) == accepted }) ?? false
        {
            if let rejection = verifier.checkAge(issuedAt: acceptedClaims.issuedAt, nowSeconds: nowSeconds) {
                return .rejected(rejection.apnsReason)
            }
            return .accepted(acceptedClaims)
        }
        switch verifier.verify(authorization: authorization, nowSeconds: nowSeconds) {
        case .failure(let rejection):
            return .rejected(rejection.apnsReason)
        case .success(let verified):
            if connection.acceptedToken != nil, let changed = connection.tokenChangedAtSeconds,
                nowSeconds - changed < minimumTokenUpdateIntervalSeconds
            {
                return .rejected("TooManyProviderTokenUpdates")
            }
            connection.acceptedToken = authorization.flatMap(Self.bearerToken)
            connection.acceptedClaims = verified
            connection.tokenChangedAtSeconds = nowSeconds
            return .accepted(verified)
        }
    }

    /// The mock's reason for a body that is not a Live Activity payload, nil when it is one.
    public static func payloadShapeError(_ body: [UInt8]) -> String? { payloadShape(body).error }

    /// The payload's shape error, its event, and for a valid start the channel it
    /// subscribes the new activity to (`input-push-channel`): one parse for all three.
    static func payloadShape(_ body: [UInt8]) -> (error: String?, event: String?, inputPushChannel: String?) {
        guard let json = try? JSONValue.parse(body), json.isObject else { return (MockAPNsReasons.malformedPayload, nil, nil) }
        guard let aps = json["aps"], aps.isObject else { return (MockAPNsReasons.missingAps, nil, nil) }
        guard aps["timestamp"]?.integerValue != nil else { return (MockAPNsReasons.badTimestamp, nil, nil) }
        guard let event = aps["event"]?.stringValue, ["start", "update", "end"].contains(event) else {
            return (MockAPNsReasons.badEvent, nil, nil)
        }
        switch aps["content-state"] {
        case nil where event != "end": return (MockAPNsReasons.badContentState, event, nil)
        case let state? where !state.isObject: return (MockAPNsReasons.badContentState, event, nil)
        default: break
        }
        guard event == "start" else { return (nil, event, nil) }
        guard let type = aps["attributes-type"]?.stringValue, !type.isEmpty, aps["attributes"]?.isObject == true else {
            return (MockAPNsReasons.badAttributes, event, nil)
        }
        return (nil, event, aps["input-push-channel"]?.stringValue)
    }

    /// The token of `bearer <token>` (scheme case-insensitive), nil otherwise.
    static func bearerToken(_ authorization: String) -> String? {
        let utf8 = authorization.utf8
        guard utf8.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return nil }
        return String(authorization.dropFirst(7))
    }

    static func hasDuplicateHeaders(_ headers: [(name: String, value: String)]) -> Bool {
        guard headers.count > 1 else { return false }
        var seen = Set<String>(minimumCapacity: headers.count)
        for header in headers where !seen.insert(header.name.lowercased()).inserted { return true }
        return false
    }

    static func isPlausibleDeviceToken(_ token: String) -> Bool {
        let utf8 = token.utf8
        return deviceTokenHexLength.contains(utf8.count) && utf8.count % 2 == 0 && utf8.allSatisfy(isHexDigit)
    }

    /// 8-4-4-4-12 hex digits, either case (APNs documents lowercase and accepts both).
    static func isUUID(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return false }
        for (i, c) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard c == UInt8(ascii: "-") else { return false }
            } else if !isHexDigit(c) {
                return false
            }
        }
        return true
    }

    static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    static func isHexDigit(_ c: UInt8) -> Bool {
        isDigit(c) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "F"))
    }
}
