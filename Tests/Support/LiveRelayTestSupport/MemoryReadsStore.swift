import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import NIOCore

/// A store double that changes how mutations are applied and answers every read
/// from a memory store (`reads`).
public protocol MemoryReadsStore: ActivityStore {
    var reads: InMemoryActivityStore { get }
}

extension MemoryReadsStore {
    public func token(_ key: TokenKey, on eventLoop: any EventLoop) -> EventLoopFuture<Token?> { reads.token(key, on: eventLoop) }
    public func activity(_ key: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<Activity?> {
        reads.activity(key, on: eventLoop)
    }
    public func updateTokens(of activity: ActivityKey, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]> {
        reads.updateTokens(of: activity, on: eventLoop)
    }
    public func pushToStartTokens(appID: String, attributesType: String, on eventLoop: any EventLoop) -> EventLoopFuture<[Token]> {
        reads.pushToStartTokens(appID: appID, attributesType: attributesType, on: eventLoop)
    }
    public func pushToStartTokens(
        appID: String, externalUserIDs: [String], attributesType: String, on eventLoop: any EventLoop
    ) -> EventLoopFuture<[Token]> {
        reads.pushToStartTokens(appID: appID, externalUserIDs: externalUserIDs, attributesType: attributesType, on: eventLoop)
    }
    public func usage(of appIDs: [String], now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<[String: AppUsage]> {
        reads.usage(of: appIDs, now: now, on: eventLoop)
    }
    public func events(appID: String, after cursor: UInt64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<EventPage> {
        reads.events(appID: appID, after: cursor, limit: limit, on: eventLoop)
    }
    public func lastEventCursor(appID: String, on eventLoop: any EventLoop) -> EventLoopFuture<UInt64> {
        reads.lastEventCursor(appID: appID, on: eventLoop)
    }
    public func trimEvents(_ retention: EventRetention, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<Int> {
        reads.trimEvents(retention, now: now, on: eventLoop)
    }
    public var eventCommits: EventCommitSignal { reads.eventCommits }
}
