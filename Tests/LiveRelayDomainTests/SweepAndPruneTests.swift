import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import Testing

@Suite struct SweepTests {
    @Test func anActivityExpiresEightHoursAfterItsStartAndLosesItsUpdateTokens() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        _ = try state.apply(StartActivity(start(), app: app), now: t0)
        _ = try state.apply(RegisterToken(updateToken(hex(2))), now: t0)

        #expect(try state.apply(Sweep(), now: t0 + .hours(8) - .milliseconds(1)).isEmpty)
        let report = try state.apply(Sweep(), now: t0 + .hours(8))
        #expect(report.expired == [order1])
        #expect(report.deletedTokens == [TokenKey(appID: app.id, hex: hex(2))])
        #expect(state.activity(order1)?.state == .expired)
        #expect(state.updateTokens(of: order1).isEmpty)
        // Push-to-start tokens live until removed or pruned.
        #expect(state.token(TokenKey(appID: app.id, hex: hex(1))) != nil)
    }

    @Test func anEndedActivityIsDismissedThenPurged() throws {
        var state = InMemoryState()
        _ = try state.apply(StartActivity(start(), app: app), now: t0)
        _ = try state.apply(ChangeActivity(endRequest(dismissal: t0.seconds + 600, key: "e1"), app: app), now: t0)
        #expect(try state.apply(Sweep(), now: t0 + .seconds(599)).isEmpty)
        #expect(try state.apply(Sweep(), now: t0 + .seconds(600)).dismissed == [order1])
        #expect(state.activity(order1)?.state == .dismissed)
        #expect(try state.apply(Sweep(), now: t0 + .seconds(600) + .hours(24)).purged == [order1])
        #expect(state.activity(order1) == nil)
        #expect(state.idempotencyRecord(order1, key: "e1") == nil)
    }

    @Test func tokensPastTheirOwnExpiryAreDeleted() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1), expiresAt: t0.seconds + 60)), now: t0)
        _ = try state.apply(RegisterToken(pushToStart(hex(2), device: "d2")), now: t0)
        #expect(try state.apply(Sweep(), now: t0 + .seconds(59)).isEmpty)
        #expect(try state.apply(Sweep(), now: t0 + .seconds(60)).deletedTokens == [TokenKey(appID: app.id, hex: hex(1))])
        #expect(state.tokenCount == 1)
        #expect(state.pushToStartTokens(appID: app.id, attributesType: "DeliveryAttributes").map(\.hex) == [hex(2)])
    }

    /// An activity's update tokens count against a pass's limit: one pass of a
    /// million-token activity would hold the memory store's lock for seconds.
    @Test func anActivitysTokensAreDeletedAPassAtATimeAndItsPurgeWaitsForThem() throws {
        var state = InMemoryState()
        _ = try state.apply(StartActivity(start(), app: app), now: t0)
        for i in 0..<25 { _ = try state.apply(RegisterToken(updateToken(hex(100 + i), device: "d\(i)")), now: t0) }
        #expect(state.updateTokens(of: order1).count == 25)
        func work(_ report: SweepReport) -> Int {
            report.deletedTokens.count + report.expired.count + report.dismissed.count + report.purged.count
        }

        // The expiry takes one of the pass's 10, its tokens the other 9.
        let expiring = try state.apply(Sweep(limit: 10), now: t0 + .hours(8))
        #expect(expiring.expired == [order1])
        #expect(expiring.deletedTokens.count == 9)
        #expect(state.activity(order1)?.state == .expired)
        #expect(state.updateTokens(of: order1).count == 16)
        // Not due again until its purge; then 10 tokens a pass, and the purge with the last.
        let purgeAt = t0 + .hours(8) + ActivityLifetime.retention
        #expect(try state.apply(Sweep(limit: 10), now: purgeAt - .milliseconds(1)).isEmpty)
        let first = try state.apply(Sweep(limit: 10), now: purgeAt)
        #expect(first.deletedTokens.count == 10)
        #expect(first.purged.isEmpty)
        #expect(state.activity(order1) != nil)
        let last = try state.apply(Sweep(limit: 10), now: purgeAt)
        #expect(last.deletedTokens.count == 6)
        #expect(last.purged == [order1])
        for report in [expiring, first, last] { #expect(work(report) <= 10) }
        #expect(state.activity(order1) == nil)
        #expect(state.tokenCount == 0)
        #expect(try state.apply(Sweep(limit: 10), now: purgeAt).isEmpty)
        // Every token went exactly once.
        let deleted = (expiring.deletedTokens + first.deletedTokens + last.deletedTokens).map(\.hex)
        #expect(Set(deleted) == Set((0..<25).map { hex(100 + $0) }))
        #expect(deleted.count == 25)
    }

    @Test func aSweepIsBoundedByItsLimit() throws {
        var state = InMemoryState()
        for i in 0..<5 { _ = try state.apply(StartActivity(start("a\(i)"), app: app), now: t0) }
        #expect(try state.apply(Sweep(limit: 2), now: t0 + .hours(8)).expired.count == 2)
        #expect(try state.apply(Sweep(limit: 10), now: t0 + .hours(8)).expired.count == 3)
    }
}

/// Which answers mean "dead" is `APNsDisposition`'s (LiveRelayAPNsTests); the rule only removes.
@Suite struct PruneTests {
    @Test func aDeadTokenIsRemovedFromItsIndexes() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1), user: "u")), now: t0)
        let key = TokenKey(appID: app.id, hex: hex(1))
        guard case .pruned = try state.apply(PruneToken(key, reason: "Unregistered"), now: t0) else {
            Issue.record("expected pruned"); return
        }
        #expect(state.token(key) == nil)
        #expect(state.pushToStartTokens(appID: app.id, externalUserID: "u", attributesType: "DeliveryAttributes").isEmpty)
        #expect(try state.apply(PruneToken(key, reason: "Unregistered"), now: t0) == .notFound)
    }

    @Test func aTokenRegisteredAgainAfterAPNsFoundItInvalidIsKept() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        _ = try state.apply(RegisterToken(pushToStart(hex(1), user: "u")), now: t0 + .seconds(100))
        let key = TokenKey(appID: app.id, hex: hex(1))
        let outcome = try state.apply(PruneToken(key, reason: "Unregistered", invalidSince: t0 + .seconds(50)), now: t0 + .seconds(200))
        guard case .reregistered = outcome else { Issue.record("got \(outcome)"); return }
        #expect(state.token(key) != nil)
        guard
            case .pruned = try state.apply(
                PruneToken(key, reason: "Unregistered", invalidSince: t0 + .seconds(150)), now: t0 + .seconds(200))
        else { Issue.record("expected pruned"); return }
    }
}
