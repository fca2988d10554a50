import LiveRelayMessages

/// What a fault soak sends: activity lifecycles (register tokens, Start, Updates,
/// End), several at once over several apps, until at least `targetPushes` pushes
/// have been targeted. Every identifier and every choice (fan-out, which tokens
/// APNs calls unregistered) comes from the run tag, the seed and the lifecycle's
/// number, so the mock can be told the dead tokens before the first call and a
/// failing run can be replayed.
///
/// One lifecycle `n` of app `n % apps`:
/// 1. RegisterToken: `startTokens` push-to-start tokens and `tokens(n)` update
///    tokens of activity `activityID(n)` (registering an update token creates the activity);
/// 2. StartActivity aimed at the push-to-start tokens;
/// 3. `updates` UpdateActivity calls, one at a time, or two at a time in every
///    `racingEvery`-th lifecycle: racing updates of one activity make the newer
///    supersede the older's queued pushes (in every lifecycle, that would be most pushes);
/// 4. EndActivity, which pushes to the update tokens once more and deletes them.
///
/// Start, Update and End wait for delivery, so each reply carries the call's
/// final account; the soak checks it adds up, call by call.
public struct SoakPlan: Sendable, Hashable {
    public var appIDs: [String]
    /// The run stops starting lifecycles once this many pushes are targeted (or planned by the ones running).
    public var targetPushes: Int
    /// Lifecycles running at once.
    public var activitiesInFlight: Int
    /// Update tokens per lifecycle: a draw from this range, per lifecycle.
    public var tokensPerActivity: ClosedRange<Int>
    /// Push-to-start tokens each Start is aimed at.
    public var startTokens: Int
    public var updates: Int
    /// Every this many lifecycles, one sends its updates two at a time.
    public var racingEvery: Int
    /// The share of update tokens APNs answers 410 Unregistered (the mock is told them up front).
    public var unregisteredShare: Double
    /// Start, Update and End wait for delivery up to this long: longer than any push's
    /// life plus APNs's slowest answer, so a call is answered with its final account.
    public var callTimeoutSeconds: Double
    public var seed: UInt64
    /// Makes every token and activity id of the run unique.
    public var runTag: String

    public init(
        appIDs: [String], targetPushes: Int, activitiesInFlight: Int = 32, tokensPerActivity: ClosedRange<Int> = 20...200,
        startTokens: Int = 5, updates: Int = 20, racingEvery: Int = 4, unregisteredShare: Double = 0.01,
        callTimeoutSeconds: Double = 60, seed: UInt64 = 0x50A4, runTag: String = Workload.makeRunTag()
    ) {
        precondition(!appIDs.isEmpty, "a soak needs at least one app")
        self.appIDs = appIDs
        self.targetPushes = max(1, targetPushes)
        self.activitiesInFlight = max(1, activitiesInFlight)
        self.tokensPerActivity = max(1, tokensPerActivity.lowerBound)...max(1, tokensPerActivity.upperBound)
        self.startTokens = max(1, startTokens)
        self.updates = max(0, updates)
        self.racingEvery = max(1, racingEvery)
        self.unregisteredShare = min(max(unregisteredShare, 0), 1)
        self.callTimeoutSeconds = callTimeoutSeconds
        self.seed = seed
        self.runTag = runTag
    }

    /// Update tokens of lifecycle `n`.
    public func tokens(_ n: Int) -> Int {
        let span = UInt64(tokensPerActivity.count)
        return tokensPerActivity.lowerBound + Int(scatter(seed ^ (UInt64(n) &* 0x9E37)) % span)
    }

    /// The pushes lifecycle `n` targets if no token dies on the way.
    public func plannedPushes(_ n: Int) -> Int { startTokens + (updates + 1) * tokens(n) }

    public func app(_ n: Int) -> String { appIDs[n % appIDs.count] }

    /// UpdateActivity calls of lifecycle `n` in flight at once.
    public func updatesInFlight(_ n: Int) -> Int { n % racingEvery == 0 ? 2 : 1 }

    public func activityID(_ n: Int) -> String { "soak-\(runTag)-\(n)" }

    /// Push-to-start token `i` of lifecycle `n`.
    public func startToken(_ n: Int, _ i: Int) -> String { token(kind: 1, n, i) }

    /// Update token `i` of lifecycle `n`.
    public func updateToken(_ n: Int, _ i: Int) -> String { token(kind: 2, n, i) }

    /// Whether the mock answers update token `i` of lifecycle `n` with 410 Unregistered.
    public func isUnregistered(_ n: Int, _ i: Int) -> Bool {
        guard unregisteredShare > 0 else { return false }
        return Double(scatter(seed &+ (UInt64(n) << 24) &+ UInt64(i)) % 1_000_000) < unregisteredShare * 1_000_000
    }

    /// More lifecycles than the run can need: every one at its smallest fan-out, plus the ones in flight.
    public var lifecycleBound: Int {
        let smallest = startTokens + (updates + 1) * tokensPerActivity.lowerBound
        return (targetPushes + smallest - 1) / smallest + activitiesInFlight
    }

    /// The tokens the mock must answer 410 Unregistered, with the `timestamp` it
    /// reports: alternately long before the run (the token was registered again
    /// since, so the store keeps it and every later push to it is pruned again) and
    /// long after (the store deletes it, and later calls no longer target it).
    public func unregisteredTokens(nowMilliseconds: Int64) -> [String: Int64] {
        var dead: [String: Int64] = [:]
        for n in 0..<lifecycleBound {
            for i in 0..<tokens(n) where isUnregistered(n, i) {
                dead[updateToken(n, i)] = (n + i) % 2 == 0 ? nowMilliseconds - 3_600_000 : nowMilliseconds + 86_400_000
            }
        }
        return dead
    }

    /// 64 lowercase hex digits, unique per (run, kind, lifecycle, index), scattered like real tokens.
    private func token(kind: UInt64, _ n: Int, _ i: Int) -> String {
        hex(scatter((UInt64(n) << 28) | (UInt64(i) << 4) | kind), digits: 16) + runTag + hex(kind, digits: 2) + "50a4"
            + String(repeating: "c3", count: 17)
    }

    // MARK: Requests

    static let attributesType = "SoakAttributes"

    func registerStartToken(_ n: Int, _ i: Int) -> RegisterTokenRequest {
        RegisterTokenRequest(
            appID: app(n), kind: .pushToStart, token: startToken(n, i), environment: .production,
            attributesType: Self.attributesType, deviceID: "soak-\(runTag)-s\(n)-\(i)")
    }

    func registerUpdateToken(_ n: Int, _ i: Int) -> RegisterTokenRequest {
        RegisterTokenRequest(
            appID: app(n), kind: .update, token: updateToken(n, i), environment: .production,
            activityID: activityID(n), deviceID: "soak-\(runTag)-u\(n)-\(i)")
    }

    func start(_ n: Int) -> StartActivityRequest {
        StartActivityRequest(
            appID: app(n), activityID: activityID(n), attributesType: Self.attributesType,
            attributesJSON: #"{"soak":"\#(runTag)","n":\#(n)}"#, contentStateJSON: #"{"step":0}"#,
            targets: Targets(pushToStartTokens: (0..<startTokens).map { startToken(n, $0) }), waitForDelivery: true)
    }

    func update(_ n: Int, step: Int) -> UpdateActivityRequest {
        UpdateActivityRequest(
            appID: app(n), activityID: activityID(n), contentStateJSON: #"{"step":\#(step)}"#, waitForDelivery: true)
    }

    func end(_ n: Int) -> EndActivityRequest {
        EndActivityRequest(appID: app(n), activityID: activityID(n), contentStateJSON: #"{"step":-1}"#, waitForDelivery: true)
    }
}
