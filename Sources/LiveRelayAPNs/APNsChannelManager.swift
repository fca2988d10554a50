import NIOCore

/// ``APNsChannelManaging`` over any ``APNsTransport``: builds each call's
/// request, sends it like a push, and reads the answer. The APNs client gives
/// it pools to the management endpoints; a test may give it a fake.
///
/// Kept apart from the transport so the HTTP/2 client stays a carrier of
/// requests and answers: what a 201, a 204 or a JSON list means is decided
/// here, once, for every transport.
public struct APNsChannelManager: APNsChannelManaging {
    /// Sends every call; requests carry their environment, so an
    /// ``APNsEnvironmentRouter`` sends each to its environment's management endpoint.
    public let transport: any APNsTransport

    public init(transport: any APNsTransport) {
        self.transport = transport
    }

    public func createChannel(
        bundleID: String, environment: APNsEnvironment, storagePolicy: ChannelStoragePolicy
    ) -> EventLoopFuture<String> {
        send(.create(bundleID: bundleID, storagePolicy: storagePolicy), environment: environment).flatMapThrowing {
            response throws(APNsChannelManagementError) -> String in
            // Whether the id is one a call can name is the contract's rule, checked by the channel service.
            guard let id = response.channelID, !id.isEmpty else {
                throw .malformedAnswer("\(response.status) to a create without an apns-channel-id")
            }
            return id
        }
    }

    public func deleteChannel(_ channelID: String, bundleID: String, environment: APNsEnvironment) -> EventLoopFuture<Void> {
        send(.delete(channelID: channelID, bundleID: bundleID), environment: environment).map { _ in }
    }

    /// An empty body is read as no channels (APNs documents the object, not whether it omits it when empty).
    public func listChannels(bundleID: String, environment: APNsEnvironment) -> EventLoopFuture<[String]> {
        send(.list(bundleID: bundleID), environment: environment).flatMapThrowing {
            response throws(APNsChannelManagementError) -> [String] in
            if response.body.isEmpty { return [] }
            guard let json = try? JSONValue.parse(response.body), case let .array(items)? = json["channels"] else {
                throw .malformedAnswer("the channel list is not {\"channels\": [...]}")
            }
            return try items.map { item throws(APNsChannelManagementError) -> String in
                guard let id = item.stringValue else { throw .malformedAnswer("a channel id in the list is not a string") }
                return id
            }
        }
    }

    /// Reads a channel's storage policy (`GET /1/apps/<bundle id>/channels`): a check that
    /// the channel still exists, and what its sends' `apns-expiration` must be.
    public func storagePolicy(
        ofChannel channelID: String, bundleID: String, environment: APNsEnvironment
    )
        -> EventLoopFuture<ChannelStoragePolicy>
    {
        send(.read(channelID: channelID, bundleID: bundleID), environment: environment).flatMapThrowing {
            response throws(APNsChannelManagementError) -> ChannelStoragePolicy in
            guard let json = try? JSONValue.parse(response.body),
                let raw = json["message-storage-policy"]?.integerValue, let policy = ChannelStoragePolicy(rawValue: Int(raw))
            else { throw .malformedAnswer("the channel configuration has no valid message-storage-policy") }
            return policy
        }
    }

    /// Sends one call; succeeds with a 2xx answer, fails with ``APNsChannelManagementError`` otherwise.
    public func send(_ call: APNsChannelManagementRequest, environment: APNsEnvironment) -> EventLoopFuture<APNsResponse> {
        transport.send(APNsRequest(management: call, environment: environment))
            .flatMapErrorThrowing { error throws(APNsChannelManagementError) -> APNsResponse in
                throw .transport(error as? APNsTransportError ?? .malformedResponse("\(error)"))
            }
            .flatMapThrowing { response throws(APNsChannelManagementError) -> APNsResponse in
                guard response.isSuccess else {
                    throw .rejected(status: response.status, reason: response.reason ?? "status \(response.status)")
                }
                return response
            }
    }
}
