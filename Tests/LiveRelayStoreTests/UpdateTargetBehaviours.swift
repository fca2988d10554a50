import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import Testing

/// The fan-out's narrow read (`StateReader.updateTargets(of:at:)`) as every
/// store answers it through an UpdateActivity: the activity's update tokens,
/// without those past their own expiry, and nothing else.
extension StoreBehaviourSuite {
    static let updateTargetBehaviours: [StoreBehaviour] = [
        StoreBehaviour(description: "an update goes to the activity's live update tokens only", run: updateGoesToLiveTokens)
    ]

    static func updateGoesToLiveTokens(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, RegisterToken(updateToken(hex(1), device: "a")))
        try await apply(
            store,
            RegisterToken(
                RegisterTokenRequest(
                    appID: appID, kind: .update, token: hex(2), environment: .production, activityID: "order-1",
                    deviceID: "b", expiresAt: t0.seconds + 60)))
        try await apply(store, RegisterToken(updateToken(hex(3), activity: "order-2", device: "a")))
        try await apply(store, RegisterToken(pushToStart(hex(4), device: "a")))

        func targets(at now: UnixTime) async throws -> [String: Environment] {
            let outcome = try await apply(store, ChangeActivity(update(), app: app), now: now)
            let batch = try #require(outcome.accepted?.batch)
            var found: [String: Environment] = [:]
            for target in batch.targets { found[target.token] = target.environment == .sandbox ? .sandbox : .production }
            #expect(found.count == batch.targets.count, "a target twice")
            return found
        }
        #expect(try await targets(at: t0 + .seconds(1)) == [hex(1): .sandbox, hex(2): .production])
        #expect(try await targets(at: t0 + .seconds(60)) == [hex(1): .sandbox], "expired at its expires_at")
        try await store.close()
    }
}
