import LiveRelayMessages
import NIOConcurrencyHelpers
import NIOCore

/// Builds the requests of a run so that every RPC of the mix can succeed against the real
/// activities service, and keeps the server's state stable while the run goes:
///
/// - setup: per app one push-to-start token (what StartActivity targets); per activity
///   `tokensPerActivity` update tokens (registering an update token creates the activity);
///   and, when EndActivity is in the mix, a reserve of extra activities for it to end;
/// - RegisterToken registers a new push-to-start token of another attributes type, so the
///   store grows by one token per call but no Start or Update fans out to more devices;
/// - StartActivity starts a new activity aimed at its app's setup token; once it succeeds
///   the activity may be ended;
/// - UpdateActivity round-robins over the setup activities (fan-out = tokens per activity);
/// - EndActivity ends an activity started by this run or from the reserve; when none is
///   left it targets one that does not exist, and the NOT_FOUND is reported, not hidden.
///
/// Every identifier carries a random run tag, so repeated runs against one server do not
/// collide. Thread-safe: a lock around counters is cheaper than a request's encoding.
public final class Workload: @unchecked Sendable {
    public let scenario: Scenario
    public let runTag: String
    public let endReserve: Int
    private let appIDs: [String]
    private let lock = NIOLock()
    private var registered = 0
    private var startedCount = 0
    private var updates = 0
    private var ends = 0
    private var missingEnds = 0
    private var endable: [Endable] = []

    private struct Endable {
        var app: Int
        var activityID: String
    }

    static let startAttributesType = "BenchAttributes"
    static let registeredAttributesType = "BenchRegistered"

    public init(scenario: Scenario, runTag: String, endReserve: Int) {
        self.scenario = scenario
        self.runTag = runTag
        self.endReserve = scenario.weight(of: .endActivity) > 0 ? endReserve : 0
        appIDs = scenario.appIDs
        endable.reserveCapacity(self.endReserve)
        for i in 0..<self.endReserve {
            endable.append(Endable(app: i % appIDs.count, activityID: "b\(runTag)-e\(i)"))
        }
    }

    /// A random 8-hex-digit tag.
    public static func makeRunTag() -> String {
        hex(UInt64.random(in: 0...UInt64(UInt32.max)), digits: 8)
    }

    // MARK: Setup

    private var activityCount: Int { appIDs.count * scenario.activitiesPerApp }
    private var updateTokenCount: Int { activityCount * scenario.tokensPerActivity }

    /// Setup calls, all RegisterToken: push-to-start tokens, update tokens, the End reserve.
    public var setupCount: Int {
        scenario.needsSetup ? appIDs.count + updateTokenCount + endReserve : 0
    }

    public func setupRequest(_ i: Int) -> ByteBuffer {
        let apps = appIDs.count
        if i < apps {
            return encode(
                RegisterTokenRequest(
                    appID: appIDs[i], kind: .pushToStart, token: token(kind: 1, i), environment: .sandbox,
                    attributesType: Self.startAttributesType, deviceID: "b\(runTag)-start-device"))
        }
        var j = i - apps
        if j < updateTokenCount {
            let activity = j / scenario.tokensPerActivity
            let app = activity % apps
            return encode(
                RegisterTokenRequest(
                    appID: appIDs[app], kind: .update, token: token(kind: 2, j), environment: .sandbox,
                    activityID: activityID(activity / apps), deviceID: deviceID("d", j)))
        }
        j -= updateTokenCount
        return encode(
            RegisterTokenRequest(
                appID: appIDs[j % apps], kind: .update, token: token(kind: 3, j), environment: .sandbox,
                activityID: "b\(runTag)-e\(j)", deviceID: deviceID("ed", j)))
    }

    // MARK: The run

    /// The payload of the next call of `rpc`; for StartActivity also what to pass to
    /// `started(_:)` once it succeeds.
    public func request(_ rpc: BenchRPC) -> (payload: ByteBuffer, started: (app: Int, activityID: String)?) {
        let apps = appIDs.count
        switch rpc {
        case .registerToken:
            let n = lock.withLock { () -> Int in
                defer { registered += 1 }; return registered
            }
            return (
                encode(
                    RegisterTokenRequest(
                        appID: appIDs[n % apps], kind: .pushToStart, token: token(kind: 4, n), environment: .sandbox,
                        attributesType: Self.registeredAttributesType, deviceID: deviceID("r", n))), nil
            )
        case .startActivity:
            let n = lock.withLock { () -> Int in
                defer { startedCount += 1 }; return startedCount
            }
            let app = n % apps
            let id = "b\(runTag)-s\(n)"
            return (
                encode(
                    StartActivityRequest(
                        appID: appIDs[app], activityID: id, attributesType: Self.startAttributesType,
                        attributesJSON: #"{"bench":"\#(runTag)"}"#,
                        contentStateJSON: ContentState.json(bytes: scenario.contentStateBytes, sequence: n),
                        targets: Targets(pushToStartTokens: [token(kind: 1, app)]), waitForDelivery: waitForDelivery)), (app, id)
            )
        case .updateActivity:
            let n = lock.withLock { () -> Int in
                defer { updates += 1 }; return updates
            }
            return (
                encode(
                    UpdateActivityRequest(
                        appID: appIDs[n % apps], activityID: activityID((n / apps) % scenario.activitiesPerApp),
                        contentStateJSON: ContentState.json(bytes: scenario.contentStateBytes, sequence: n),
                        waitForDelivery: waitForDelivery)), nil
            )
        case .endActivity:
            let (n, target) = lock.withLock { () -> (Int, Endable?) in
                defer { ends += 1 }
                if let last = endable.popLast() { return (ends, last) }
                missingEnds += 1
                return (ends, nil)
            }
            let chosen = target ?? Endable(app: n % apps, activityID: "b\(runTag)-missing\(n)")
            return (
                encode(
                    EndActivityRequest(
                        appID: appIDs[chosen.app], activityID: chosen.activityID,
                        contentStateJSON: ContentState.json(bytes: scenario.contentStateBytes, sequence: n),
                        waitForDelivery: waitForDelivery)), nil
            )
        case .ping:
            return (Self.pingPayload, nil)
        }
    }

    /// Set only when asked: an absent field keeps the request byte-identical to older runs.
    private var waitForDelivery: Bool? { scenario.waitForDelivery ? true : nil }

    /// A started activity may now be ended.
    public func started(_ activity: (app: Int, activityID: String)) {
        lock.withLock { endable.append(Endable(app: activity.app, activityID: activity.activityID)) }
    }

    /// EndActivity calls that found nothing to end (expected NOT_FOUND).
    public var endsWithoutTarget: Int { lock.withLock { missingEnds } }

    private static let pingPayload: ByteBuffer = {
        var buffer = ByteBuffer()
        PingRequest(payload: Array(repeating: 0x2a, count: 32)).serialize(into: &buffer)
        return buffer
    }()

    private func activityID(_ i: Int) -> String { "b\(runTag)-a\(i)" }

    /// 64 lowercase hex digits, unique per (run, kind, index), spread over the key space
    /// like real APNs tokens: a store's index sees them land on random pages, as in
    /// production, not append at one end (which would flatter a B-tree store).
    private func token(kind: UInt8, _ index: Int) -> String {
        hex(scatter(UInt64(index)), digits: 16) + runTag + hex(UInt64(kind), digits: 2) + "5a1e" + String(repeating: "c3", count: 17)
    }

    /// A device id per index, scattered the same way (real ones are random UUIDs).
    private func deviceID(_ prefix: String, _ index: Int) -> String {
        "b\(runTag)-\(prefix)\(hex(scatter(UInt64(index)), digits: 16))"
    }

    private func encode(_ message: some LiveRelayMessage) -> ByteBuffer {
        var buffer = ByteBuffer()
        message.serialize(into: &buffer)
        return buffer
    }
}

private let hexDigits = Array("0123456789abcdef".utf8)

func hex(_ value: UInt64, digits: Int) -> String {
    var bytes = [UInt8](repeating: 0, count: digits)
    var v = value
    for i in stride(from: digits - 1, through: 0, by: -1) {
        bytes[i] = hexDigits[Int(v & 0xf)]
        v >>= 4
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// A bijection on 64-bit values (the splitmix64 finalizer): distinct indexes stay distinct,
/// neighbours land far apart.
func scatter(_ value: UInt64) -> UInt64 {
    var z = value &+ 0x9e37_79b9_7f4a_7c15
    z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
    z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
    return z ^ (z >> 31)
}
