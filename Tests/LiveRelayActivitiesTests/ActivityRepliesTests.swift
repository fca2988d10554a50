import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import Testing

@testable import LiveRelayActivities

/// A replay's summary adds up whatever the resumed intent re-read.
@Suite struct ReplayAccountTests {
    @Test func aResumedUpdateThatReachedFewerTokensCountsTheGoneOnesFailed() {
        let reply = StoredReply(timestamp: 1, state: .active, targeted: 5, account: EnqueueResult(delivered: 2, pruned: 1))
        let summary = ActivityService.replayed(reply)
        #expect(summary.targeted == 5 && summary.delivered == 2 && summary.pruned == 1)
        #expect(summary.failures == [FailureCount(reason: "TokenRemovedBeforeResume", count: 2)])
        #expect(summary.failed == 2 && summary.complete)
        let accounted: UInt32 = summary.delivered + summary.failed + summary.pruned + summary.superseded + summary.expired
        #expect(accounted == summary.targeted)
    }

    @Test func aResumedUpdateThatReachedMoreTokensReportsThemTargeted() {
        let reply = StoredReply(timestamp: 1, state: .active, targeted: 2, account: EnqueueResult(delivered: 3, expired: 1))
        let summary = ActivityService.replayed(reply)
        #expect(summary.targeted == 4 && summary.delivered == 3 && summary.expired == 1 && summary.failed == 0)
    }

    @Test func anAccountThatMatchesIsReportedAsIs() {
        let reply = StoredReply(timestamp: 1, state: .active, targeted: 3, account: EnqueueResult(delivered: 3))
        let summary = ActivityService.replayed(reply)
        #expect(summary.targeted == 3 && summary.delivered == 3 && summary.failures.isEmpty)
    }
}
