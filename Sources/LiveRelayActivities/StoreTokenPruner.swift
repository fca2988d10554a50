import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import NIOCore

/// Removes a token APNs declared dead (410, BadDeviceToken,
/// DeviceTokenNotForTopic) straight through the store: the dispatcher's
/// ``TokenPruner`` in a deployment.
///
/// A value of its own because the dispatcher needs a pruner when it is
/// built, and the service needs the dispatcher (its sink) when it is built:
/// both take this instead of each other, so there is no construction cycle.
public struct StoreTokenPruner: TokenPruner {
    private let store: any ActivityStore
    private let clock: any WallClock

    public init(store: any ActivityStore, clock: any WallClock = SystemClock()) {
        self.store = store
        self.clock = clock
    }

    /// Applies the domain's pruning rule: a token registered again after
    /// `invalidSince` (the 410 timestamp) is kept.
    public func prune(
        _ token: TokenKey, reason: String, invalidSince: UnixTime? = nil, on eventLoop: any EventLoop
    ) -> EventLoopFuture<TokenPruning.Outcome> {
        store.apply(PruneToken(token, reason: reason, invalidSince: invalidSince), now: clock.now(), on: eventLoop)
    }

    public func prune(_ token: PrunedToken, on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        prune(TokenKey(appID: token.appID, hex: token.token), reason: token.reason, invalidSince: token.invalidSince, on: eventLoop)
            .map { _ in }
    }
}
