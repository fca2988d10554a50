import LiveRelayPushOutlet

/// When an app's token rejections stop meaning "these devices left".
public struct MassPruneGuardPolicy: Hashable, Sendable {
    /// How many of the app's latest judged answers are looked at.
    public var window: Int
    /// No verdict before this many answers: a few rejections say nothing
    /// about the app, and the prunes they ask for wait until there is one.
    public var minimumAnswers: Int
    /// The share of rejections (0...1) in the window above which the app's
    /// configuration, not its devices, is taken to be wrong.
    public var threshold: Double

    public init(window: Int = 100, minimumAnswers: Int = 20, threshold: Double = 0.5) {
        self.window = max(1, window)
        self.minimumAnswers = min(max(1, minimumAnswers), self.window)
        self.threshold = threshold.isNaN ? 0.5 : min(max(threshold, 0), 1)
    }
}

/// Keeps one app from pruning its whole token base because of a configuration
/// error. APNs answers 400 DeviceTokenNotForTopic when the token belongs to
/// another topic, and BadDeviceToken when it is not valid for the endpoint
/// (a sandbox token sent to production). For one device that means the
/// token is dead; for most of an app's pushes it means the app's bundle id,
/// team or key is wrong (NotForTopic) or its tokens go to the wrong
/// environment (BadDeviceToken), and every token pruned then would be a live
/// device lost. So both count as rejections here; 410 Unregistered and
/// ExpiredToken are about one device each and always prune.
///
/// A pure value over the app's last ``MassPruneGuardPolicy/window`` judged
/// answers (200, 400, 410 and the other final answers; not the retryable ones
/// or the credential rejections, which say nothing about tokens). Prunes of
/// rejections are held until the window holds
/// ``MassPruneGuardPolicy/minimumAnswers``, so a misconfigured app that has
/// just started loses no token before the verdict; a guard that trips drops
/// them.
public struct MassPruneGuard: Hashable, Sendable {
    /// What one judged answer was, as far as the guard cares.
    public enum Answer: Hashable, Sendable {
        /// 200 or any final answer that is not a token rejection (410 included).
        case accepted
        /// 400 DeviceTokenNotForTopic.
        case notForTopic
        /// 400 BadDeviceToken.
        case badDeviceToken
    }

    public enum Verdict: Hashable, Sendable {
        /// Prune these now (held ones and, unless held, the answer's own).
        case prune([PrunedToken])
        /// Rejections are above the threshold: prune nothing, fail instead;
        /// `reason` names the dominant rejection (``DispatchFailure/massDeviceTokenNotForTopic``
        /// or ``DispatchFailure/massBadDeviceToken``). The window starts again empty.
        case tripped(reason: String)
    }

    public let policy: MassPruneGuardPolicy
    private var ring: [Answer] = []
    private var next = 0
    public private(set) var notForTopic = 0
    public private(set) var badDeviceToken = 0
    /// Prunes waiting for the window to fill to the minimum.
    public private(set) var held: [PrunedToken] = []

    public init(policy: MassPruneGuardPolicy = MassPruneGuardPolicy()) {
        self.policy = policy
        ring.reserveCapacity(policy.window)
    }

    /// Answers in the window.
    public var count: Int { ring.count }

    /// Records a judged answer; `prune` is the token a rejection would prune.
    public mutating func record(_ answer: Answer, prune: PrunedToken? = nil) -> Verdict {
        if ring.count < policy.window {
            ring.append(answer)
        } else {
            forget(ring[next])
            ring[next] = answer
            next = (next + 1) % policy.window
        }
        switch answer {
        case .accepted: break
        case .notForTopic: notForTopic += 1
        case .badDeviceToken: badDeviceToken += 1
        }
        if let prune, answer != .accepted { held.append(prune) }
        guard ring.count >= policy.minimumAnswers else { return .prune([]) }
        let rejected = notForTopic + badDeviceToken
        if Double(rejected) > policy.threshold * Double(ring.count) {
            let reason =
                badDeviceToken > notForTopic ? DispatchFailure.massBadDeviceToken : DispatchFailure.massDeviceTokenNotForTopic
            reset()
            return .tripped(reason: reason)
        }
        defer { held.removeAll() }
        return .prune(held)
    }

    /// Starts again with an empty window and nothing held (after a trip, or new credentials).
    public mutating func reset() {
        ring.removeAll(keepingCapacity: true)
        next = 0
        notForTopic = 0
        badDeviceToken = 0
        held.removeAll()
    }

    private mutating func forget(_ answer: Answer) {
        switch answer {
        case .accepted: break
        case .notForTopic: notForTopic -= 1
        case .badDeviceToken: badDeviceToken -= 1
        }
    }
}
