import LiveRelayAPNs

/// A broadcast channel (iOS 18) that LiveRelay created with APNs for an app,
/// as the channel store keeps it.
///
/// APNs names a channel by an opaque id and keeps it per app and environment;
/// LiveRelay keeps its own record so that it can list an app's channels, hold
/// the app under ``APNsBroadcast/maxChannelsPerApp`` before asking APNs, and
/// refuse a send to a channel the caller's app does not own: a channel's key
/// is (``appID``, ``id``), and one app never sees another's, even when it
/// names the id.
///
/// Named `ChannelRecord` so as not to clash with the wire type (`BroadcastChannel`, liverelay.v1.Channel) or NIO's `Channel`.
public struct ChannelRecord: Hashable, Sendable {
    /// The LiveRelay app the channel belongs to.
    public var appID: String
    /// APNs's channel id (base64), as APNs answered the channel's creation.
    public var id: String
    /// The APNs environment the channel was created in (channels are per environment).
    public var environment: APNsEnvironment
    /// Fixed at creation by APNs, for the channel's whole life.
    public var storagePolicy: ChannelStoragePolicy
    public var createdAt: UnixTime

    public init(appID: String, id: String, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy, createdAt: UnixTime) {
        self.appID = appID
        self.id = id
        self.environment = environment
        self.storagePolicy = storagePolicy
        self.createdAt = createdAt
    }
}
