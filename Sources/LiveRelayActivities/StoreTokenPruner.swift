import LiveRelayDomain
import LiveRelayStore
import NIOCore

/// Removes a token APNs declared dead (410, BadDeviceToken,
/// DeviceTokenNotForTopic) straight through the store.
///
/// A value of its own rather than only ``ActivityService/prune(_:status:reason:invalidSince:on:)``
/// because the dispatcher needs a pruner when it is built, and the service
/// needs the dispatcher (its sink) when it is built: both take this instead
/// of each other, so there is no construction cycle.
public struct StoreTokenPruner: Sendable {
    private let store: any ActivityStore
    private let clock: any DomainClock

    public init(store: any ActivityStore, clock: any DomainClock = SystemClock()) {
        self.store = store
        self.clock = clock
    }

    /// Applies the domain's pruning rule: a token registered again after
    /// `invalidSince` (the 410 timestamp) is kept.
    public func prune(
        _ token: TokenKey, status: Int, reason: String, invalidSince: UnixTime? = nil, on eventLoop: any EventLoop
    ) -> EventLoopFuture<TokenPruning.Outcome> {
        store.apply(PruneToken(token, status: status, reason: reason, invalidSince: invalidSince),
                    now: clock.now(), on: eventLoop)
    }
}
