import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import NIOCore
import NIOPosix
import Testing

/// Makes a fresh, empty store for one behaviour.
typealias StoreFactory = @Sendable () async throws -> any ActivityStore

/// One behaviour every ``ActivityStore`` must have, runnable against any store.
///
/// The SQLite and PostgreSQL tests run the same list: a parameterised test
/// over ``StoreBehaviourSuite/all`` with their own factory (see
/// InMemoryStoreTests). Each behaviour closes the store it made.
struct StoreBehaviour: Sendable, CustomStringConvertible {
    var description: String
    var run: @Sendable (StoreFactory) async throws -> Void
}

enum StoreBehaviourSuite {
    static let all: [StoreBehaviour] =
        [
            StoreBehaviour(description: "the three hot lookups are indexed", run: hotLookups),
            StoreBehaviour(description: "rotation and removal re-index", run: rotationReindexes),
            StoreBehaviour(description: "a refused mutation writes nothing", run: refusalWritesNothing),
            StoreBehaviour(description: "idempotency records survive between calls", run: replays),
            StoreBehaviour(description: "an activity keeps the records of its newest keyed calls only", run: recordsAreCapped),
            StoreBehaviour(description: "concurrent starts of one activity: exactly one wins", run: concurrentStarts),
            StoreBehaviour(description: "concurrent registrations all land", run: concurrentRegistrations),
            StoreBehaviour(description: "concurrent updates get distinct increasing timestamps", run: concurrentUpdates),
            StoreBehaviour(description: "an end deletes the activity's update tokens", run: endDeletesUpdateTokens),
            StoreBehaviour(description: "a start takes over an activity known only from its update token", run: startAfterPreRegistration),
            StoreBehaviour(description: "the sweep expires activities and their tokens", run: sweep),
            StoreBehaviour(description: "the sweep deletes an activity's tokens a pass at a time", run: sweepInPasses),
            StoreBehaviour(description: "pruning removes a dead token", run: prune),
            StoreBehaviour(description: "10,000 update tokens of one activity load", run: manyTokensOfOneActivity),
            StoreBehaviour(description: "a closed store refuses calls", run: closedStoreRefuses),
            StoreBehaviour(description: "usage counts each app's tokens and live activities", run: usageCounts),
        ] + intentBehaviours + channelIntentBehaviours + targetBehaviours + appBehaviours

    static let group = MultiThreadedEventLoopGroup.singleton

    @discardableResult
    static func apply<M: StoreMutation>(_ store: any ActivityStore, _ m: M, now: UnixTime = t0) async throws -> M.Outcome {
        try await store.apply(m, now: now, on: group.any()).get()
    }

    static func refusal<M: StoreMutation>(_ store: any ActivityStore, _ m: M, now: UnixTime = t0) async -> DomainError? {
        do {
            _ = try await apply(store, m, now: now)
            return nil
        } catch let error as DomainError {
            return error
        } catch {
            Issue.record("expected a DomainError, got \(error)")
            return nil
        }
    }

    static func hotLookups(_ make: StoreFactory) async throws {
        let store = try await make()
        let loop = group.any()
        try await apply(store, RegisterToken(pushToStart(hex(1), device: "a1", user: "user-a")))
        try await apply(store, RegisterToken(pushToStart(hex(2), device: "a2", user: "user-a")))
        try await apply(store, RegisterToken(pushToStart(hex(3), device: "b1", user: "user-b")))
        try await apply(store, RegisterToken(pushToStart(hex(4), device: "b1", type: "RideAttributes", user: "user-b")))
        try await apply(store, RegisterToken(updateToken(hex(5), activity: "order-1", device: "a1")))
        try await apply(store, RegisterToken(updateToken(hex(6), activity: "order-1", device: "b1")))
        try await apply(store, RegisterToken(updateToken(hex(7), activity: "order-2", device: "a1")))

        let update = try await store.updateTokens(of: ActivityKey(appID: appID, activityID: "order-1"), on: loop).get()
        #expect(Set(update.map(\.hex)) == [hex(5), hex(6)])
        let ofType = try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: loop).get()
        #expect(Set(ofType.map(\.hex)) == [hex(1), hex(2), hex(3)])
        let ofUsers = try await store.pushToStartTokens(
            appID: appID, externalUserIDs: ["user-a", "user-b", "user-a", "nobody"],
            attributesType: "DeliveryAttributes", on: loop
        ).get()
        #expect(ofUsers.map(\.hex).sorted() == [hex(1), hex(2), hex(3)])
        let token = try await store.token(TokenKey(appID: appID, hex: hex(4)), on: loop).get()
        #expect(token?.attributesType == "RideAttributes")
        #expect(token?.environment == .production)
        #expect(token?.createdAt == t0)
        // Another app sees none of it.
        #expect(try await store.pushToStartTokens(appID: "other.app", attributesType: "DeliveryAttributes", on: loop).get().isEmpty)
        try await store.close()
    }

    static func rotationReindexes(_ make: StoreFactory) async throws {
        let store = try await make()
        let loop = group.any()
        try await apply(store, RegisterToken(pushToStart(hex(1), device: "a1", user: "user-a")))
        let rotated = try await apply(store, RegisterToken(pushToStart(hex(2), device: "a1", user: "user-a")))
        #expect(rotated.result == .rotated(replacedToken: hex(1)))
        #expect(try await store.token(TokenKey(appID: appID, hex: hex(1)), on: loop).get() == nil)
        #expect(
            try await store.pushToStartTokens(appID: appID, externalUserIDs: ["user-a"], attributesType: "DeliveryAttributes", on: loop)
                .get().map(\.hex) == [hex(2)])

        try await apply(store, RegisterToken(updateToken(hex(3), device: "a1")))
        try await apply(store, RegisterToken(updateToken(hex(4), device: "a1")))
        #expect(try await store.updateTokens(of: order1, on: loop).get().map(\.hex) == [hex(4)])

        #expect(try await apply(store, RegisterToken(updateToken(hex(4), remove: true))).result == .removed)
        #expect(try await store.updateTokens(of: order1, on: loop).get().isEmpty)
        // The freed slot takes a new token without rotating anything.
        #expect(try await apply(store, RegisterToken(updateToken(hex(5), device: "a1"))).result == .created)
        try await store.close()
    }

    static func refusalWritesNothing(_ make: StoreFactory) async throws {
        let store = try await make()
        let big = #"{"p":""# + String(repeating: "x", count: 4050) + #""}"#
        let error = await refusal(store, StartActivity(start(key: "k", content: big), app: app))
        guard case .payloadTooLarge? = error else { Issue.record("got \(String(describing: error))"); return }
        #expect(try await store.activity(order1, on: group.any()).get() == nil)
        // Same key, smaller payload: accepted, so nothing of the refused call was kept.
        #expect(try await apply(store, StartActivity(start(key: "k"), app: app)).accepted != nil)
        try await store.close()
    }

    static func replays(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, RegisterToken(pushToStart(hex(1))))
        let first = try #require(try await apply(store, StartActivity(start(key: "k1"), app: app)).accepted)
        let again = try await apply(store, StartActivity(start(key: "k1"), app: app), now: t0 + .seconds(3))
        #expect(again.replayed == first.reply)
        let updated = try #require(try await apply(store, ChangeActivity(update(key: "u1"), app: app), now: t0 + .seconds(4)).accepted)
        #expect(try await apply(store, ChangeActivity(update(key: "u1"), app: app), now: t0 + .seconds(5)).replayed == updated.reply)
        #expect(await refusal(store, StartActivity(start(key: "k2"), app: app)) == .activityAlreadyExists(order1))
        let stored = try await store.activity(order1, on: group.any()).get()
        #expect(stored?.lastTimestamp == t0.seconds + 4)
        #expect(stored?.state == .starting)
        try await store.close()
    }

    /// ``IdempotencyRecord/keptPerActivity``: the records of the oldest calls are
    /// evicted, so resending their keys makes new calls; the newest still replay.
    static func recordsAreCapped(_ make: StoreFactory) async throws {
        let store = try await make()
        let cap = IdempotencyRecord.keptPerActivity
        try await apply(store, StartActivity(start(), app: app))
        for i in 0..<5 { try await apply(store, ChangeActivity(update(key: "old-\(i)"), app: app)) }
        // Concurrent, so the SQL stores put many records per transaction.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<cap { group.addTask { _ = try await apply(store, ChangeActivity(update(key: "new-\(i)"), app: app)) } }
            try await group.waitForAll()
        }
        for i in [0, 1, cap / 2, cap - 1] {
            #expect(try await apply(store, ChangeActivity(update(key: "new-\(i)"), app: app)).replayed != nil, "new-\(i)")
        }
        let last = try await store.activity(order1, on: group.any()).get()?.lastTimestamp
        let resent = try await apply(store, ChangeActivity(update(key: "old-0"), app: app))
        #expect(resent.replayed == nil)
        #expect(resent.accepted?.reply.timestamp == last.map { $0 + 1 })
        try await store.close()
    }

    static func concurrentStarts(_ make: StoreFactory) async throws {
        let store = try await make()
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<50 {
                group.addTask { (try? await apply(store, StartActivity(start(key: "k\(i)"), app: app))) != nil }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 }.count == 1)
        try await store.close()
    }

    static func concurrentRegistrations(_ make: StoreFactory) async throws {
        let store = try await make()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<2000 {
                group.addTask { _ = try await apply(store, RegisterToken(pushToStart(hex(i), device: "d\(i)"))) }
            }
            try await group.waitForAll()
        }
        let all = try await store.pushToStartTokens(appID: appID, attributesType: "DeliveryAttributes", on: group.any()).get()
        #expect(all.count == 2000)
        try await store.close()
    }

    static func concurrentUpdates(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        let stamps = try await withThrowingTaskGroup(of: Int64.self) { group in
            for _ in 0..<100 {
                group.addTask { try await apply(store, ChangeActivity(update(), app: app)).accepted?.reply.timestamp ?? 0 }
            }
            return try await group.reduce(into: [Int64]()) { $0.append($1) }
        }
        #expect(stamps.sorted() == Array(t0.seconds + 1...t0.seconds + 100))
        #expect(try await store.activity(order1, on: group.any()).get()?.lastTimestamp == t0.seconds + 100)
        try await store.close()
    }

    /// What the count quotas read: every token of the app (both kinds), and its
    /// activities that are starting or active and within their 8 hours.
    static func usageCounts(_ make: StoreFactory) async throws {
        let store = try await make()
        let loop = group.any()
        #expect(try await store.usage(of: [appID], now: t0, on: loop).get()[appID] == AppUsage())
        for n in 1...3 { try await apply(store, RegisterToken(pushToStart(hex(n), device: "d\(n)"))) }
        try await apply(store, StartActivity(start("order-1"), app: app))
        try await apply(store, StartActivity(start("order-2"), app: app))
        try await apply(store, RegisterToken(updateToken(hex(10), activity: "order-1")))
        try await apply(store, ChangeActivity(endRequest("order-2"), app: app), now: t0 + .seconds(1))
        var other = pushToStart(hex(20))
        other.appID = "other.app"
        try await apply(store, RegisterToken(other))
        let now = t0 + .seconds(2)
        let usage = try await store.usage(of: [appID, "other.app", "unknown.app"], now: now, on: loop).get()
        #expect(usage[appID] == AppUsage(tokens: 4, liveActivities: 1), "order-2 ended: not live")
        #expect(usage["other.app"] == AppUsage(tokens: 1, liveActivities: 0))
        #expect(usage["unknown.app"] == AppUsage())
        // Past its 8 hours an activity is not live, swept or not.
        let later = try await store.usage(of: [appID], now: t0 + .hours(9), on: loop).get()
        #expect(later[appID]?.liveActivities == 0)
        try await store.close()
    }

    static func endDeletesUpdateTokens(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1))))
        let end = try #require(try await apply(store, ChangeActivity(endRequest(), app: app), now: t0 + .seconds(1)).accepted)
        #expect(end.batch.targets.map(\.token) == [hex(1)])
        #expect(try await store.updateTokens(of: order1, on: group.any()).get().isEmpty)
        #expect(try await store.activity(order1, on: group.any()).get()?.state == .ended)
        try await store.close()
    }

    /// docs/PROTOCOL.md section 11: an update token may arrive before any
    /// StartActivity for its activity (a locally started activity, or a token
    /// that beat the Start). It makes the activity known, so updates reach it,
    /// and a StartActivity under that id then proceeds instead of ALREADY_EXISTS.
    static func startAfterPreRegistration(_ make: StoreFactory) async throws {
        let store = try await make()
        let loop = group.any()
        #expect(try await apply(store, RegisterToken(updateToken(hex(1)))).result == .created)
        let known = try #require(try await store.activity(order1, on: loop).get())
        #expect(known.state == .active)
        #expect(known.lastTimestamp == 0, "nothing pushed yet")

        try await apply(store, RegisterToken(pushToStart(hex(2))))
        let started = try #require(try await apply(store, StartActivity(start(), app: app), now: t0 + .seconds(5)).accepted)
        #expect(started.batch.targets.map(\.token) == [hex(2)])
        #expect(started.reply.state == .active, "a device already runs it")
        let stored = try #require(try await store.activity(order1, on: loop).get())
        #expect(stored.attributesType == "DeliveryAttributes")
        #expect(stored.lastTimestamp == t0.seconds + 5)
        #expect(stored.createdAt == t0, "its 8 hours run from the first token")
        #expect(try await store.updateTokens(of: order1, on: loop).get().map(\.hex) == [hex(1)], "the token stays")

        let updated = try #require(try await apply(store, ChangeActivity(update(), app: app), now: t0 + .seconds(6)).accepted)
        #expect(updated.batch.targets.map(\.token) == [hex(1)])
        // Once started (or pushed to), the id is taken.
        #expect(await refusal(store, StartActivity(start(key: "again"), app: app), now: t0 + .seconds(7)) == .activityAlreadyExists(order1))

        // A locally started activity that was updated (never started through LiveRelay) is taken as well.
        let local = ActivityKey(appID: appID, activityID: "local-1")
        try await apply(store, RegisterToken(updateToken(hex(3), activity: "local-1", device: "device-2")))
        #expect(
            try await apply(store, ChangeActivity(update("local-1"), app: app), now: t0 + .seconds(8)).accepted?.batch.targets.map(\.token)
                == [hex(3)])
        #expect(await refusal(store, StartActivity(start("local-1"), app: app), now: t0 + .seconds(9)) == .activityAlreadyExists(local))
        try await store.close()
    }

    static func sweep(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        try await apply(store, RegisterToken(updateToken(hex(1))))
        try await apply(store, RegisterToken(pushToStart(hex(2), expiresAt: t0.seconds + 60)))
        let report = try await apply(store, Sweep(), now: t0 + .hours(8))
        #expect(report.expired == [order1])
        #expect(Set(report.deletedTokens) == [TokenKey(appID: appID, hex: hex(1)), TokenKey(appID: appID, hex: hex(2))])
        #expect(try await store.updateTokens(of: order1, on: group.any()).get().isEmpty)
        #expect(try await store.activity(order1, on: group.any()).get()?.state == .expired)
        #expect(try await store.token(TokenKey(appID: appID, hex: hex(2)), on: group.any()).get() == nil)
        try await store.close()
    }

    /// A pass's limit counts the activity's tokens: the expiry takes what is left of it, the
    /// purge waits for the rest, deleted by the passes that follow.
    static func sweepInPasses(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, StartActivity(start(), app: app))
        for i in 0..<7 { try await apply(store, RegisterToken(updateToken(hex(10 + i), device: "d\(i)"))) }
        let expiring = try await apply(store, Sweep(limit: 3), now: t0 + .hours(8))
        #expect(expiring.expired == [order1])
        #expect(expiring.deletedTokens.count == 2)
        #expect(try await store.updateTokens(of: order1, on: group.any()).get().count == 5)
        let purgeAt = t0 + .hours(8) + ActivityLifetime.retention
        let first = try await apply(store, Sweep(limit: 3), now: purgeAt)
        #expect(first.deletedTokens.count == 3)
        #expect(first.purged.isEmpty)
        let last = try await apply(store, Sweep(limit: 3), now: purgeAt)
        #expect(last.deletedTokens.count == 2)
        #expect(last.purged == [order1])
        #expect(try await apply(store, Sweep(limit: 3), now: purgeAt).isEmpty)
        let deleted = expiring.deletedTokens + first.deletedTokens + last.deletedTokens
        #expect(Set(deleted) == Set((0..<7).map { TokenKey(appID: appID, hex: hex(10 + $0)) }))
        #expect(deleted.count == 7)
        #expect(try await store.activity(order1, on: group.any()).get() == nil)
        try await store.close()
    }

    static func prune(_ make: StoreFactory) async throws {
        let store = try await make()
        try await apply(store, RegisterToken(pushToStart(hex(1), user: "u")))
        let key = TokenKey(appID: appID, hex: hex(1))
        // Registered (at t0) after APNs found it invalid: the registration wins.
        guard case .reregistered = try await apply(store, PruneToken(key, reason: "Unregistered", invalidSince: t0 - .seconds(1))) else {
            Issue.record("expected reregistered"); return
        }
        #expect(try await store.token(key, on: group.any()).get() != nil)
        guard case .pruned = try await apply(store, PruneToken(key, reason: "Unregistered", invalidSince: t0)) else {
            Issue.record("expected pruned"); return
        }
        #expect(
            try await store.pushToStartTokens(appID: appID, externalUserIDs: ["u"], attributesType: "DeliveryAttributes", on: group.any())
                .get().isEmpty)
        try await store.close()
    }

    static func manyTokensOfOneActivity(_ make: StoreFactory) async throws {
        let store = try await make()
        for i in 0..<10_000 {
            try await apply(store, RegisterToken(updateToken(hex(i), device: "d\(i)")))
        }
        #expect(try await store.updateTokens(of: order1, on: group.any()).get().count == 10_000)
        let call = try #require(try await apply(store, ChangeActivity(update(), app: app), now: t0 + .seconds(1)).accepted)
        #expect(call.batch.targets.count == 10_000)
        try await store.close()
    }

    static func closedStoreRefuses(_ make: StoreFactory) async throws {
        let store = try await make()
        try await store.close()
        await #expect(throws: (any Error).self) { try await apply(store, RegisterToken(pushToStart(hex(1)))) }
    }
}
