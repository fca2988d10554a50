import LiveRelayAPNs
import LiveRelayMessages

/// The channel endpoints (iOS 18 broadcasts): `/1/apps/<bundle id>/channels`
/// and `/1/apps/<bundle id>/all-channels` (management), and
/// `/4/broadcasts/apps/<bundle id>` (a send to every subscriber of a channel).
extension MockAPNsValidator {
    public static let broadcastPathPrefix = "/4/broadcasts/apps/"
    public static let managementPathPrefix = "/1/apps/"

    /// Which channel endpoint a path names, with its bundle id.
    public enum ChannelEndpoint: Sendable, Hashable {
        case channels(bundleID: String)
        case allChannels(bundleID: String)
        case broadcast(bundleID: String)

        public var bundleID: String {
            switch self {
            case let .channels(bundleID), let .allChannels(bundleID), let .broadcast(bundleID): bundleID
            }
        }

        /// The methods APNs serves there; any other is 405 MethodNotAllowed.
        var methods: [String] {
            switch self {
            case .channels: ["POST", "GET", "DELETE"]
            case .allChannels: ["GET"]
            case .broadcast: ["POST"]
            }
        }
    }

    /// True for paths the channel table judges (whether or not they name a real endpoint).
    static func isChannelEndpoint(_ path: String) -> Bool { path.hasPrefix("/1/") || path.hasPrefix("/4/") }

    /// nil for a path that names no channel endpoint (404 BadPath).
    public static func channelEndpoint(_ path: String) -> ChannelEndpoint? {
        if path.hasPrefix(broadcastPathPrefix) {
            let bundle = path.dropFirst(broadcastPathPrefix.count)
            return bundle.isEmpty || bundle.contains("/") ? nil : .broadcast(bundleID: String(bundle))
        }
        guard path.hasPrefix(managementPathPrefix) else { return nil }
        let parts = path.dropFirst(managementPathPrefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty else { return nil }
        switch parts[1] {
        case "channels": return .channels(bundleID: String(parts[0]))
        case "all-channels": return .allChannels(bundleID: String(parts[0]))
        default: return nil
        }
    }

    /// Judges a channel request as far as it can without the channel registry. Checks
    /// run in this order; the first failure is the answer:
    /// 404 BadPath; 405 MethodNotAllowed (per endpoint: channels POST/GET/DELETE,
    /// all-channels GET, broadcasts POST); 400 DuplicateHeaders; the provider-token
    /// checks of a push (403, 429); 400 TopicDisallowed (the bundle is not one of the
    /// token's key); 400 BadMessageId (`apns-request-id` not a UUID); then per endpoint:
    ///
    /// - create: 400 MalformedPayload (not a JSON object), MissingPushType,
    ///   InvalidPushType (`push-type` not `LiveActivity`), BadMessageStoragePolicy (not 0 or 1);
    /// - read, delete: 400 MissingChannelId, BadChannelId (not a plausible base64 id);
    /// - broadcast: 400 BadTopic (any `apns-topic`), MissingPushType, InvalidPushType
    ///   (not `liveactivity`), MissingChannelId, BadChannelId, BadPriority,
    ///   BadExpirationDate (not a non-negative integer), PayloadEmpty, 413
    ///   PayloadTooLarge (over 5120 bytes), 400 BadEvent (`event: start`: a broadcast
    ///   cannot start an activity), then the `aps` shape of a push.
    ///
    /// The registry then answers ChannelNotRegistered, CannotCreateChannelConfig, or
    /// BadExpirationDate for a no-storage channel sent anything but `apns-expiration: 0`.
    public func validateChannelRequest(
        _ request: MockAPNsRequest, connection: inout MockAPNsConnectionState, nowMilliseconds: Int64,
        newRequestID: @autoclosure () -> String
    ) -> MockAPNsVerdict {
        let requestIDHeader = request.header("apns-request-id")
        let requestID = requestIDHeader.flatMap { Self.isUUID($0) ? $0 : nil } ?? newRequestID()
        func reject(_ reason: String, accepted: Bool = false) -> MockAPNsVerdict {
            MockAPNsVerdict(
                status: MockAPNsReasons.status(for: reason), reason: reason, apnsID: requestID,
                providerTokenAccepted: accepted, usesRequestID: true)
        }
        func pass(_ operation: MockAPNsChannelOperation) -> MockAPNsVerdict {
            MockAPNsVerdict(
                status: 200, apnsID: requestID, providerTokenAccepted: true, channelOperation: operation, usesRequestID: true)
        }

        guard let endpoint = request.path.flatMap(Self.channelEndpoint) else { return reject("BadPath") }
        guard let method = request.method, endpoint.methods.contains(method) else { return reject("MethodNotAllowed") }
        if Self.hasDuplicateHeaders(request.headers) { return reject("DuplicateHeaders") }
        let claims: ProviderTokenClaims
        switch authenticate(request, connection: &connection, nowMilliseconds: nowMilliseconds) {
        case .rejected(let reason): return reject(reason)
        case .accepted(let verified): claims = verified
        }
        let bundleID = endpoint.bundleID
        guard bundlesByKeyID[claims.keyID]?.contains(bundleID) ?? false else { return reject("TopicDisallowed", accepted: true) }
        if let requestIDHeader, !Self.isUUID(requestIDHeader) { return reject("BadMessageId", accepted: true) }

        switch (endpoint, method) {
        case (.channels, "POST"):
            guard let json = try? JSONValue.parse(request.body), json.isObject else {
                return reject(MockAPNsReasons.malformedPayload, accepted: true)
            }
            guard let pushType = json["push-type"] else { return reject("MissingPushType", accepted: true) }
            guard pushType.stringValue == "LiveActivity" else { return reject("InvalidPushType", accepted: true) }
            guard let raw = json["message-storage-policy"]?.integerValue, let policy = ChannelStoragePolicy(rawValue: Int(raw)) else {
                return reject(MockAPNsReasons.badMessageStoragePolicy, accepted: true)
            }
            return pass(.create(bundleID: bundleID, storagePolicy: policy))
        case (.channels, _):
            guard let channelID = request.header("apns-channel-id"), !channelID.isEmpty else {
                return reject("MissingChannelId", accepted: true)
            }
            guard BroadcastChannel.isValidID(channelID) else { return reject("BadChannelId", accepted: true) }
            return pass(
                method == "GET" ? .read(bundleID: bundleID, channelID: channelID) : .delete(bundleID: bundleID, channelID: channelID))
        case (.allChannels, _):
            return pass(.list(bundleID: bundleID))
        case (.broadcast, _):
            if let rejection = Self.broadcastRejection(request) { return reject(rejection, accepted: true) }
            return pass(
                .broadcast(
                    bundleID: bundleID, channelID: request.header("apns-channel-id") ?? "",
                    expiration: request.header("apns-expiration")))
        }
    }

    /// The stateless checks of a broadcast's headers and body, nil when it passes them.
    static func broadcastRejection(_ request: MockAPNsRequest) -> String? {
        // A broadcast names its app in the path; APNs's broadcast headers have no topic. We
        // judge an `apns-topic` there a topic APNs cannot accept, so BadTopic ("the apns-topic
        // was invalid"), rather than ignoring it: a sender that adds one has mixed up the two
        // request shapes and should hear so. (MissingTopic and TopicDisallowed would both
        // misdescribe it.)
        if request.header("apns-topic") != nil { return "BadTopic" }
        // A collapse id names one device's notifications; a broadcast has no device. Refused
        // rather than ignored for the same reason as the topic.
        if request.header("apns-collapse-id") != nil { return "BadCollapseId" }
        guard let pushType = request.header("apns-push-type") else { return "MissingPushType" }
        guard pushType == "liveactivity" else { return "InvalidPushType" }
        guard let channelID = request.header("apns-channel-id"), !channelID.isEmpty else { return "MissingChannelId" }
        guard BroadcastChannel.isValidID(channelID) else { return "BadChannelId" }
        if let priority = request.header("apns-priority"), priority != "5", priority != "10" { return "BadPriority" }
        if let expiration = request.header("apns-expiration"),
            expiration.isEmpty || expiration.utf8.count > 19 || !expiration.utf8.allSatisfy(isDigit)
        {
            return "BadExpirationDate"
        }
        guard !request.body.isEmpty else { return "PayloadEmpty" }
        guard request.body.count <= APNsBroadcast.maxPayloadBytes else { return "PayloadTooLarge" }
        let shape = payloadShape(request.body)
        // Before the shape: a start's missing attributes are beside the point.
        if shape.event == "start" { return MockAPNsReasons.badEvent }
        if let error = shape.error { return error }
        // The fields of a push-to-start (what the new activity is, the token and channel it
        // asks for) mean nothing to the activities already subscribed.
        if let aps = (try? JSONValue.parse(request.body))?["aps"],
            MockAPNsReasons.startOnlyFields.contains(where: { aps[$0] != nil })
        {
            return MockAPNsReasons.startFieldInBroadcast
        }
        return nil
    }
}
