import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import Testing

/// The fan-out's narrow reads as every store answers them: through an
/// UpdateActivity (`StateReader.updateTargets(of:at:)`), the activity's update
/// tokens; through a StartActivity to `all_devices`
/// (`pushToStartTargets(appID:attributesType:at:)`), the type's push-to-start
/// tokens; in both, without those past their own expiry, and nothing else.
extension StoreBehaviourSuite {
    static let targetBehaviours: [StoreBehaviour] = [
        StoreBehaviour(description: "an update goes to the activity's live update tokens only", run: updateGoesToLiveTokens),
        StoreBehaviour(description: "updates of several activities at once each reach their own tokens", run: updatesAtOnce),
        StoreBehaviour(
            description: "an end goes to the live update tokens and deletes every one, expired ones too",
            run: endGoesToLiveTokensAndDeletesAll),
        StoreBehaviour(
            description: "a start to all devices goes to the type's live push-to-start tokens only",
            run: startGoesToLiveTokensOfItsType),
    ]

    /// order-1's update tokens 1 (sandbox, no expiry) and 2 (production, expiring at t0 + 60 s),
    /// order-2's update token 3 and push-to-start token 4.
    static func registerMixedTokens(_ store: any ActivityStore) async throws {
        try await apply(store, RegisterToken(updateToken(hex(1), device: "a")))
        try await apply(
            store,
            RegisterToken(
                RegisterTokenRequest(
                    appID: appID, kind: .update, token: hex(2), environment: .production, activityID: "order-1",
                    deviceID: "b", expiresAt: t0.seconds + 60)))
        try await apply(store, RegisterToken(updateToken(hex(3), activity: "order-2", device: "a")))
        try await apply(store, RegisterToken(pushToStart(hex(4), device: "a")))
    }

    /// An end deletes every update token of the activity with one write (`deleteUpdateTokens`,
    /// expired ones too) apart from where it sends (`updateTargets(of:at:)`, the live ones).
    static func endGoesToLiveTokensAndDeletesAll(_ make: StoreFactory) async throws {
        let store = try await make()
        try await registerMixedTokens(store)

        let end = try #require(try await apply(store, ChangeActivity(endRequest(), app: app), now: t0 + .seconds(60)).accepted)
        #expect(end.batch.targets.map(\.token) == [hex(1)], "the expired token is not sent to")
        #expect(end.reply.targeted == 1)
        let loop = group.any()
        #expect(try await store.updateTokens(of: order1, on: loop).get().isEmpty, "the expired one is deleted too")
        let other = ActivityKey(appID: appID, activityID: "order-2")
        #expect(try await store.updateTokens(of: other, on: loop).get().map(\.hex) == [hex(3)])
        #expect(try await store.token(TokenKey(appID: appID, hex: hex(4)), on: loop).get() != nil)
        try await store.close()
    }

    /// Push-to-start tokens 1 (sandbox) and 2 (production, expiring at t0 + 60 s) of the start's
    /// type, 3 of another type, and update token 4: starts made one at a time and two at once
    /// (one PostgreSQL batch, one read for both) each reach 1 and 2 while 2 lives.
    static func startGoesToLiveTokensOfItsType(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, RegisterToken(pushToStart(hex(1), device: "a", environment: .sandbox)))
        try await apply(store, RegisterToken(pushToStart(hex(2), device: "b", expiresAt: t0.seconds + 60)))
        try await apply(store, RegisterToken(pushToStart(hex(3), device: "a", type: "RideAttributes")))
        try await apply(store, RegisterToken(updateToken(hex(4), device: "a")))

        func targets(_ outcome: ActivityCallOutcome) throws -> [String: Environment] {
            let batch = try #require(outcome.accepted?.batch)
            var found: [String: Environment] = [:]
            for target in batch.targets { found[target.token] = target.environment == .sandbox ? .sandbox : .production }
            #expect(found.count == batch.targets.count, "a target twice")
            return found
        }
        let first = try await apply(store, StartActivity(start("order-1"), app: app), now: t0 + .seconds(1))
        #expect(try targets(first) == [hex(1): .sandbox, hex(2): .production])
        let loop = group.any()
        let both = ["order-2", "order-3"].map { store.apply(StartActivity(start($0), app: app), now: t0 + .seconds(2), on: loop) }
        for call in both { #expect(try targets(try await call.get()) == [hex(1): .sandbox, hex(2): .production]) }
        let late = try await apply(store, StartActivity(start("order-4"), app: app), now: t0 + .seconds(60))
        #expect(try targets(late) == [hex(1): .sandbox], "expired at its expires_at")
        try await store.close()
    }

    static func updateGoesToLiveTokens(_ make: StoreFactory) async throws {
        let store = try await make()
        try await registerMixedTokens(store)

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

    /// Several fan-outs read together (one PostgreSQL batch answers them with one statement,
    /// a row per activity): each gets its own tokens, and one without tokens gets none.
    static func updatesAtOnce(_ make: StoreFactory) async throws {
        let store = try await make()
        let activities = (0..<6).map { "order-\($0)" }
        for (a, activity) in activities.enumerated() where a > 0 {
            for t in 0..<(a * 3) {
                try await apply(store, RegisterToken(updateToken(hex(a * 100 + t), activity: activity, device: "d\(a)-\(t)")))
            }
        }
        try await apply(store, StartActivity(start("order-0"), app: app))
        let loop = group.any()
        let calls = activities.map { store.apply(ChangeActivity(update($0), app: app), now: t0 + .seconds(1), on: loop) }
        for (a, call) in calls.enumerated() {
            let batch = try #require(try await call.get().accepted?.batch, "\(activities[a])")
            #expect(Set(batch.targets.map(\.token)) == Set((0..<(a * 3)).map { hex(a * 100 + $0) }), "\(activities[a])")
            #expect(batch.targets.count == a * 3)
        }
        try await store.close()
    }
}
