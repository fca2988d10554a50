// The vocabulary of broadcast channels (iOS 18): one POST to APNs reaches
// every device subscribed to a channel (Apple's broadcast push documentation).

/// How APNs keeps a channel's messages for devices that are offline: chosen
/// when the channel is created, for its whole life.
public enum ChannelStoragePolicy: Int, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// `message-storage-policy: 0`: nothing is stored; every send must carry
    /// `apns-expiration: 0`. Apple grants such channels a higher budget.
    case noStorage = 0
    /// `message-storage-policy: 1`: the latest message is kept (at most 8 hours).
    case mostRecentMessage = 1

    public var description: String { self == .noStorage ? "no-storage" : "most-recent-message" }
}

/// What a broadcast send needs beyond a per-device push: the channel, the
/// app's bundle id (the path names it, there is no `apns-topic`) and the
/// channel's storage policy (which fixes `apns-expiration`).
public struct APNsBroadcast: Hashable, Sendable {
    /// APNs's channel id (base64), as `POST /1/apps/<bundle id>/channels` answered it.
    public var channelID: String
    public var bundleID: String
    public var storagePolicy: ChannelStoragePolicy

    public init(channelID: String, bundleID: String, storagePolicy: ChannelStoragePolicy) {
        self.channelID = channelID
        self.bundleID = bundleID
        self.storagePolicy = storagePolicy
    }

    /// `/4/broadcasts/apps/<bundle id>`.
    public var path: String { "/4/broadcasts/apps/" + bundleID }

    /// A broadcast payload may be larger than a per-device one.
    public static let maxPayloadBytes = 5120

    /// The most channels APNs keeps per app and environment.
    public static let maxChannelsPerApp = 10_000

    /// The headers of a broadcast built from a push's: `apns-topic` left out,
    /// `apns-channel-id` added, and `apns-expiration: 0` for a channel that
    /// stores nothing (APNs refuses any other value there).
    public func fields(from headers: APNsHeaders) -> [(name: String, value: String)] {
        [
            ("apns-push-type", headers.pushType), ("apns-channel-id", channelID),
            ("apns-priority", String(headers.priority)),
            ("apns-expiration", storagePolicy == .noStorage ? "0" : String(headers.expiration)),
        ]
    }
}
