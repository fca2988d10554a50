import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages

let t0 = UnixTime(seconds: 1_700_000_000)
let appID = "com.example.app"
let app = App(id: appID, bundleID: appID)
let order1 = ActivityKey(appID: appID, activityID: "order-1")

func hex(_ n: Int) -> String {
    let digits = String(n, radix: 16)
    return "ab" + String(repeating: "0", count: 62 - digits.count) + digits
}

func pushToStart(
    _ token: String, device: String = "device-1", type: String = "DeliveryAttributes", user: String = "",
    expiresAt: Int64 = 0, environment: Environment = .production
) -> RegisterTokenRequest {
    RegisterTokenRequest(
        appID: appID, kind: .pushToStart, token: token, environment: environment,
        attributesType: type, externalUserID: user, deviceID: device, expiresAt: expiresAt)
}

func updateToken(
    _ token: String, activity: String = "order-1", device: String = "device-1", remove: Bool = false
)
    -> RegisterTokenRequest
{
    RegisterTokenRequest(
        appID: appID, kind: .update, token: token, environment: .sandbox, activityID: activity,
        deviceID: device, remove: remove)
}

func start(
    _ activity: String = "order-1", key: String? = nil, content: String = #"{"status":"placed"}"#
)
    -> StartActivityRequest
{
    StartActivityRequest(
        appID: appID, activityID: activity, attributesType: "DeliveryAttributes",
        attributesJSON: #"{"orderID":"A1"}"#, contentStateJSON: content,
        targets: Targets(allDevices: true), idempotencyKey: key)
}

func update(_ activity: String = "order-1", key: String? = nil) -> UpdateActivityRequest {
    UpdateActivityRequest(
        appID: appID, activityID: activity, contentStateJSON: #"{"status":"cooking"}"#,
        idempotencyKey: key)
}

func endRequest(_ activity: String = "order-1") -> EndActivityRequest {
    EndActivityRequest(appID: appID, activityID: activity)
}
