import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import Testing

@Suite struct TokenRegistrationTests {
    @Test func registeringTwiceIsIdempotentAndWritesNothing() throws {
        var state = InMemoryState()
        let first = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        #expect(first.result == .created)

        let again = try RegisterToken(pushToStart(hex(1))).plan(state, now: t0 + .seconds(5))
        #expect(again.outcome.result == .unchanged)
        #expect(again.writes.isEmpty)
        #expect(state.token(TokenKey(appID: app.id, hex: hex(1)))?.createdAt == t0)
    }

    @Test func changedDetailsAreRewrittenInPlace() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        let plan = try state.apply(RegisterToken(pushToStart(hex(1), user: "user-7")), now: t0 + .seconds(1))
        #expect(plan.result == .unchanged)
        guard case .update = plan.decision else { Issue.record("expected .update, got \(plan.decision)"); return }
        let token = try #require(state.token(TokenKey(appID: app.id, hex: hex(1))))
        #expect(token.externalUserID == "user-7")
        #expect(token.createdAt == t0)
        #expect(token.updatedAt == t0 + .seconds(1))
        #expect(
            state.pushToStartTokens(appID: app.id, externalUserID: "user-7", attributesType: "DeliveryAttributes").map(\.hex) == [hex(1)])
    }

    @Test func aNewUpdateTokenForTheSameActivityAndDeviceRotatesTheOld() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(updateToken(hex(1))), now: t0)
        let plan = try state.apply(RegisterToken(updateToken(hex(2))), now: t0)
        #expect(plan.result == .rotated(replacedToken: hex(1)))
        #expect(state.token(TokenKey(appID: app.id, hex: hex(1))) == nil)
        #expect(state.updateTokens(of: ActivityKey(appID: app.id, activityID: "order-1")).map(\.hex) == [hex(2)])
    }

    @Test func updateTokensOfOtherDevicesOrActivitiesDoNotRotate() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(updateToken(hex(1))), now: t0)
        #expect(try state.apply(RegisterToken(updateToken(hex(2), device: "device-2")), now: t0).result == .created)
        #expect(try state.apply(RegisterToken(updateToken(hex(3), activity: "order-2")), now: t0).result == .created)
        #expect(try state.apply(RegisterToken(updateToken(hex(4), device: nil)), now: t0).result == .created)
        #expect(try state.apply(RegisterToken(updateToken(hex(5), device: nil)), now: t0).result == .created)
        #expect(
            Set(state.updateTokens(of: ActivityKey(appID: app.id, activityID: "order-1")).map(\.hex))
                == [hex(1), hex(2), hex(4), hex(5)])
    }

    @Test func aNewPushToStartTokenForTheSameDeviceAndTypeRotatesTheOld() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        let plan = try state.apply(RegisterToken(pushToStart(hex(2))), now: t0)
        #expect(plan.result == .rotated(replacedToken: hex(1)))
        #expect(state.pushToStartTokens(appID: app.id, attributesType: "DeliveryAttributes").map(\.hex) == [hex(2)])

        // Another type on the same device is another slot.
        #expect(try state.apply(RegisterToken(pushToStart(hex(3), type: "RideAttributes")), now: t0).result == .created)
        #expect(state.token(TokenKey(appID: app.id, hex: hex(2))) != nil)
    }

    @Test func removal() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        #expect(try state.apply(RegisterToken(updateToken(hex(1), remove: true)), now: t0).result == .notFound)
        #expect(try state.apply(RegisterToken(pushToStart(hex(1), remove: true)), now: t0).result == .removed)
        #expect(state.token(TokenKey(appID: app.id, hex: hex(1))) == nil)
        #expect(state.pushToStartTokens(appID: app.id, attributesType: "DeliveryAttributes").isEmpty)
        #expect(try state.apply(RegisterToken(pushToStart(hex(1), remove: true)), now: t0).result == .notFound)
        // The slot is free again: a new token is created, not rotated.
        #expect(try state.apply(RegisterToken(pushToStart(hex(2))), now: t0).result == .created)
    }

    /// Token syntax is the message layer's, checked once when a request is
    /// decoded; the rule checks what needs no syntax: a kind and an environment.
    @Test func tokensMustBeLowercaseEvenLengthHexAndTheEnvironmentIsRequired() {
        var state = InMemoryState()
        var upper = pushToStart(hex(1).uppercased())
        #expect(decodingRefusal(upper) == "token")
        upper.token = "abc"
        #expect(decodingRefusal(upper) == "token")
        upper.token = String(repeating: "a", count: 514)
        #expect(decodingRefusal(upper) == "token")
        #expect(refusal(&state, RegisterToken(pushToStart(hex(1), environment: .unspecified)), now: t0)?.field == "environment")
        #expect(state.tokenCount == 0)
    }

    @Test func anExpiryInThePastIsRefused() {
        var state = InMemoryState()
        let error = refusal(&state, RegisterToken(pushToStart(hex(1), expiresAt: t0.seconds)), now: t0)
        #expect(error?.field == "expires_at")
        #expect(error?.code == .invalidArgument)
    }

    @Test func anUpdateTokenActivatesAStartingActivity() throws {
        var state = InMemoryState()
        _ = try state.apply(StartActivity(start(), app: app), now: t0)
        #expect(state.activity(ActivityKey(appID: app.id, activityID: "order-1"))?.state == .starting)
        _ = try state.apply(RegisterToken(updateToken(hex(9))), now: t0 + .seconds(2))
        #expect(state.activity(ActivityKey(appID: app.id, activityID: "order-1"))?.state == .active)
    }

    @Test func anUpdateTokenMakesALocallyStartedActivityKnown() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(updateToken(hex(9), activity: "local-1")), now: t0)
        let activity = try #require(state.activity(ActivityKey(appID: app.id, activityID: "local-1")))
        #expect(activity.state == .active)
        #expect(activity.expiresAt == t0 + .hours(8))
    }

    @Test func anUpdateTokenForAFinishedActivityIsRefused() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(updateToken(hex(1))), now: t0)
        _ = try state.apply(ChangeActivity(endRequest(), app: app), now: t0)
        let error = refusal(&state, RegisterToken(updateToken(hex(2))), now: t0 + .seconds(1))
        #expect(error?.code == .failedPrecondition)
        #expect(state.token(TokenKey(appID: app.id, hex: hex(2))) == nil)
    }
}
