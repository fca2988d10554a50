import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayStore
import Testing

/// `updateTargets(of:at:)` is the fan-out's narrow read: it must say exactly
/// what `updateTokens(of:)` filtered by expiry and mapped to targets says.
@Suite struct UpdateTargetsTests {
    /// The reference the stores' narrow reads are held to.
    static func reference(_ state: InMemoryState, _ activity: ActivityKey, at now: UnixTime) -> [PushTarget] {
        state.updateTokens(of: activity).filter { !$0.isExpired(at: now) }
            .map { PushTarget(token: $0.hex, environment: $0.environment) }
    }

    @Test func expiredTokensAreLeftOut() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(updateToken(hex(1), device: "a")), now: t0)
        _ = try state.apply(RegisterToken(updateToken(hex(2), device: "b", expiresAt: t0.seconds + 60)), now: t0)
        _ = try state.apply(RegisterToken(updateToken(hex(3), activity: "order-2", device: "a")), now: t0)
        let order1 = ActivityKey(appID: app.id, activityID: "order-1")
        #expect(Set(state.updateTargets(of: order1, at: t0).map(\.token)) == [hex(1), hex(2)])
        #expect(state.updateTargets(of: order1, at: t0 + .seconds(60)).map(\.token) == [hex(1)])
        #expect(state.updateTargets(of: order1, at: t0).allSatisfy { $0.environment == .sandbox })
        #expect(state.updateTargets(of: ActivityKey(appID: app.id, activityID: "none"), at: t0).isEmpty)
    }

    /// Registrations, rotations, removals and ends in a fixed pseudo-random order.
    @Test func equalsTheFilteredTokensAfterManyChanges() throws {
        var state = InMemoryState()
        var seed: UInt64 = 0x5eed
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        let activities = (0..<3).map { ActivityKey(appID: app.id, activityID: "order-\($0)") }
        for step in 0..<2_000 {
            let now = t0 + .seconds(Int64(step))
            let activity = activities[next(3)].activityID
            let token = hex(next(200))
            let request: RegisterTokenRequest
            switch next(10) {
            case 0: request = updateToken(token, activity: activity, remove: true)
            case 1, 2: request = updateToken(token, activity: activity, device: nil)
            case 3: request = updateToken(token, activity: activity, device: "d\(next(20))", expiresAt: now.seconds + Int64(next(100) + 1))
            default: request = updateToken(token, activity: activity, device: "d\(next(20))")
            }
            _ = try? state.apply(RegisterToken(request), now: now)
            if step % 100 == 0 {
                for key in activities {
                    for later in [now, now + .seconds(50), now + .seconds(200)] {
                        #expect(state.updateTargets(of: key, at: later) == Self.reference(state, key, at: later))
                    }
                }
            }
        }
    }
}
