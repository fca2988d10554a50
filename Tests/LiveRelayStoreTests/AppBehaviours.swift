import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayStore
import Testing

/// What every store does with several apps, part of ``StoreBehaviourSuite/all``:
/// apps' data never mix, and the reads across apps (the sweep's, the intent
/// claims') take the earliest first whichever app it is of. The memory store
/// keeps each app's state apart (``AppShards``): these hold it to what a
/// single state, and the SQL stores, answer.
extension StoreBehaviourSuite {
    static let appBehaviours: [StoreBehaviour] = [
        StoreBehaviour(description: "apps' tokens and activities never mix", run: appsAreApart),
        StoreBehaviour(description: "the sweep takes the earliest due first across apps", run: sweepAcrossApps),
        StoreBehaviour(description: "claims take the longest-expired intents first across apps", run: claimsAcrossApps),
        StoreBehaviour(description: "a settle of several apps' intents settles each", run: settleAcrossApps),
    ]

    /// Five apps, listed so that no order a dictionary keeps matches the order their calls are made in.
    static let apps = ["app.e", "app.b", "app.d", "app.a", "app.c"].map { App(id: $0, bundleID: $0) }

    static func inApp(_ request: RegisterTokenRequest, _ app: App) -> RegisterTokenRequest {
        var request = request
        request.appID = app.id
        return request
    }

    static func startIn(_ app: App, _ activity: String = "order-1") -> StartActivityRequest {
        var request = start(activity)
        request.appID = app.id
        return request
    }

    /// The same token and activity ids in two apps: each app reads its own, an end in one leaves the other's.
    static func appsAreApart(_ make: StoreFactory) async throws {
        let store = try await make()
        let (one, two) = (apps[0], apps[1])
        for app in [one, two] {
            try await apply(store, RegisterToken(inApp(pushToStart(hex(1)), app)))
            try await apply(store, RegisterToken(inApp(updateToken(hex(2)), app)))
            #expect(try await apply(store, StartActivity(startIn(app), app: app)).accepted != nil)
        }
        try await apply(store, RegisterToken(inApp(updateToken(hex(3), device: "device-2"), two)))
        let loop = group.any()
        for (app, count) in [(one, 1), (two, 2)] {
            let key = ActivityKey(appID: app.id, activityID: "order-1")
            #expect(try await store.updateTokens(of: key, on: loop).get().map(\.appID) == Array(repeating: app.id, count: count))
            #expect(try await store.token(TokenKey(appID: app.id, hex: hex(1)), on: loop).get()?.appID == app.id)
        }
        var end = endRequest()
        end.appID = one.id
        #expect(try await apply(store, ChangeActivity(end, app: one), now: t0 + .seconds(1)).accepted != nil)
        #expect(try await store.updateTokens(of: ActivityKey(appID: one.id, activityID: "order-1"), on: loop).get().isEmpty)
        #expect(try await store.updateTokens(of: ActivityKey(appID: two.id, activityID: "order-1"), on: loop).get().count == 2)
        #expect(try await store.activity(ActivityKey(appID: two.id, activityID: "order-1"), on: loop).get()?.state == .active)
        try await store.close()
    }

    /// An activity per app, started a second apart in the apps' listed order:
    /// passes of one thing each expire them in that order.
    static func sweepAcrossApps(_ make: StoreFactory) async throws {
        let store = try await make()
        for (i, app) in apps.enumerated() {
            #expect(try await apply(store, StartActivity(startIn(app), app: app), now: t0 + .seconds(Int64(i))).accepted != nil)
        }
        var expired: [String] = []
        for _ in apps {
            expired += try await apply(store, Sweep(limit: 1), now: t0 + .seconds(9 * 3600)).expired.map(\.appID)
        }
        #expect(expired == apps.map(\.id))
        #expect(try await apply(store, Sweep(limit: 1), now: t0 + .seconds(9 * 3600)).expired.isEmpty)
        try await store.close()
    }

    /// A start with an intent per app, a second apart: a renewal keeps every
    /// app's from another node; once they ran out, its claims of one intent
    /// each take them in that order (the leases ran out together; the oldest
    /// intent first).
    static func claimsAcrossApps(_ make: StoreFactory) async throws {
        let store = try await make()
        var held: [IntentKey] = []
        for (i, app) in apps.enumerated() {
            try await apply(store, RegisterToken(inApp(pushToStart(hex(i)), app)))
            let started = try await apply(store, StartActivity(startIn(app), app: app, intents: nodeA), now: t0 + .seconds(Int64(i)))
            #expect(started.accepted?.batch.durable == true)
            if let batch = started.accepted?.batch { held.append(IntentKey(batch)) }
        }
        // Node A renews every app's leases (to t0 + 70 s): node B finds nothing until they run out.
        try await apply(store, RenewIntents(lease: nodeA, keys: held), now: t0 + .seconds(40))
        #expect(try await apply(store, ClaimIntents(lease: nodeB), now: t0 + .seconds(60)).isEmpty)
        var claimed: [String] = []
        for _ in apps {
            claimed += try await apply(store, ClaimIntents(lease: nodeB, limit: 1), now: t0 + .seconds(80)).batches.map(\.appID)
        }
        #expect(claimed == apps.map(\.id))
        #expect(try await apply(store, ClaimIntents(lease: nodeB, limit: 1), now: t0 + .seconds(80)).isEmpty)
        try await store.close()
    }

    /// One settle of three apps' intents (as the dispatcher batches them)
    /// deletes each, and leaves a fourth app's alone.
    static func settleAcrossApps(_ make: StoreFactory) async throws {
        let store = try await make()
        var keys: [IntentKey] = []
        for (i, app) in apps.prefix(4).enumerated() {
            try await apply(store, RegisterToken(inApp(pushToStart(hex(i)), app)))
            let started = try #require(try await apply(store, StartActivity(startIn(app), app: app, intents: nodeA)).accepted)
            keys.append(IntentKey(started.batch))
        }
        let account = EnqueueResult(queued: 0, delivered: 1)
        try await apply(store, SettleIntents(keys.prefix(3).map { SettledIntent(key: $0, account: account) }))
        let left = try await apply(store, ClaimIntents(lease: nodeB, evenIfLeased: true), now: t0 + .seconds(1))
        #expect(left.batches.map { IntentKey($0) } == [keys[3]])
        try await store.close()
    }
}
