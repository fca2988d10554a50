import LiveRelayTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import LiveRelayAPNs

@Suite("Provider token refresh rules")
struct ProviderTokenRefreshTests {
    let t: Int64 = 1_700_000_000

    @Test func firstCallSignsThenReusesUntil50Minutes() {
        var m = ProviderTokenRefresh()
        #expect(m.currentGeneration == 0)
        #expect(m.tokenNeeded(nowSeconds: t) == .signNew(issuedAt: t, generation: 1))
        #expect(m.tokenNeeded(nowSeconds: t) == .useCurrent(generation: 1))
        #expect(m.tokenNeeded(nowSeconds: t + 50 * 60 - 1) == .useCurrent(generation: 1))
        #expect(m.tokenNeeded(nowSeconds: t + 50 * 60) == .signNew(issuedAt: t + 3000, generation: 2))
        #expect(m.tokenNeeded(nowSeconds: t + 50 * 60 + 1) == .useCurrent(generation: 2))
        #expect(m.currentGeneration == 2)
    }

    @Test func expiredReportForcesExactlyOneRefreshHoweverManyStreamsReportIt() {
        var m = ProviderTokenRefresh()
        _ = m.tokenNeeded(nowSeconds: t)
        let now = t + 25 * 60
        #expect(m.expiredReported(generation: 1, nowSeconds: now) == .refreshScheduled)
        for _ in 0..<50 { #expect(m.expiredReported(generation: 1, nowSeconds: now) == .alreadyScheduled) }
        #expect(m.tokenNeeded(nowSeconds: now) == .signNew(issuedAt: now, generation: 2))
        // Streams that were in flight with generation 1 answer late: stale, no second refresh.
        for _ in 0..<50 { #expect(m.expiredReported(generation: 1, nowSeconds: now + 1) == .stale) }
        #expect(m.tokenNeeded(nowSeconds: now + 2) == .useCurrent(generation: 2))
    }

    @Test func neverTwoTokensWithin20MinutesEvenWhenForced() {
        var m = ProviderTokenRefresh()
        _ = m.tokenNeeded(nowSeconds: t)
        // APNs calls a 5-minute-old token expired: clocks disagree; the refresh waits.
        #expect(m.expiredReported(generation: 1, nowSeconds: t + 300) == .deferred(untilSeconds: t + 1200))
        #expect(m.expiredReported(generation: 1, nowSeconds: t + 301) == .alreadyScheduled)
        #expect(m.tokenNeeded(nowSeconds: t + 1199) == .useCurrent(generation: 1))
        #expect(m.tokenNeeded(nowSeconds: t + 1200) == .signNew(issuedAt: t + 1200, generation: 2))
        // And right after a forced refresh, another report waits the full interval again.
        #expect(m.expiredReported(generation: 2, nowSeconds: t + 1201) == .deferred(untilSeconds: t + 2400))
        #expect(m.tokenNeeded(nowSeconds: t + 2399) == .useCurrent(generation: 2))
        #expect(m.tokenNeeded(nowSeconds: t + 2400) == .signNew(issuedAt: t + 2400, generation: 3))
    }

    @Test func reportsOfUnknownGenerationsAreStale() {
        var m = ProviderTokenRefresh()
        #expect(m.expiredReported(generation: 1, nowSeconds: t) == .stale)  // no token yet
        _ = m.tokenNeeded(nowSeconds: t)
        #expect(m.expiredReported(generation: 7, nowSeconds: t + 3000) == .stale)
        #expect(m.tokenNeeded(nowSeconds: t + 1) == .useCurrent(generation: 1))
    }

    @Test func aClockSteppingBackwardsDoesNotRotate() {
        var m = ProviderTokenRefresh()
        _ = m.tokenNeeded(nowSeconds: t)
        #expect(m.tokenNeeded(nowSeconds: t - 10_000) == .useCurrent(generation: 1))
    }

    @Test func customPolicy() {
        var m = ProviderTokenRefresh(policy: .init(refreshAfterSeconds: 100, minimumIntervalSeconds: 10))
        _ = m.tokenNeeded(nowSeconds: t)
        #expect(m.tokenNeeded(nowSeconds: t + 100) == .signNew(issuedAt: t + 100, generation: 2))
        #expect(m.expiredReported(generation: 2, nowSeconds: t + 110) == .refreshScheduled)
    }
}

@Suite("ProviderTokenSource")
struct ProviderTokenSourceTests {
    final class Counter: Sendable {
        let value = NIOLockedValueBox(0)
    }

    @Test func sharesOneSignedTokenAndRefreshesOnTheClock() throws {
        let clock = ManualClock(UnixTime(seconds: testNow))
        let source = ProviderTokenSource(key: testKey, clock: clock)
        let (first, g1) = try source.current()
        let (again, g1b) = try source.current()
        #expect(first == again && g1 == 1 && g1b == 1)
        #expect(
            try verifier().verify(first, nowSeconds: testNow)
                == .success(.init(keyID: testKey.keyID, teamID: testKey.teamID, issuedAt: testNow)))
        clock.advance(by: .seconds(50 * 60))
        let (second, g2) = try source.current()
        #expect(second != first && g2 == 2)
        #expect(
            try verifier().verify(second, nowSeconds: testNow + 3000)
                == .success(.init(keyID: testKey.keyID, teamID: testKey.teamID, issuedAt: testNow + 3000)))
    }

    @Test func concurrentCallersAndReportersCauseOneSigningEach() async throws {
        let clock = ManualClock(UnixTime(seconds: testNow))
        let signings = Counter()
        let source = ProviderTokenSource(keyID: "K", clock: clock) { issuedAt in
            signings.value.withLockedValue { $0 += 1 }
            return "token-\(issuedAt)"
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<64 { group.addTask { _ = try source.current() } }
            try await group.waitForAll()
        }
        #expect(signings.value.withLockedValue { $0 } == 1)
        clock.advance(by: .seconds(30 * 60))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<64 { group.addTask { source.reportExpired(generation: 1) } }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<64 {
                group.addTask {
                    let current = try source.current()
                    #expect(current == ("token-\(testNow + 1800)", 2))
                }
            }
            try await group.waitForAll()
        }
        #expect(signings.value.withLockedValue { $0 } == 2)
    }

    @Test func aFailedSigningIsRetriedByTheNextCaller() throws {
        struct Boom: Error {}
        let fail = NIOLockedValueBox(true)
        let source = ProviderTokenSource(keyID: "K", clock: ManualClock(UnixTime(seconds: testNow))) { issuedAt in
            if fail.withLockedValue({ $0 }) { throw Boom() }
            return "t\(issuedAt)"
        }
        #expect(throws: Boom.self) { try source.current() }
        fail.withLockedValue { $0 = false }
        #expect(try source.current() == ("t\(testNow)", 1))
    }
}

private func == (a: (String, Int), b: (String, Int)) -> Bool { a.0 == b.0 && a.1 == b.1 }
