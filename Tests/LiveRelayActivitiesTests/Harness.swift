import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import LiveRelayWire
import Logging
import NIOCore
import NIOPosix

let t0 = UnixTime(seconds: 1_700_000_000)
let appID = "com.example.app"

func hex(_ n: Int) -> String {
    let digits = String(n, radix: 16)
    return "ab" + String(repeating: "0", count: 62 - digits.count) + digits
}

/// A service over a real in-memory store, a recording sink and a clock the test moves.
struct Harness {
    let clock = ManualClock(t0)
    let store = InMemoryActivityStore()
    let sink: any PushSink
    let recorder: RecordingPushSink
    let service: ActivityService
    let loop = MultiThreadedEventLoopGroup.singleton.any()

    init(apps: AppDirectory = .open, sink: (any PushSink)? = nil, quotas: QuotaGate = QuotaGate()) {
        let recorder = RecordingPushSink()
        self.recorder = recorder
        self.sink = sink ?? recorder
        self.service = ActivityService(
            store: store, clock: clock, logger: Logger(label: "test"), sink: self.sink, apps: apps, quotas: quotas)
    }

    func context(apps: AppScope = .only([appID]), deadline: NIODeadline? = nil) -> CallContext {
        CallContext(
            principal: Principal(keyID: "key-1", apps: apps, allowedMethods: Set(LiveRelayMethod.allCases)),
            eventLoop: loop, deadline: deadline, requestID: 1)
    }

    @discardableResult
    func register(_ request: RegisterTokenRequest) async throws -> RegisterTokenReply {
        try await service.registerToken(request, context: context()).get()
    }

    @discardableResult
    func start(_ request: StartActivityRequest) async throws -> StartActivityReply {
        try await service.startActivity(request, context: context()).get()
    }

    @discardableResult
    func update(_ request: UpdateActivityRequest) async throws -> UpdateActivityReply {
        try await service.updateActivity(request, context: context()).get()
    }

    @discardableResult
    func end(_ request: EndActivityRequest) async throws -> EndActivityReply {
        try await service.endActivity(request, context: context()).get()
    }
}

/// The RPCError a call failed with, or nil if it succeeded.
func rpcError<T: Sendable>(_ future: EventLoopFuture<T>) async -> RPCError? {
    do {
        _ = try await future.get()
        return nil
    } catch {
        return error as? RPCError
    }
}

func pushToStart(_ token: String, device: String = "device-1", user: String = "", app: String = appID) -> RegisterTokenRequest {
    RegisterTokenRequest(
        appID: app, kind: .pushToStart, token: token, environment: .production,
        attributesType: "DeliveryAttributes", externalUserID: user, deviceID: device)
}

func updateToken(_ token: String, activity: String = "order-1", device: String = "device-1") -> RegisterTokenRequest {
    RegisterTokenRequest(
        appID: appID, kind: .update, token: token, environment: .sandbox, activityID: activity,
        deviceID: device)
}

func startRequest(
    _ activity: String = "order-1", app: String = appID, targets: Targets = Targets(allDevices: true),
    key: String? = nil, content: String = #"{"status":"placed"}"#, wait: Bool? = nil
) -> StartActivityRequest {
    StartActivityRequest(
        appID: app, activityID: activity, attributesType: "DeliveryAttributes",
        attributesJSON: #"{"orderID":"A1"}"#, contentStateJSON: content,
        targets: targets, idempotencyKey: key, waitForDelivery: wait)
}

func updateRequest(
    _ activity: String = "order-1", content: String? = #"{"status":"cooking"}"#, end: Bool? = nil,
    key: String? = nil
) -> UpdateActivityRequest {
    UpdateActivityRequest(
        appID: appID, activityID: activity, contentStateJSON: content, endActivity: end,
        idempotencyKey: key)
}

func endRequest(_ activity: String = "order-1", key: String? = nil) -> EndActivityRequest {
    EndActivityRequest(appID: appID, activityID: activity, idempotencyKey: key)
}
