import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import Testing

@Suite struct TargetResolutionTests {
    /// hex(1): user-a's phone; hex(2): user-a's iPad; hex(3): user-b, another type; hex(4): no user, sandbox; hex(5): update token.
    func populated() throws -> InMemoryState {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1), device: "a-phone", user: "user-a")), now: t0)
        _ = try state.apply(RegisterToken(pushToStart(hex(2), device: "a-pad", user: "user-a")), now: t0)
        _ = try state.apply(RegisterToken(pushToStart(hex(3), device: "b-phone", type: "RideAttributes", user: "user-b")), now: t0)
        _ = try state.apply(RegisterToken(pushToStart(hex(4), device: "kiosk", environment: .sandbox)), now: t0)
        _ = try state.apply(RegisterToken(updateToken(hex(5), activity: "other")), now: t0)
        return state
    }

    func resolve(_ targets: Targets, _ state: InMemoryState, now: UnixTime = t0) -> TargetResolution.Result {
        TargetResolution.resolve(targets, appID: app.id, attributesType: "DeliveryAttributes", state: state, now: now)
    }

    @Test func explicitTokensResolveOnlyToRegisteredPushToStartTokensOfTheType() throws {
        let state = try populated()
        let result = resolve(Targets(pushToStartTokens: [hex(1), hex(9), hex(3), hex(5)]), state)
        #expect(result.targets.map(\.token) == [hex(1)])
        #expect(
            result.unresolved == [
                UnresolvedStartTarget(kind: .pushToStartToken, value: hex(9), reason: "no push-to-start token registered"),
                UnresolvedStartTarget(
                    kind: .pushToStartToken, value: hex(3),
                    reason: "registered for attributes type RideAttributes, not DeliveryAttributes"),
                UnresolvedStartTarget(
                    kind: .pushToStartToken, value: hex(5),
                    reason: "registered as an update token, not a push-to-start token"),
            ])
    }

    @Test func externalUserIDsResolveToEveryDeviceOfTheUser() throws {
        let state = try populated()
        let result = resolve(Targets(externalUserIDs: ["user-a", "user-b", "nobody"]), state)
        #expect(Set(result.targets.map(\.token)) == [hex(1), hex(2)])
        #expect(result.unresolved.map(\.value) == ["user-b", "nobody"])
        #expect(result.unresolved.allSatisfy { $0.kind == .externalUserID })
    }

    @Test func allDevicesResolvesToEveryTokenOfTheType() throws {
        let state = try populated()
        #expect(Set(resolve(Targets(allDevices: true), state).targets.map(\.token)) == [hex(1), hex(2), hex(4)])
    }

    /// The store's narrow read keeps each token's environment and leaves out the ones past their expiry.
    @Test func allDevicesKeepsEnvironmentsAndLeavesOutExpiredTokens() throws {
        var state = try populated()
        _ = try state.apply(RegisterToken(pushToStart(hex(6), device: "old", expiresAt: t0.seconds + 60)), now: t0)
        let targets = resolve(Targets(allDevices: true), state, now: t0 + .seconds(60)).targets
        #expect(Set(targets.map(\.token)) == [hex(1), hex(2), hex(4)])
        #expect(targets.first { $0.token == hex(4) }?.environment == .sandbox)
        #expect(targets.filter { $0.token != hex(4) }.allSatisfy { $0.environment == .production })
        #expect(resolve(Targets(allDevices: true), state, now: t0 + .seconds(59)).targets.count == 4)
    }

    @Test func duplicatesAcrossAndWithinTargetsAreSentOnce() throws {
        let state = try populated()
        let result = resolve(
            Targets(
                pushToStartTokens: [hex(1), hex(1)], externalUserIDs: ["user-a", "user-a"],
                allDevices: true), state)
        #expect(result.targets.map(\.token).count == 3)
        #expect(Set(result.targets.map(\.token)) == [hex(1), hex(2), hex(4)])
        #expect(result.targets.first?.token == hex(1))
        #expect(result.unresolved.isEmpty)
    }

    @Test func expiredTokensAreReportedNotSent() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1), user: "u", expiresAt: t0.seconds + 60)), now: t0)
        let later = t0 + .seconds(60)
        let result = resolve(Targets(pushToStartTokens: [hex(1)], externalUserIDs: ["u"], allDevices: true), state, now: later)
        #expect(result.targets.isEmpty)
        #expect(result.unresolved.map(\.kind) == [.pushToStartToken, .externalUserID, .allDevices])
        #expect(result.unresolved.first?.reason == "token expired")
    }

    @Test func aThousandUsersResolve() throws {
        var state = InMemoryState()
        for i in 0..<1000 {
            _ = try state.apply(RegisterToken(pushToStart(hex(i), device: "d\(i)", user: "user-\(i)")), now: t0)
        }
        let result = resolve(Targets(externalUserIDs: (0..<1000).map { "user-\($0)" }), state)
        #expect(result.targets.count == 1000)
        #expect(result.unresolved.isEmpty)
    }
}
