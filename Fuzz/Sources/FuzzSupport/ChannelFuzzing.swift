import LiveRelayMessages

/// The broadcast channel requests, in the order of the selector byte.
let channelMethods: [LiveRelayMethod] = [.createChannel, .listChannels, .deleteChannel]

/// Byte 0 picks the request type (`channelMethods[byte % 3]`), the rest are its bytes.
public func fuzzChannelRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) {
    guard let data, size > 0 else { return }
    let method = channelMethods[Int(data[0]) % channelMethods.count]
    fuzzRequest(method.requestType, data + 1, size - 1)
}

extension Seeds {
    /// A valid request of every channel method, each prefixed with its selector byte.
    public static var channelRequests: [(String, [UInt8])] {
        let app = "com.example.scores"
        let requests: [(String, LiveRelayMethod, any LiveRelayMessage)] = [
            (
                "swift-create-channel", .createChannel,
                CreateChannelRequest(appID: app, environment: .production, storagePolicy: .noStorage)
            ),
            (
                "swift-list-channels", .listChannels,
                ListChannelsRequest(appID: app, environment: .sandbox, pageSize: 1000, pageToken: "dGVzdC1jaGFubmVs+/==")
            ),
            ("swift-delete-channel", .deleteChannel, DeleteChannelRequest(appID: app, channelID: "dGVzdC1jaGFubmVsLTAwMQ==")),
        ]
        return requests.map { name, method, request in
            (name, [UInt8(channelMethods.firstIndex(of: method)!)] + request.serializedBytes())
        }
    }
}
