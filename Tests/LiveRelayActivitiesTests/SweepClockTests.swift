import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayTestSupport
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import LiveRelayActivities

@Suite struct SweepClockTests {
    let t0 = UnixTime(seconds: 1_700_000_000)

    @Test func theWallClockIsTakenWhileItKeepsPaceWithTheMonotonicOne() {
        var clock = SweepClock()
        #expect(clock.sweepTime(wall: t0, monotonicMilliseconds: 5_000) == (t0, nil))
        let later = t0 + .seconds(60) + SweepClock.tolerance
        #expect(clock.sweepTime(wall: later, monotonicMilliseconds: 65_000) == (later, nil), "a step within the tolerance passes")
        let back = later - .hours(1)
        #expect(clock.sweepTime(wall: back, monotonicMilliseconds: 125_000) == (back, nil), "a backward step is taken")
    }

    @Test func aForwardJumpIsHeldBackAndTheSweepTimeFollowsTheMonotonicClock() {
        var clock = SweepClock()
        _ = clock.sweepTime(wall: t0, monotonicMilliseconds: 0)
        let jumped = t0 + .hours(9)
        let first = clock.sweepTime(wall: jumped, monotonicMilliseconds: 60_000)
        #expect(first.now == t0 + .seconds(60))
        #expect(first.heldBack == .milliseconds(9 * 3_600_000 - 60_000))
        let second = clock.sweepTime(wall: jumped + .seconds(60), monotonicMilliseconds: 120_000)
        #expect(second.now == t0 + .seconds(120), "still held back, a minute later")
        #expect(second.heldBack == .milliseconds(9 * 3_600_000 - 60_000))
    }
}

@Suite struct SweeperClockJumpTests {
    /// A monotonic clock the test moves.
    final class Monotonic: Sendable {
        private let nanoseconds = NIOLockedValueBox<UInt64>(1_000_000_000)
        func advance(by amount: TimeAmount) { nanoseconds.withLockedValue { $0 += UInt64(amount.nanoseconds) } }
        var now: NIODeadline { NIODeadline.uptimeNanoseconds(nanoseconds.withLockedValue { $0 }) }
    }

    @Test func aForwardJumpOfTheWallClockDoesNotExpireLiveActivities() async throws {
        let h = Harness()
        try await h.register(pushToStart(hex(1)))
        _ = try await h.start(startRequest())
        let monotonic = Monotonic()
        let sweeper = ActivitySweeper(service: h.service, on: h.loop, monotonic: { monotonic.now })
        #expect(try await sweeper.sweepUntilClear() == 0)

        // The wall clock steps 9 hours ahead while a minute passes.
        h.clock.advance(by: .hours(9))
        monotonic.advance(by: .minutes(1))
        #expect(try await sweeper.sweepUntilClear() == 0, "nothing swept at the jumped time")
        #expect(h.store.snapshot.activity(ActivityKey(appID: appID, activityID: "order-1"))?.state == .starting)

        // Had 8 hours really passed, the activity expires as before.
        monotonic.advance(by: .hours(8))
        h.clock.advance(by: .hours(8))
        #expect(try await sweeper.sweepUntilClear() >= 1)
        #expect(h.store.snapshot.activity(ActivityKey(appID: appID, activityID: "order-1"))?.state == .expired)
    }
}
