import NIOCore

// Broadcast channels are made and removed through APNs's channel management
// API (Apple's channel management documentation): its own hosts and ports, the
// same provider token and HTTP/2 as pushes, and answers that are not a push's
// (201 with the id in a header, 204, 200 with a JSON body).

extension APNsEndpoint {
    /// `api-manage-broadcast.sandbox.push.apple.com:2195`: channels of sandbox apps.
    public static let sandboxChannelManagement = APNsEndpoint.custom(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)
    /// `api-manage-broadcast.push.apple.com:2196`: channels of production apps.
    public static let productionChannelManagement = APNsEndpoint.custom(host: "api-manage-broadcast.push.apple.com", port: 2196)
}

/// One channel management call as it goes on the wire: method, path, the
/// `apns-channel-id` request header (read and delete name their channel with
/// it) and the JSON body (create only). Sent as an ``APNsRequest`` built with
/// ``APNsRequest/init(management:environment:requestID:sendBy:)``.
public struct APNsChannelManagementRequest: Hashable, Sendable {
    public enum Method: String, Hashable, Sendable {
        case get = "GET", post = "POST", delete = "DELETE"
    }

    public var method: Method
    public var path: String
    public var channelID: String?
    public var body: [UInt8]

    public init(method: Method, path: String, channelID: String? = nil, body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.channelID = channelID
        self.body = body
    }

    /// `/1/apps/<bundle id>/channels`: create (POST), read (GET) and delete (DELETE).
    public static func channelsPath(bundleID: String) -> String { "/1/apps/" + bundleID + "/channels" }

    /// `/1/apps/<bundle id>/all-channels`: the list (GET).
    public static func allChannelsPath(bundleID: String) -> String { "/1/apps/" + bundleID + "/all-channels" }

    /// Creates a Live Activity channel; APNs answers 201 with its id in `apns-channel-id`.
    public static func create(bundleID: String, storagePolicy: ChannelStoragePolicy) -> Self {
        let body = "{\"message-storage-policy\":\(storagePolicy.rawValue),\"push-type\":\"LiveActivity\"}"
        return Self(method: .post, path: channelsPath(bundleID: bundleID), body: Array(body.utf8))
    }

    /// Reads a channel's configuration: 200 with `{"message-storage-policy": N, "push-type": "LiveActivity"}`.
    public static func read(channelID: String, bundleID: String) -> Self {
        Self(method: .get, path: channelsPath(bundleID: bundleID), channelID: channelID)
    }

    /// Deletes a channel: 204.
    public static func delete(channelID: String, bundleID: String) -> Self {
        Self(method: .delete, path: channelsPath(bundleID: bundleID), channelID: channelID)
    }

    /// Lists the app's channels in this environment: 200 with `{"channels": ["<id>", ...]}`.
    public static func list(bundleID: String) -> Self {
        Self(method: .get, path: allChannelsPath(bundleID: bundleID))
    }

    /// The headers besides `authorization`, the request id and `content-length`.
    public var headerFields: [(name: String, value: String)] {
        channelID.map { [("apns-channel-id", $0)] } ?? []
    }
}

/// Why a channel management call failed.
public enum APNsChannelManagementError: Error, Hashable, Sendable, CustomStringConvertible {
    /// APNs answered with an error status and its JSON reason (ChannelNotRegistered,
    /// CannotCreateChannelConfig, BadChannelId, ExpiredProviderToken...).
    case rejected(status: Int, reason: String)
    /// No answer: the connection could not be made, dropped, timed out.
    case transport(APNsTransportError)
    /// An answer that is not what the call expects (a 201 without a channel id, a list that is not JSON).
    case malformedAnswer(String)

    /// True when trying the same call again later can succeed: 429, 5xx and an expired
    /// provider token (the client signs a new one) from APNs, and the transport errors
    /// that say so. A retried create may make a second channel if the first answer was
    /// lost: the caller lists the channels when that matters.
    public var isRetryable: Bool {
        switch self {
        case let .rejected(status, reason): !APNsDisposition(status: status, reason: reason).isFinal
        case let .transport(error): error.isRetryable
        case .malformedAnswer: false
        }
    }

    public var description: String {
        switch self {
        case let .rejected(status, reason): "APNs answered \(status) \(reason)"
        case let .transport(error): "APNs transport: \(error.reason)"
        case let .malformedAnswer(text): "malformed APNs answer: \(text)"
        }
    }
}

/// Broadcast channel management for one app route: what the service layer
/// calls when a channel is opened or closed. The futures fail only with
/// ``APNsChannelManagementError``.
public protocol APNsChannelManaging: Sendable {
    /// Creates a channel; succeeds with the new channel id.
    func createChannel(bundleID: String, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy) -> EventLoopFuture<String>
    func deleteChannel(_ channelID: String, bundleID: String, environment: APNsEnvironment) -> EventLoopFuture<Void>
    func listChannels(bundleID: String, environment: APNsEnvironment) -> EventLoopFuture<[String]>
}
