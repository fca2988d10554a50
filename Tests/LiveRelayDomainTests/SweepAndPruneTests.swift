import LiveRelayDomain
import LiveRelayMessages
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

    @Test func aSweepIsBoundedByItsLimit() throws {
        var state = InMemoryState()
        for i in 0..<5 { _ = try state.apply(StartActivity(start("a\(i)"), app: app), now: t0) }
        #expect(try state.apply(Sweep(limit: 2), now: t0 + .hours(8)).expired.count == 2)
        #expect(try state.apply(Sweep(limit: 10), now: t0 + .hours(8)).expired.count == 3)
    }
}

@Suite struct PruneTests {
    @Test(arguments: [
        (410, "Unregistered", true), (410, "ExpiredToken", true), (400, "BadDeviceToken", true),
        (400, "DeviceTokenNotForTopic", true), (400, "BadTopic", false), (400, "BadCollapseId", false),
        (403, "ExpiredProviderToken", false), (403, "InvalidProviderToken", false), (413, "PayloadTooLarge", false),
        (429, "TooManyRequests", false), (500, "InternalServerError", false), (503, "ServiceUnavailable", false),
        (200, "", false),
    ])
    func whichAnswersMeanTheTokenIsDead(status: Int, reason: String, dead: Bool) {
        #expect(TokenPruning.shouldPrune(status: status, reason: reason) == dead)
    }

    @Test func aDeadTokenIsRemovedFromItsIndexes() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1), user: "u")), now: t0)
        let key = TokenKey(appID: app.id, hex: hex(1))
        guard case .pruned = try state.apply(PruneToken(key, status: 400, reason: "BadDeviceToken"), now: t0) else {
            Issue.record("expected pruned"); return
        }
        #expect(state.token(key) == nil)
        #expect(state.pushToStartTokens(appID: app.id, externalUserID: "u", attributesType: "DeliveryAttributes").isEmpty)
        #expect(try state.apply(PruneToken(key, status: 410, reason: "Unregistered"), now: t0) == .notFound)
    }

    @Test func otherAnswersKeepTheToken() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        let key = TokenKey(appID: app.id, hex: hex(1))
        #expect(try state.apply(PruneToken(key, status: 503, reason: "ServiceUnavailable"), now: t0) == .notDead)
        #expect(state.token(key) != nil)
    }

    @Test func aTokenRegisteredAgainAfterAPNsFoundItInvalidIsKept() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        _ = try state.apply(RegisterToken(pushToStart(hex(1), user: "u")), now: t0 + .seconds(100))
        let key = TokenKey(appID: app.id, hex: hex(1))
        let outcome = try state.apply(PruneToken(key, status: 410, reason: "Unregistered", invalidSince: t0 + .seconds(50)), now: t0 + .seconds(200))
        guard case .reregistered = outcome else { Issue.record("got \(outcome)"); return }
        #expect(state.token(key) != nil)
        guard case .pruned = try state.apply(PruneToken(key, status: 410, reason: "Unregistered", invalidSince: t0 + .seconds(150)), now: t0 + .seconds(200))
        else { Issue.record("expected pruned"); return }
    }
}
