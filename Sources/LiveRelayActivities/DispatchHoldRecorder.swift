import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import Logging
import NIOCore

/// Writes an app's dispatch holds (credentials rejected, the mass-prune guard)
/// and resumptions to its event feed, in a transaction of their own: a hold
/// changes no other state in the store.
///
/// As the dispatcher's ``DispatchLedger`` of a server without durable intents
/// (the memory store's default) it is all the ledger there is: no batch is
/// durable, so none is ever reported settled to it.
public struct DispatchHoldRecorder: DispatchLedger {
    private let store: any ActivityStore
    private let clock: any WallClock
    private let logger: Logger
    private let eventLoop: any EventLoop

    public init(store: any ActivityStore, clock: any WallClock, logger: Logger, on eventLoop: any EventLoop) {
        self.store = store
        self.clock = clock
        self.logger = logger
        self.eventLoop = eventLoop
    }

    public func settled(_ batch: SettledBatch) {}

    public func dispatchHold(appID: String, reason: String?) {
        let now = clock.now()
        let event = FeedEvent(appID: appID, kind: reason == nil ? .dispatchResumed : .dispatchHeld, time: now, reason: reason)
        store.apply(RecordEvents([event]), now: now, on: eventLoop).whenFailure { [logger] error in
            logger.warning(
                "could not record the app's dispatch hold in its event feed", metadata: ["app": "\(appID)", "error": "\(error)"])
        }
    }
}
