import LiveRelayMessages

/// Decoding (with validation, as the server does) of each request from its bytes.
enum DecodeWorkloads {
    static let appID = "com.example.sportsapp"
    static let activityID = "match-2025-05-17-ars-che-3f9a1c"
    static let attributesType = "MatchActivityAttributes"
    static let token = "8f2b1c7d9e4a6b3c5d7e9f0a1b2c3d4e5f60718293a4b5c6d7e8f9012a3b4c5d"
    static let contentState =
        #"{"homeScore":2,"awayScore":1,"minute":67,"period":"second_half","lastEvent":{"type":"goal","player":"B. Saka","team":"home","minute":66}}"#
    static let alert = Alert(title: "Goal! Arsenal 2–1 Chelsea", body: "Bukayo Saka scores in the 66th minute.", sound: "goal.caf")

    static let registerToken = RegisterTokenRequest(
        appID: appID, kind: .pushToStart, token: token, environment: .production,
        attributesType: attributesType, externalUserID: "user-8c1f2a", deviceID: "device-3F2504E0-4F89",
        expiresAt: 1_767_225_600_000)

    static let startActivity = StartActivityRequest(
        appID: appID, activityID: activityID, attributesType: attributesType,
        attributesJSON: #"{"homeTeam":"Arsenal","awayTeam":"Chelsea","venue":"Emirates Stadium"}"#,
        contentStateJSON: contentState, alert: alert, staleDate: 1_747_503_600, dismissalDate: 1_747_510_800,
        relevanceScore: 0.75, priority: .high,
        targets: Targets(pushToStartTokens: [token], externalUserIDs: ["user-8c1f2a", "user-44b9e0"]),
        idempotencyKey: "start-7d1e2c9b", waitForDelivery: true)

    static let updateActivity = UpdateActivityRequest(
        appID: appID, activityID: activityID, contentStateJSON: contentState, alert: alert,
        staleDate: 1_747_503_600, relevanceScore: 0.9, priority: .high,
        idempotencyKey: "update-000042", waitForDelivery: false)

    static let endActivity = EndActivityRequest(
        appID: appID, activityID: activityID, contentStateJSON: #"{"homeScore":3,"awayScore":1,"period":"full_time"}"#,
        dismissalDate: 1_747_514_400, idempotencyKey: "end-000001", waitForDelivery: true, priority: .low)

    static let ping = PingRequest(payload: Array(0..<32))

    static let createChannel = CreateChannelRequest(appID: appID, environment: .production, storagePolicy: .mostRecentMessage)

    static var all: [Workload] {
        [
            workload("decode-register-token", registerToken),
            workload("decode-start-activity", startActivity),
            workload("decode-update-activity", updateActivity),
            workload("decode-end-activity", endActivity),
            workload("decode-ping", ping),
            workload("decode-create-channel", createChannel),
        ]
    }

    static func workload<M: LiveRelayMessage>(_ name: String, _ message: M) -> Workload {
        Workload(name: name, unit: "decode", iterations: 20_000) { _ in
            let bytes = message.serializedBytes()
            guard try M(serializedBytes: bytes) == message else {
                throw WorkloadFailure("\(name): the fixture does not round-trip")
            }
            return {
                keep(try M(serializedBytes: bytes))
                return 1
            }
        }
    }
}
