import Foundation
import LiveRelayMessages

/// The Swift values of the broadcast channel interop cases: Vectors/channels.json and
/// the case Tests/Interop/interop.py generates (`generated_channel_cases`), written out field by field.
extension InteropCases {
    static let channelID = "dHdvLWNoYW5uZWwtaWQtMQ=="
    static let channelID2 = "Y2hhbm5lbC0y_-+/"

    /// A start with only what the start needs, for the cases about the new fields.
    static func channelStart(channelID: String? = nil, inputPushToken: Bool?, strictPriorityBudget: Bool?) -> StartActivityRequest {
        StartActivityRequest(
            appID: app, activityID: "match-ch", attributesType: "MatchAttributes", attributesJSON: "{}", contentStateJSON: "{}",
            targets: Targets(allDevices: true), channelID: channelID, inputPushToken: inputPushToken,
            strictPriorityBudget: strictPriorityBudget)
    }

    static let channels: [String: any LiveRelayMessage] = [
        "channel_every_field": BroadcastChannel(
            appID: app, channelID: channelID, environment: .production, storagePolicy: .mostRecentMessage, createdAt: 1_893_456_000),
        "channel_no_storage_negative_created_at": BroadcastChannel(
            appID: "a", channelID: channelID2, environment: .sandbox, storagePolicy: .noStorage, createdAt: -62_135_596_800),
        "channel_unrecognized_storage_policy": BroadcastChannel(channelID: channelID, storagePolicy: .unrecognized(9)),
        "channel_empty": BroadcastChannel(),
        "create_channel_request_every_field": CreateChannelRequest(appID: app, environment: .sandbox, storagePolicy: .noStorage),
        "create_channel_request_with_unknown_fields": CreateChannelRequest(
            appID: app, environment: .production, storagePolicy: .mostRecentMessage),
        "create_channel_reply_every_field": CreateChannelReply(
            channel: BroadcastChannel(
                appID: app, channelID: channelID, environment: .production, storagePolicy: .noStorage, createdAt: 1_893_456_000)),
        "create_channel_reply_empty_channel": CreateChannelReply(channel: BroadcastChannel()),
        "create_channel_reply_empty": CreateChannelReply(),
        "list_channels_request_every_field": ListChannelsRequest(
            appID: app, environment: .production, pageSize: 1000, pageToken: "cGFnZS0y"),
        "list_channels_request_minimal": ListChannelsRequest(appID: app),
        "list_channels_reply_every_field": ListChannelsReply(
            channels: [
                BroadcastChannel(
                    appID: app, channelID: channelID, environment: .production, storagePolicy: .mostRecentMessage,
                    createdAt: 1_893_456_000),
                BroadcastChannel(),
                BroadcastChannel(appID: app, channelID: channelID2, environment: .sandbox, storagePolicy: .noStorage, createdAt: 1),
            ],
            nextPageToken: "cGFnZS0z — ✓"),
        "list_channels_reply_unknown_in_repeated": ListChannelsReply(channels: [BroadcastChannel(channelID: channelID)]),
        "list_channels_reply_empty": ListChannelsReply(),
        "delete_channel_request_every_field": DeleteChannelRequest(appID: app, channelID: channelID),
        "delete_channel_reply_empty": DeleteChannelReply(),
        "delete_channel_reply_unknown_fields": DeleteChannelReply(),
        "start_channel_every_new_field": channelStart(channelID: channelID, inputPushToken: false, strictPriorityBudget: true),
        "start_channel_present_true": channelStart(inputPushToken: true, strictPriorityBudget: false),
        "update_channel_every_new_field": UpdateActivityRequest(
            appID: app, activityID: "match-ch", contentStateJSON: #"{"s":1}"#, channelID: channelID, channelOnly: true,
            strictPriorityBudget: true),
        "update_channel_present_false": UpdateActivityRequest(
            appID: app, activityID: "match-ch", contentStateJSON: "{}", channelID: channelID2, channelOnly: false,
            strictPriorityBudget: false),
        "end_channel_every_new_field": EndActivityRequest(
            appID: app, activityID: "match-ch", staleDate: 1_893_459_600, relevanceScore: -0.5, channelID: channelID,
            channelOnly: true, strictPriorityBudget: true),
        "end_channel_present_zero": EndActivityRequest(
            appID: app, activityID: "match-ch", staleDate: 0, relevanceScore: 0, channelOnly: false, strictPriorityBudget: false),
        "summary_downgraded": DeliverySummary(targeted: 3, delivered: 3, complete: true, downgraded: .max),
        "update_reply_downgraded": UpdateActivityReply(
            timestamp: 1_893_456_100, summary: DeliverySummary(targeted: 1, queued: 1, downgraded: 1)),
    ]

    /// interop.py `generated_channel_cases()`.
    static let channelsGenerated: [String: any LiveRelayMessage] = [
        "list_channels_reply_1000_channels": ListChannelsReply(
            channels: (0..<1000).map { i in
                BroadcastChannel(
                    appID: "com.example.app", channelID: longestChannelID(i), environment: i % 2 == 1 ? .production : .sandbox,
                    storagePolicy: .noStorage, createdAt: 1_893_456_000 + Int64(i))
            },
            nextPageToken: String(repeating: "c", count: 256))
    ]

    /// interop.py: base64 of "channel-<i, 5 digits>-" and 82 zero bytes, 128 characters.
    static func longestChannelID(_ i: Int) -> String {
        let digits = String(i)
        let prefix = "channel-" + String(repeating: "0", count: 5 - digits.count) + digits + "-"
        return Data(Array(prefix.utf8) + [UInt8](repeating: 0, count: 82)).base64EncodedString()
    }
}
