import LiveRelayAPNs

/// A quota on how many of something an app keeps in the store: registered
/// tokens, or live activities.
///
/// The service decides whether an app is at its limit (from counts it keeps
/// fresh beside the store) and hands the limit to the rule; the rule refuses
/// only a call that would add one. So a device refreshing or rotating its
/// token, an update of a running activity, or a replay still works at the
/// limit, and nothing is stored when a call is refused.
public struct CountQuota: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable {
        case tokens
        case liveActivities

        /// ErrorDetails.reason.
        public var reason: String {
            switch self {
            case .tokens: "TokenQuotaExceeded"
            case .liveActivities: "LiveActivityQuotaExceeded"
            }
        }

        var noun: String {
            switch self {
            case .tokens: "registered tokens"
            case .liveActivities: "live activities"
            }
        }

        var remedy: String {
            switch self {
            case .tokens: "remove tokens or ask the operator for a larger quota (refreshing or rotating a registered token still works)"
            case .liveActivities: "end activities or ask the operator for a larger quota (updates and ends still work)"
            }
        }
    }

    public var kind: Kind
    public var limit: Int
    /// How many the app had when it was found at its limit.
    public var used: Int

    public init(kind: Kind, limit: Int, used: Int) {
        self.kind = kind
        self.limit = limit
        self.used = used
    }
}

/// What an app keeps in the store, as its count quotas see it.
public struct AppUsage: Hashable, Sendable {
    /// Registered tokens of every kind.
    public var tokens: Int
    /// Activities starting or active and not past their 8 hours.
    public var liveActivities: Int

    public init(tokens: Int = 0, liveActivities: Int = 0) {
        self.tokens = tokens
        self.liveActivities = liveActivities
    }
}

extension Activity {
    /// Counts against the app's live-activity quota: started (or known from a
    /// token), not ended, and within its 8 hours at `now`.
    public func isLive(at now: UnixTime) -> Bool {
        (state == .starting || state == .active) && expiresAt > now
    }

    /// The states ``isLive(at:)`` accepts, for stores that count in SQL.
    public static let liveStates: [State] = [.starting, .active]
}
