import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import Testing

/// A push-to-start token registered without `expires_at` lives for the
/// configured retention after its last registration, then the sweep deletes it.
@Suite struct PushToStartRetentionTests {
    let retention = UnixTime.Duration.hours(30 * 24)
    let key = TokenKey(appID: app.id, hex: hex(1))

    func register(_ request: RegisterTokenRequest) -> RegisterToken {
        RegisterToken(request, pushToStartRetention: retention)
    }

    @Test func aTokenWithoutItsOwnExpiryGetsTheRetention() throws {
        var state = InMemoryState()
        _ = try state.apply(register(pushToStart(hex(1))), now: t0)
        #expect(state.token(key)?.expiresAt == t0 + retention)
        // Its own expiry wins; update tokens live with their activity.
        let own = t0.seconds + 3600
        _ = try state.apply(register(pushToStart(hex(2), device: "device-2", expiresAt: own)), now: t0)
        #expect(state.token(TokenKey(appID: app.id, hex: hex(2)))?.expiresAt == UnixTime(seconds: own))
        _ = try state.apply(register(updateToken(hex(3))), now: t0)
        #expect(state.token(TokenKey(appID: app.id, hex: hex(3)))?.expiresAt == nil)
    }

    @Test func reRegistrationRefreshesItOnceHalfHasPassed() throws {
        var state = InMemoryState()
        _ = try state.apply(register(pushToStart(hex(1))), now: t0)
        // A launch a day later: nothing to write.
        let early = try register(pushToStart(hex(1))).plan(state, now: t0 + .hours(24))
        #expect(early.outcome.result == .unchanged)
        #expect(early.writes.isEmpty)
        // Past half the retention: the expiry moves, still UNCHANGED to the caller.
        let late = t0 + .hours(16 * 24)
        let refreshed = try state.apply(register(pushToStart(hex(1))), now: late)
        #expect(refreshed.result == .unchanged)
        #expect(state.token(key)?.expiresAt == late + retention)
        #expect(state.token(key)?.createdAt == t0)
    }

    @Test func theSweepDeletesATokenNotReportedForTheRetention() throws {
        var state = InMemoryState()
        _ = try state.apply(register(pushToStart(hex(1))), now: t0)
        #expect(try state.apply(Sweep(), now: t0 + retention - .milliseconds(1)).deletedTokens.isEmpty)
        #expect(try state.apply(Sweep(), now: t0 + retention).deletedTokens == [key])
        #expect(state.pushToStartTokens(appID: app.id, attributesType: "DeliveryAttributes").isEmpty)
    }

    @Test func withoutARetentionTheTokenStays() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        #expect(state.token(key)?.expiresAt == nil)
    }
}
