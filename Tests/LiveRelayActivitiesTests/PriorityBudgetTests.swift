import LiveRelayMessages
import LiveRelayService
import LiveRelayWire
import NIOConcurrencyHelpers
import Testing

@testable import LiveRelayActivities

/// The priority-10 budget on a clock the tests move: minutes count from an
/// uptime of one day, so that the window never reaches below zero.
@Suite struct PriorityBudgetLedgerTests {
    static let start: Duration = .seconds(86_400)

    /// Decides and, when the push goes out, records it at the priority it is sent at.
    static func send(
        _ ledger: inout PriorityBudgetLedger, activity: String? = "game-1", channel: String? = nil, priority: Int = 10,
        budget: Int? = 3, strict: Bool = false, at now: Duration
    ) -> PriorityDecision {
        let decision = ledger.decide(
            app: "scores", activityID: activity, channelID: channel, priority: priority, budget: budget, strict: strict, now: now)
        let sent: Int?
        switch decision {
        case let .send(priority): sent = priority
        case .downgrade: sent = 5
        case .refuse: sent = nil
        }
        if let sent {
            ledger.record(app: "scores", activityID: activity, channelID: channel, priority: sent, budget: budget, now: now)
        }
        return decision
    }

    @Test func underTheBudgetEveryPushStaysAtTen() {
        var ledger = PriorityBudgetLedger()
        for i in 0..<3 {
            #expect(Self.send(&ledger, at: Self.start + .seconds(i)) == .send(priority: 10))
        }
    }

    @Test func overTheBudgetPushesAreDowngraded() {
        var ledger = PriorityBudgetLedger()
        for i in 0..<3 { _ = Self.send(&ledger, at: Self.start + .seconds(i)) }
        #expect(Self.send(&ledger, at: Self.start + .seconds(10)) == .downgrade)
        // Downgraded pushes go at 5 and are not counted: the count is still the budget's.
        #expect(Self.send(&ledger, at: Self.start + .seconds(20)) == .downgrade)
        // Another activity of the same app has its own budget.
        #expect(Self.send(&ledger, activity: "game-2", at: Self.start + .seconds(20)) == .send(priority: 10))
    }

    @Test func strictModeRefusesUntilTheOldestSendLeavesTheWindow() {
        var ledger = PriorityBudgetLedger()
        // Sends at 00:30 (minute 0), 05:10 and 20:00: the first leaves when minute 61 begins.
        for offset in [30, 310, 1200] { _ = Self.send(&ledger, strict: true, at: Self.start + .seconds(Int64(offset))) }
        let now = Self.start + .seconds(1800)
        let untilMinute61: UInt32 = (61 * 60 - 1800) * 1000
        #expect(Self.send(&ledger, strict: true, at: now) == .refuse(retryAfterMS: untilMinute61))
        // A refusal counts nothing either; at the retry time a send fits, and not a millisecond before.
        let retry = Self.start + .seconds(61 * 60)
        #expect(Self.send(&ledger, strict: true, at: retry - .milliseconds(1)) == .refuse(retryAfterMS: 1))
        #expect(Self.send(&ledger, strict: true, at: retry) == .send(priority: 10))
        // Now the send of minute 5 is the oldest: it leaves when minute 66 begins.
        let untilMinute66: UInt32 = (66 * 60 - 61 * 60 - 1) * 1000
        #expect(Self.send(&ledger, strict: true, at: retry + .seconds(1)) == .refuse(retryAfterMS: untilMinute66))
    }

    @Test func everySendCountsForAtLeastAnHour() {
        var ledger = PriorityBudgetLedger()
        // The last second of a minute: still counted an hour later.
        let send = Self.start + .seconds(59)
        _ = Self.send(&ledger, budget: 1, at: send)
        #expect(Self.send(&ledger, budget: 1, at: send + .seconds(3600)) == .downgrade)
        #expect(Self.send(&ledger, budget: 1, at: send + .seconds(3601)) == .send(priority: 10))
    }

    @Test func theWindowSlides() {
        var ledger = PriorityBudgetLedger()
        for minute in 0..<3 { _ = Self.send(&ledger, at: Self.start + .seconds(Int64(minute) * 60)) }
        #expect(Self.send(&ledger, at: Self.start + .seconds(3000)) == .downgrade)
        // Each minute that leaves frees what it held, one at a time.
        #expect(Self.send(&ledger, at: Self.start + .seconds(61 * 60)) == .send(priority: 10))
        #expect(Self.send(&ledger, at: Self.start + .seconds(61 * 60 + 30)) == .downgrade)
        #expect(Self.send(&ledger, at: Self.start + .seconds(62 * 60)) == .send(priority: 10))
        // Two hours later everything has left.
        let later = Self.start + .seconds(3 * 3600)
        for i in 0..<3 { #expect(Self.send(&ledger, at: later + .seconds(Int64(i))) == .send(priority: 10)) }
    }

    @Test func activityAndChannelAreCountedApartAndEitherCanBeOver() {
        var ledger = PriorityBudgetLedger()
        let t = Self.start
        // Two activities broadcast on one channel: the channel reaches 3 first.
        _ = Self.send(&ledger, activity: "a", channel: "ch", at: t)
        _ = Self.send(&ledger, activity: "b", channel: "ch", at: t)
        _ = Self.send(&ledger, activity: "a", channel: "ch", at: t)
        #expect(Self.send(&ledger, activity: "b", channel: "ch", at: t + .seconds(1)) == .downgrade)
        // Activity b alone (no channel) has used 1 of 3.
        #expect(Self.send(&ledger, activity: "b", channel: nil, at: t + .seconds(2)) == .send(priority: 10))
        // A channel send without an activity counts against the channel only.
        #expect(Self.send(&ledger, activity: nil, channel: "ch2", at: t + .seconds(3)) == .send(priority: 10))
        // An activity id and a channel id that are the same string are still two keys.
        for _ in 0..<3 { _ = Self.send(&ledger, activity: "x", channel: nil, at: t + .seconds(4)) }
        #expect(Self.send(&ledger, activity: nil, channel: "x", at: t + .seconds(5)) == .send(priority: 10))
        // Activity a is over (3): the call is over although its channel "ch3" is fresh.
        _ = Self.send(&ledger, activity: "a", channel: nil, at: t + .seconds(6))
        #expect(Self.send(&ledger, activity: "a", channel: "ch3", strict: true, at: t + .seconds(7)) != .send(priority: 10))
    }

    @Test func whenBothAreOverARefusalWaitsForTheLater() {
        var ledger = PriorityBudgetLedger()
        // The channel fills at minute 0, the activity at minute 10 (budget 1 each).
        _ = Self.send(&ledger, activity: "other", channel: "ch", budget: 1, at: Self.start)
        _ = Self.send(&ledger, activity: "a", channel: nil, budget: 1, at: Self.start + .seconds(600))
        let decision = Self.send(&ledger, activity: "a", channel: "ch", budget: 1, strict: true, at: Self.start + .seconds(900))
        let untilMinute71: UInt32 = (71 * 60 - 900) * 1000
        #expect(decision == .refuse(retryAfterMS: untilMinute71))
    }

    @Test func priorityFiveIsNeitherCountedNorDowngraded() {
        var ledger = PriorityBudgetLedger()
        for i in 0..<10 {
            #expect(Self.send(&ledger, priority: 5, budget: 1, strict: true, at: Self.start + .seconds(Int64(i))) == .send(priority: 5))
        }
        #expect(ledger.trackedKeys == 0)
        #expect(Self.send(&ledger, budget: 1, at: Self.start + .seconds(20)) == .send(priority: 10))
        #expect(Self.send(&ledger, priority: 5, budget: 1, at: Self.start + .seconds(21)) == .send(priority: 5))
    }

    @Test func withoutABudgetNothingIsTrackedOrChanged() {
        var ledger = PriorityBudgetLedger()
        for i in 0..<100 {
            #expect(Self.send(&ledger, budget: nil, strict: true, at: Self.start + .seconds(Int64(i))) == .send(priority: 10))
        }
        #expect(ledger.trackedKeys == 0)
    }

    @Test func idleKeysLeaveWithinMinutesOfTheirLastSendLeaving() {
        var ledger = PriorityBudgetLedger()
        for i in 0..<10_000 {
            _ = Self.send(&ledger, activity: "activity-\(i)", channel: i.isMultiple(of: 10) ? "channel-\(i / 10)" : nil, at: Self.start)
        }
        #expect(ledger.trackedKeys == 11_000)
        // Half an hour on, a sweep keeps everything: it is all still in the window.
        #expect(ledger.sweep(now: Self.start + .seconds(1800)) == 0)
        // Calls of one busy activity, a second apart, keep sweeping one table at a time:
        // two minutes after the window, only the busy key is left, with no explicit sweep.
        var now = Self.start + .seconds(3600)
        while now < Self.start + .seconds(3600 + 61 + 120) {
            _ = Self.send(&ledger, activity: "busy", budget: 1_000_000, at: now)
            now += .seconds(1)
        }
        #expect(ledger.trackedKeys == 1)
        #expect(ledger.sweep(now: now + .seconds(3700)) == 1)
        #expect(ledger.trackedKeys == 0)
    }

    @Test func aKeyHoldsAtMostItsMinutesInTheWindow() {
        var ledger = PriorityBudgetLedger()
        // A send every 20 s for three hours: the key never holds more than 61 minutes.
        var now = Self.start
        for _ in 0..<(3 * 180) {
            _ = Self.send(&ledger, budget: 1_000_000, at: now)
            now += .seconds(20)
        }
        let key = PriorityBudgetLedger.key(.activity, app: "scores", id: "game-1")
        #expect(ledger.trackedKeys == 1)
        #expect(ledger.window(of: key).map { $0.older.count + 1 } ?? 0 <= 61)
        #expect(ledger.window(of: key)?.total ?? 0 <= 61 * 3)
    }

    @Test func anAppsOwnBudgetOrUnlimitedOverridesTheDefault() {
        let budgets = PriorityBudgets(defaultPerHour: 100, perApp: ["scores": 20, "news": nil])
        #expect(budgets.budget(of: "scores") == 20)
        #expect(budgets.budget(of: "news") == nil)
        #expect(budgets.budget(of: "other") == 100)
        #expect(PriorityBudgets().budget(of: "scores") == nil)
    }
}

@Suite struct PriorityBudgetGateTests {
    final class Clock: Sendable {
        let now = NIOLockedValueBox<Duration>(.seconds(86_400))
        func advance(_ by: Duration) { now.withLockedValue { $0 += by } }
    }

    @Test func theGateDecidesOnTheAppsBudgetAndRecordsWhatWasSent() {
        let clock = Clock()
        let gate = PriorityBudgetGate(
            budgets: PriorityBudgets(defaultPerHour: 2, perApp: ["free": nil]), uptime: { clock.now.withLockedValue { $0 } })
        for _ in 0..<2 {
            #expect(gate.decide(appID: "scores", activityID: "a", channelID: nil, priority: 10, strict: true) == .send(priority: 10))
            gate.record(appID: "scores", activityID: "a", channelID: nil, priority: 10)
        }
        clock.advance(.seconds(30))
        guard case let .refuse(retryAfterMS) = gate.decide(appID: "scores", activityID: "a", channelID: nil, priority: 10, strict: true)
        else {
            Issue.record("expected a refusal")
            return
        }
        #expect(retryAfterMS == 61 * 60 * 1000 - 30_000)
        #expect(gate.decide(appID: "scores", activityID: "a", channelID: nil, priority: 10, strict: false) == .downgrade)
        // An app with "unlimited" is never tracked.
        for _ in 0..<5 {
            #expect(gate.decide(appID: "free", activityID: "a", channelID: nil, priority: 10, strict: true) == .send(priority: 10))
            gate.record(appID: "free", activityID: "a", channelID: nil, priority: 10)
        }
        #expect(gate.trackedKeys == 1)
        clock.advance(.seconds(3 * 3600))
        #expect(gate.sweep() == 1)
        #expect(gate.trackedKeys == 0)
    }

    @Test func aRefusalIsResourceExhaustedWithItsReasonAndRetryTime() {
        let error = PriorityBudgetGate.rpcError(appID: "scores", retryAfterMS: 1234)
        #expect(error.status == .resourceExhausted)
        #expect(error.details.reason == "PriorityBudgetExhausted")
        #expect(error.details.retryAfterMS == 1234)
    }
}
