import LiveRelayDomain
import NIOCore

/// A store whose state is an ``InMemoryState`` per app, each behind its own
/// lock (``AppShards``): the memory store and the journaled store. Their
/// reads are the same lookups; what differs is when a read may be answered
/// (at once for the memory store; once what it saw is synced for the
/// journaled one), which each says in ``read(app:on:_:)``.
public protocol InMemoryStateStore: ActivityStore {
    /// Runs `body` on the app's state under its lock and answers with its value.
    func read<T: Sendable>(app appID: String, on eventLoop: any EventLoop, _ body: (InMemoryState) -> T) -> EventLoopFuture<T>
}

extension InMemoryStateStore {
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
