import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore

let t0 = UnixTime(seconds: 1_700_000_000)
let app = App(id: "com.example.app", bundleID: "com.example.app")

/// 64 lowercase hex characters, distinct per `n`.
func hex(_ n: Int) -> String {
    let digits = String(n, radix: 16)
    return "ab" + String(repeating: "0", count: 62 - digits.count) + digits
}

func pushToStart(
    _ token: String, device: String? = "device-1", type: String = "DeliveryAttributes", user: String = "",
    environment: Environment = .production, expiresAt: Int64 = 0, remove: Bool = false
) -> RegisterTokenRequest {
    RegisterTokenRequest(
        appID: app.id, kind: .pushToStart, token: token, environment: environment, attributesType: type,
        externalUserID: user, deviceID: device ?? "", expiresAt: expiresAt, remove: remove)
}

func updateToken(
    _ token: String, activity: String = "order-1", device: String? = "device-1", expiresAt: Int64 = 0,
    remove: Bool = false
) -> RegisterTokenRequest {
    RegisterTokenRequest(
        appID: app.id, kind: .update, token: token, environment: .sandbox, activityID: activity,
        deviceID: device ?? "", expiresAt: expiresAt, remove: remove)
}

func start(
    _ activity: String = "order-1", targets: Targets = Targets(allDevices: true), key: String? = nil,
    content: String = #"{"status":"placed"}"#, attributes: String = #"{"orderID":"A1"}"#
) -> StartActivityRequest {
    StartActivityRequest(
        appID: app.id, activityID: activity, attributesType: "DeliveryAttributes", attributesJSON: attributes,
        contentStateJSON: content, alert: Alert(title: "Order placed"), targets: targets, idempotencyKey: key)
}

func update(
    _ activity: String = "order-1", content: String? = #"{"status":"cooking"}"#, key: String? = nil,
    end: Bool? = nil, dismissal: Int64? = nil
) -> UpdateActivityRequest {
    UpdateActivityRequest(
        appID: app.id, activityID: activity, contentStateJSON: content, dismissalDate: dismissal,
        endActivity: end, idempotencyKey: key)
}

func endRequest(
    _ activity: String = "order-1", content: String? = nil, dismissal: Int64? = nil, key: String? = nil
)
    -> EndActivityRequest
{
    EndActivityRequest(
        appID: app.id, activityID: activity, contentStateJSON: content, dismissalDate: dismissal,
        idempotencyKey: key)
}

/// Runs a mutation, returning the refusal instead of throwing it.
func refusal<M: StoreMutation>(_ state: inout InMemoryState, _ mutation: M, now: UnixTime) -> DomainError? {
    do throws(DomainError) {
        _ = try state.apply(mutation, now: now)
        return nil
    } catch {
        return error
    }
}

/// The field a request is refused for when the server decodes its bytes, or nil if it decodes.
func decodingRefusal<M: LiveRelayMessage>(_ request: M) -> String? {
    do throws(MessageError) {
        _ = try M(serializedBytes: request.serializedBytes())
        return nil
    } catch {
        return error.field
    }
}
