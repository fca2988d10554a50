import Foundation
import LiveRelayMessages
import SwiftProtobufMessages

// Realistic request values, built identically for both implementations.
// (A check in main.swift verifies both encode them to the same bytes.)

enum Fixture {
    static let appID = "com.example.sportsapp"
    static let activityID = "match-2025-05-17-ars-che-3f9a1c"
    static let attributesType = "MatchActivityAttributes"
    /// A 64-hex-digit token (today's APNs length) and a 160-digit one (the upper end seen).
    static let token64 = "8f2b1c7d9e4a6b3c5d7e9f0a1b2c3d4e5f60718293a4b5c6d7e8f9012a3b4c5d"
    static let token160 = String(repeating: "a1b2c3d4e5f60718", count: 10)
    static let attributesJSON = #"{"homeTeam":"Arsenal","awayTeam":"Chelsea","competition":"Premier League","venue":"Emirates Stadium"}"#
    /// 226 bytes.
    static let contentStateJSON = #"{"homeScore":2,"awayScore":1,"minute":67,"period":"second_half","lastEvent":{"type":"goal","player":"B. Saka","team":"home","minute":66},"possession":{"home":58,"away":42},"shots":{"home":11,"away":7},"updated":1747500000}"#
    /// 161 bytes: the final state.
    static let finalStateJSON = #"{"homeScore":3,"awayScore":1,"minute":90,"period":"full_time","result":"home_win","scorers":["B. Saka","M. Ødegaard","K. Havertz","C. Palmer"],"attendance":60260}"#
    static let alertTitle = "Goal! Arsenal 2–1 Chelsea"
    static let alertBody = "Bukayo Saka scores in the 66th minute. Tap to follow the match live."
    static let alertSound = "goal.caf"
    static let userIDs = ["user-8c1f2a", "user-44b9e0", "user-d71c3e"]
    static let pingPayload: [UInt8] = Array(0..<32)

    // MARK: LiveRelayMessages (protobuf-c)

    static var lrRegister: RegisterTokenRequest {
        RegisterTokenRequest(
            appID: appID, kind: .pushToStart, token: token64, environment: .production,
            attributesType: attributesType, externalUserID: userIDs[0], deviceID: "device-3F2504E0-4F89",
            expiresAt: 1_767_225_600_000)
    }

    static var lrAlert: Alert { Alert(title: alertTitle, body: alertBody, sound: alertSound) }

    static var lrStart: StartActivityRequest {
        StartActivityRequest(
            appID: appID, activityID: activityID, attributesType: attributesType, attributesJSON: attributesJSON,
            contentStateJSON: contentStateJSON, alert: lrAlert, staleDate: 1_747_503_600, dismissalDate: 1_747_510_800,
            relevanceScore: 0.75, priority: .high,
            targets: Targets(pushToStartTokens: [token64, token160], externalUserIDs: userIDs),
            idempotencyKey: "start-7d1e2c9b", waitForDelivery: true)
    }

    static var lrUpdate: UpdateActivityRequest {
        UpdateActivityRequest(
            appID: appID, activityID: activityID, contentStateJSON: contentStateJSON, alert: lrAlert,
            staleDate: 1_747_503_600, relevanceScore: 0.9, priority: .high,
            idempotencyKey: "update-000042", waitForDelivery: false)
    }

    static var lrEnd: EndActivityRequest {
        EndActivityRequest(
            appID: appID, activityID: activityID, contentStateJSON: finalStateJSON, dismissalDate: 1_747_514_400,
            idempotencyKey: "end-000001", waitForDelivery: true, priority: .low)
    }

    static var lrPing: PingRequest { PingRequest(payload: pingPayload) }

    /// A channel id as APNs answers it (base64 of 16 bytes) and a page token as the server makes it.
    static let channelID = "dHJhY2tpbmctY2hhbm5lbDE="
    static let pageToken = "cHJvZHVjdGlvbjo0Mg"

    static var lrCreateChannel: CreateChannelRequest {
        CreateChannelRequest(appID: appID, environment: .production, storagePolicy: .mostRecentMessage)
    }

    static var lrListChannels: ListChannelsRequest {
        ListChannelsRequest(appID: appID, environment: .production, pageSize: 50, pageToken: pageToken)
    }

    static var lrDeleteChannel: DeleteChannelRequest { DeleteChannelRequest(appID: appID, channelID: channelID) }

    // MARK: swift-protobuf

    static var spRegister: Liverelay_V1_RegisterTokenRequest {
        var m = Liverelay_V1_RegisterTokenRequest()
        m.appID = appID
        m.kind = .pushToStart
        m.token = token64
        m.environment = .production
        m.attributesType = attributesType
        m.externalUserID = userIDs[0]
        m.deviceID = "device-3F2504E0-4F89"
        m.expiresAt = 1_767_225_600_000
        return m
    }

    static var spAlert: Liverelay_V1_Alert {
        var a = Liverelay_V1_Alert()
        a.title = alertTitle
        a.body = alertBody
        a.sound = alertSound
        return a
    }

    static var spStart: Liverelay_V1_StartActivityRequest {
        var m = Liverelay_V1_StartActivityRequest()
        m.appID = appID
        m.activityID = activityID
        m.attributesType = attributesType
        m.attributesJson = attributesJSON
        m.contentStateJson = contentStateJSON
        m.alert = spAlert
        m.staleDate = 1_747_503_600
        m.dismissalDate = 1_747_510_800
        m.relevanceScore = 0.75
        m.priority = .high
        var t = Liverelay_V1_Targets()
        t.pushToStartTokens = [token64, token160]
        t.externalUserIds = userIDs
        m.targets = t
        m.idempotencyKey = "start-7d1e2c9b"
        m.waitForDelivery = true
        return m
    }

    static var spUpdate: Liverelay_V1_UpdateActivityRequest {
        var m = Liverelay_V1_UpdateActivityRequest()
        m.appID = appID
        m.activityID = activityID
        m.contentStateJson = contentStateJSON
        m.alert = spAlert
        m.staleDate = 1_747_503_600
        m.relevanceScore = 0.9
        m.priority = .high
        m.idempotencyKey = "update-000042"
        m.waitForDelivery = false
        return m
    }

    static var spEnd: Liverelay_V1_EndActivityRequest {
        var m = Liverelay_V1_EndActivityRequest()
        m.appID = appID
        m.activityID = activityID
        m.contentStateJson = finalStateJSON
        m.dismissalDate = 1_747_514_400
        m.idempotencyKey = "end-000001"
        m.waitForDelivery = true
        m.priority = .low
        return m
    }

    static var spPing: Liverelay_V1_PingRequest {
        var m = Liverelay_V1_PingRequest()
        m.payload = Data(pingPayload)
        return m
    }

    static var spCreateChannel: Liverelay_V1_CreateChannelRequest {
        var m = Liverelay_V1_CreateChannelRequest()
        m.appID = appID
        m.environment = .production
        m.storagePolicy = .mostRecentMessage
        return m
    }

    static var spListChannels: Liverelay_V1_ListChannelsRequest {
        var m = Liverelay_V1_ListChannelsRequest()
        m.appID = appID
        m.environment = .production
        m.pageSize = 50
        m.pageToken = pageToken
        return m
    }

    static var spDeleteChannel: Liverelay_V1_DeleteChannelRequest {
        var m = Liverelay_V1_DeleteChannelRequest()
        m.appID = appID
        m.channelID = channelID
        return m
    }
}
