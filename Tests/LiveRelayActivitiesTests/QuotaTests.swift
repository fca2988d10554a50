import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import NIOCore
import Testing

/// The quota rules as a value, on a clock the test moves.
@Suite struct QuotaLedgerTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    @Test func theCallRateIsATokenBucketWithItsBurstAndAHintForTheNextToken() throws {
        var ledger = QuotaLedger(settings: QuotaSettings(defaults: AppQuota(callsPerSecond: 10, burst: 3)))
        for _ in 0..<3 { #expect(ledger.admitCall(appID: "a", pushes: false, now: start) == nil) }
        let decision = ledger.admitCall(appID: "a", pushes: false, now: start)
        let refused = try #require(decision)
        #expect(refused.kind == .callRate)
        #expect(refused.retryAfterMS == 100, "one token every 100 ms at 10/s")
        // Another app has its own bucket.
        #expect(ledger.admitCall(appID: "b", pushes: false, now: start) == nil)
        // 100 ms refill one call, not more.
        #expect(ledger.admitCall(appID: "a", pushes: false, now: start + .milliseconds(100)) == nil)
        #expect(ledger.admitCall(appID: "a", pushes: false, now: start + .milliseconds(100)) != nil)
        // A long quiet spell refills to the burst, never beyond.
        let later = start + .seconds(60)
        for _ in 0..<3 { #expect(ledger.admitCall(appID: "a", pushes: false, now: later) == nil) }
        #expect(ledger.admitCall(appID: "a", pushes: false, now: later) != nil)
    }

    @Test func eachNodeEnforcesItsShareOfTheRates() throws {
        var ledger = QuotaLedger(settings: QuotaSettings(defaults: AppQuota(callsPerSecond: 10, burst: 4), nodes: 2))
        #expect(ledger.admitCall(appID: "a", pushes: false, now: start) == nil)
        #expect(ledger.admitCall(appID: "a", pushes: false, now: start) == nil)
        let decision = ledger.admitCall(appID: "a", pushes: false, now: start)
        let refused = try #require(decision)
        #expect(refused.limit == 5, "half of 10/s")
        #expect(refused.retryAfterMS == 200)
    }

    @Test func pushesPerHourSlideMinuteByMinuteAndAFanOutIsChargedAfterItsCall() throws {
        var ledger = QuotaLedger(settings: QuotaSettings(defaults: AppQuota(pushesPerHour: 1_000)))
        #expect(ledger.admitCall(appID: "a", pushes: true, now: start) == nil)
        ledger.chargePushes(appID: "a", count: 600, now: start)
        let tenMinutes = start + .minutes(10)
        #expect(ledger.admitCall(appID: "a", pushes: true, now: tenMinutes) == nil, "600 < 1,000")
        // The call admitted below the limit takes its whole fan-out, past the limit.
        ledger.chargePushes(appID: "a", count: 700, now: tenMinutes)
        #expect(ledger.usage(of: "a", now: tenMinutes).pushesLastHour == 1_300)
        let decision = ledger.admitCall(appID: "a", pushes: true, now: tenMinutes + .seconds(1))
        let refused = try #require(decision)
        #expect(refused.kind == .pushesPerHour)
        // Calls that push nothing (RegisterToken) are not held by the hour.
        #expect(ledger.admitCall(appID: "a", pushes: false, now: tenMinutes) == nil)
        // The first 600 leave the window an hour after their minute began: the hint says when.
        let minuteStart = Int64(start.uptimeNanoseconds / 60_000_000_000) * 60_000
        let leaves = minuteStart + 3_600_000
        let asked = Int64((tenMinutes + .seconds(1)).uptimeNanoseconds / 1_000_000)
        #expect(refused.retryAfterMS == leaves - asked)
        let afterHour = NIODeadline.uptimeNanoseconds(UInt64(leaves) * 1_000_000)
        #expect(ledger.usage(of: "a", now: afterHour).pushesLastHour == 700)
        #expect(ledger.admitCall(appID: "a", pushes: true, now: afterHour) == nil)
        // Two hours of silence empty the ring.
        #expect(ledger.usage(of: "a", now: afterHour + .hours(2)).pushesLastHour == 0)
    }

    @Test func countsAreTheStoresPlusThisNodesAdditionsSinceTheRead() throws {
        var ledger = QuotaLedger(
            settings: QuotaSettings(defaults: AppQuota(maxTokens: 10), perApp: ["big": AppQuota(maxTokens: 100)]))
        ledger.track(["a", "big"])
        #expect(ledger.readStarting() == ["a", "big"])
        ledger.noteStored(["a": AppUsage(tokens: 9)])
        #expect(ledger.countQuota(.tokens, appID: "a") == nil)
        ledger.noteAdded(.tokens, appID: "a")
        #expect(ledger.countQuota(.tokens, appID: "a") == CountQuota(kind: .tokens, limit: 10, used: 10))
        #expect(ledger.countQuota(.tokens, appID: "big") == nil)
        #expect(ledger.countQuota(.liveActivities, appID: "a") == nil, "no live-activity limit")

        // A read that began before an addition may not have seen it: the addition stays counted.
        _ = ledger.readStarting()
        ledger.noteAdded(.tokens, appID: "a")
        ledger.noteStored(["a": AppUsage(tokens: 10)])
        #expect(ledger.usage(of: "a", now: start).counts.tokens == 11)
        // The next read saw it: the store's word alone.
        _ = ledger.readStarting()
        ledger.noteStored(["a": AppUsage(tokens: 4)])
        #expect(ledger.usage(of: "a", now: start).counts.tokens == 4)
        #expect(ledger.countQuota(.tokens, appID: "a") == nil)
    }

    @Test func noQuotaMeansNoRefusal() {
        var ledger = QuotaLedger(settings: QuotaSettings())
        for _ in 0..<10_000 { #expect(ledger.admitCall(appID: "a", pushes: true, now: start) == nil) }
        ledger.chargePushes(appID: "a", count: 1_000_000_000, now: start)
        #expect(ledger.admitCall(appID: "a", pushes: true, now: start) == nil)
        ledger.track(["a"])
        #expect(ledger.readStarting().isEmpty, "no count quota: nothing to read")
    }
}

/// Quotas behind the real service and an in-memory store: refusals before
/// anything is stored, with a reason and a hint; other apps unaffected.
@Suite struct QuotaServiceTests {
    let uptime = ManualUptime()

    func gate(_ settings: QuotaSettings) -> QuotaGate {
        let uptime = self.uptime
        return QuotaGate(settings: settings, refreshInterval: .seconds(2), uptime: { uptime.read() })
    }

    @Test func aCallOverTheRateIsRefusedWithAHintAndStoresNothing() async throws {
        let quotas = gate(QuotaSettings(perApp: [appID: AppQuota(callsPerSecond: 2, burst: 2)]))
        let h = Harness(quotas: quotas)
        try await h.register(pushToStart(hex(1), device: "d1"))
        try await h.register(pushToStart(hex(2), device: "d2"))
        let error = try #require(await rpcError(h.service.registerToken(pushToStart(hex(3), device: "d3"), context: h.context())))
        #expect(error.status == .resourceExhausted)
        #expect(error.details.reason == "CallRateExceeded")
        #expect(error.details.retryAfterMS == 500)
        #expect(h.store.snapshot.tokenCount == 2, "the refused registration stored nothing")
        // Another app is not held by this one's rate.
        try await h.service.registerToken(pushToStart(hex(4), app: "other.app"), context: h.context(apps: .only(["other.app"]))).get()
        uptime.advance(.milliseconds(500))
        try await h.register(pushToStart(hex(3), device: "d3"))
    }

    @Test func theTokenQuotaRefusesNewTokensOnlyAndRefreshesFromTheStore() async throws {
        let quotas = gate(QuotaSettings(defaults: AppQuota(maxTokens: 2)))
        let h = Harness(quotas: quotas)
        try await h.register(pushToStart(hex(1), device: "d1"))
        try await h.register(pushToStart(hex(2), device: "d2"))
        let error = try #require(await rpcError(h.service.registerToken(pushToStart(hex(3), device: "d3"), context: h.context())))
        #expect(error.status == .resourceExhausted)
        #expect(error.details.reason == "TokenQuotaExceeded")
        #expect(error.details.retryAfterMS == 2_000)
        #expect(error.message.contains("2 registered tokens, its quota is 2"))
        #expect(h.store.snapshot.tokenCount == 2)
        // At the limit, a device re-registering its token, and rotating it in its slot, still work.
        #expect(try await h.register(pushToStart(hex(2), device: "d2")).result == .unchanged)
        #expect(try await h.register(pushToStart(hex(5), device: "d2")).result == .rotated)
        // A removal elsewhere shows at the next read of the store's counts.
        var removal = pushToStart(hex(1), device: "d1")
        removal.remove = true
        try await h.register(removal)
        #expect(await rpcError(h.service.registerToken(pushToStart(hex(3), device: "d3"), context: h.context())) != nil)
        try await quotas.refresh(from: h.store, now: h.clock.now(), on: h.loop)
        #expect(quotas.usage(of: appID).counts.tokens == 1)
        #expect(try await h.register(pushToStart(hex(3), device: "d3")).result == .created)
    }

    @Test func theLiveActivityQuotaRefusesNewStartsButNotReplaysUpdatesOrEnds() async throws {
        let quotas = gate(QuotaSettings(defaults: AppQuota(maxLiveActivities: 1)))
        let h = Harness(quotas: quotas)
        try await h.register(pushToStart(hex(1)))
        try await h.start(startRequest("order-1", key: "k1"))
        let error = try #require(await rpcError(h.service.startActivity(startRequest("order-2"), context: h.context())))
        #expect(error.status == .resourceExhausted)
        #expect(error.details.reason == "LiveActivityQuotaExceeded")
        #expect(h.store.snapshot.activityCount == 1)
        #expect(try await h.start(startRequest("order-1", key: "k1")).replayed == true)
        try await h.update(updateRequest("order-1"))
        try await h.end(endRequest("order-1"))
        try await quotas.refresh(from: h.store, now: h.clock.now(), on: h.loop)
        #expect(quotas.usage(of: appID).counts.liveActivities == 0, "an ended activity is not live")
        try await h.start(startRequest("order-2"))
    }

    @Test func pushesPerHourCountTheFanOutOfAcceptedCalls() async throws {
        let quotas = gate(QuotaSettings(defaults: AppQuota(pushesPerHour: 3)))
        let h = Harness(quotas: quotas)
        for n in 1...3 { try await h.register(pushToStart(hex(n), device: "d\(n)")) }
        try await h.start(startRequest("order-1"))
        #expect(quotas.usage(of: appID).pushesLastHour == 3)
        let error = try #require(await rpcError(h.service.startActivity(startRequest("order-2"), context: h.context())))
        #expect(error.details.reason == "PushQuotaExceeded")
        #expect(error.details.retryAfterMS > 0)
        #expect(h.store.snapshot.activityCount == 1)
        // Registering is not a push.
        try await h.register(pushToStart(hex(9), device: "d9"))
    }
}
