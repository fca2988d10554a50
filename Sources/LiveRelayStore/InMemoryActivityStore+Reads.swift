import LiveRelayDomain
import NIOCore

/// The reads of ``InMemoryActivityStore``: each the lookup of one app's
/// ``InMemoryState``, under its lock, answered at once (``InMemoryActivityStore/read(app:on:_:)``).
extension InMemoryActivityStore {
    public func token(_ key: TokenKey, on eventLoop: any EventLoop) -> EventLoopFuture<Token?> {
        read(app: key.appID, on: eventLoop) { $0.token(key) }
    }

    public func activity(_ key: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<Activity?> {
        read(app: key.appID, on: eventLoop) { $0.activity(key) }
    }

    public func updateTokens(of activity: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]> {
        read(app: activity.appID, on: eventLoop) { $0.updateTokens(of: activity) }
    }

    public func pushToStartTokens(appID: String, attributesType: String, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]> {
        read(app: appID, on: eventLoop) { $0.pushToStartTokens(appID: appID, attributesType: attributesType) }
    }

    public func pushToStartTokens(
        appID: String, externalUserIDs: [String], attributesType: String, on eventLoop: any EventLoop
    ) -> EventLoopFuture<[Token]> {
        read(app: appID, on: eventLoop) {
            $0.pushToStartTokens(appID: appID, externalUserIDs: externalUserIDs, attributesType: attributesType)
        }
    }
}
