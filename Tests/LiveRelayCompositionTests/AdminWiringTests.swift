import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayPushOutlet
import LiveRelayStore
import LiveRelayTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import LiveRelayComposition

/// GetAppStats' pushes by outcome and reason, as admin.proto promises them, from the dispatcher's account.
struct AdminWiringTests {
    struct KeepingPruner: TokenPruner {
        func prune(_ token: PrunedToken, on eventLoop: any EventLoop) -> EventLoopFuture<Void> { eventLoop.makeSucceededVoidFuture() }
    }

    static func batch(app: String, tokens: [String]) -> PushBatch {
        PushBatch(
            appID: app, activityID: "match-1", event: .update, timestamp: 1_700_000_000,
            payload: APNsPayload(bytes: Array(#"{"aps":{"timestamp":1700000000,"event":"update"}}"#.utf8)),
            headers: APNsHeaders(bundleID: "com.example." + app, expiration: 0),
            targets: tokens.map { PushTarget(token: $0, environment: .production) })
    }

    static func app(_ id: String, queueCapacity: Int? = nil) -> RegisteredApp {
        RegisteredApp(id: id, bundleID: "com.example." + id, queueCapacity: queueCapacity)
    }

    static func rows(_ figures: AppUsageFigures) -> Set<String> {
        Set(figures.pushes.filter { $0.count > 0 }.map { "\($0.outcome) \($0.reason ?? "-") \($0.count)" })
    }

    @Test func prunedPushesCarryTheirReasonAndPushesOfAnAppWithoutARouteAreCounted() async throws {
        let harness = DispatcherHarness()
        // The last hex digit of a token says how APNs answers it.
        let apns = FakeTransport(eventLoop: harness.loop) { request, _ in
            switch request.deviceToken.last {
            case "1": .success(APNsResponse(status: 410, reason: "Unregistered"))
            case "2": .success(APNsResponse(status: 410, reason: "ExpiredToken"))
            case "3": .success(APNsResponse(status: 400, reason: "BadDeviceToken"))
            case "4": .success(APNsResponse(status: 400, reason: "BadPriority"))
            default: .success(APNsResponse(status: 200))
            }
        }
        let d = harness.dispatcher([("orders", 100, apns)], pruner: KeepingPruner())
        let tokens = ["1", "1", "2", "3", "4", "0"].enumerated().map { String(repeating: "a", count: 62) + "\($0.offset)\($0.element)" }
        let result = d.enqueue(Self.batch(app: "orders", tokens: tokens), options: EnqueueOptions(waitForDelivery: true), on: harness.loop)
        await harness.drive(until: { d.counters(appID: "orders")?.unfinished == 0 })
        // BadDeviceToken's prune waits for the mass-prune guard's verdict: that push counts failed.
        #expect(try await result.get().pruned == 3)
        // An app the dispatcher has no route for (no APNs credentials yet): its pushes fail AppNotConfigured.
        let unrouted = try await d.enqueue(Self.batch(app: "rides", tokens: Array(tokens.prefix(3))), on: harness.loop).get()
        #expect(unrouted.failures == [DispatchFailure.appNotConfigured: 3])

        let quotas = QuotaGate()
        #expect(
            Self.rows(AdminWiring.usage(of: Self.app("orders"), dispatcher: d, quotas: quotas)) == [
                "delivered - 1", "pruned Unregistered 2", "pruned ExpiredToken 1", "failed BadDeviceToken 1", "failed BadPriority 1",
            ])
        #expect(Self.rows(AdminWiring.usage(of: Self.app("rides"), dispatcher: d, quotas: quotas)) == ["failed AppNotConfigured 3"])
        try await harness.tearDown(d, [apns])
    }

    /// An app whose credentials APNs rejects is held, and GetAppStats says so (reason, for how long)
    /// while its pushes wait unfinished; it says nothing of the kind for an app that is not held.
    @Test func aHeldAppShowsItsReasonAndItsPushesWait() async throws {
        let harness = DispatcherHarness()
        let apns = FakeTransport(eventLoop: harness.loop) { _, _ in .success(APNsResponse(status: 403, reason: "InvalidProviderToken")) }
        let d = harness.dispatcher([("orders", 100, apns)], pruner: KeepingPruner())
        let tokens = (0..<3).map { String(repeating: "b", count: 62) + String(format: "%02d", $0) }
        _ = d.enqueue(Self.batch(app: "orders", tokens: tokens), on: harness.loop)
        await harness.drive(until: { d.credentialError(appID: "orders") != nil })
        let figures = AdminWiring.usage(of: Self.app("orders"), dispatcher: d, quotas: QuotaGate())
        #expect(figures.held?.reason == "InvalidProviderToken")
        #expect((figures.held?.forMS ?? -1) >= 0)
        #expect(figures.queueDepth == 3, "held, not failed")
        #expect(Self.rows(figures).isEmpty, "no push ended")
        #expect(AdminWiring.usage(of: Self.app("rides"), dispatcher: d, quotas: QuotaGate()).held == nil)
        try await harness.tearDown(d, [apns])
    }

    /// A hold reaches the app's event feed through the dispatcher's ledger even without durable intents
    /// (the memory store's default): held with the rejection's reason, then resumed once a probe is accepted.
    @Test func aHoldAndItsEndAreInTheAppsEventFeed() async throws {
        let harness = DispatcherHarness()
        let accept = NIOLockedValueBox(false)
        let apns = FakeTransport(eventLoop: harness.loop) { _, _ in
            accept.withLockedValue { $0 }
                ? .success(APNsResponse(status: 200)) : .success(APNsResponse(status: 403, reason: "InvalidProviderToken"))
        }
        let store = InMemoryActivityStore()
        let recorder = DispatchHoldRecorder(store: store, clock: SystemClock(), logger: Logger(label: "test"), on: harness.loop)
        let d = harness.dispatcher([("orders", 100, apns)], pruner: KeepingPruner(), ledger: recorder)
        _ = d.enqueue(Self.batch(app: "orders", tokens: [String(repeating: "c", count: 64)]), on: harness.loop)
        @Sendable func feed() async throws -> [FeedEvent] {
            try await store.events(appID: "orders", after: 0, limit: 10, on: harness.loop).get().entries.map(\.event)
        }
        await harness.drive(until: { d.credentialError(appID: "orders") != nil })
        try await eventually("the hold in the feed") { (try? await feed().count) == 1 }
        #expect(try await feed().map(\.kind) == [.dispatchHeld])
        #expect(try await feed().first?.reason == "InvalidProviderToken")
        accept.withLockedValue { $0 = true }
        // The first probe goes after the hold's cooldown (60 s by default), in virtual time.
        await harness.drive(until: { d.credentialError(appID: "orders") == nil }, step: .seconds(1), limit: 300)
        try await eventually("the resumption in the feed") { (try? await feed().count) == 2 }
        #expect(try await feed().map(\.kind) == [.dispatchHeld, .dispatchResumed])
        try await harness.tearDown(d, [apns])
    }

    /// Right after CreateApp the dispatcher has no queue for the app yet (no credentials): GetAppStats
    /// shows the capacity the queue will have (the app's own, or the server's default), never 0.
    @Test func anAppWithoutAQueueYetShowsTheCapacityItWillHave() async throws {
        let harness = DispatcherHarness()
        let apns = FakeTransport(eventLoop: harness.loop) { _, _ in .success(APNsResponse(status: 200)) }
        let d = harness.dispatcher([("orders", 100, apns)], pruner: KeepingPruner())
        #expect(AdminWiring.usage(of: Self.app("orders"), dispatcher: d, quotas: QuotaGate()).queueCapacity == 100, "the queue's own")
        let fresh = AdminWiring.usage(of: Self.app("rides"), dispatcher: d, quotas: QuotaGate())
        #expect(fresh.queueCapacity == PushingApp.defaultQueueCapacity)
        #expect(fresh.queueDepth == 0)
        #expect(AdminWiring.usage(of: Self.app("rides", queueCapacity: 250), dispatcher: d, quotas: QuotaGate()).queueCapacity == 250)
        #expect(AdminWiring.usage(of: Self.app("rides", queueCapacity: 250), dispatcher: nil, quotas: QuotaGate()).queueCapacity == 250)
        try await harness.tearDown(d, [apns])
    }
}
