import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore
import Testing

/// Apps added or changed while the dispatcher runs (the tenant registry's seam).
@Suite struct SchedulerConfigurationTests {
    @Test func anAppAddedWhileRunningIsSentToAndAnUnknownOneFails() throws {
        var d = SchedulerDriver(configuration(apps: [("app-a", 100)]))
        let (_, unknown) = d.enqueue(try batch(app: "late", tokens: [token(1)]), wait: false)
        #expect(unknown == EnqueueResult(failures: ["AppNotConfigured": 1]))
        d.scheduler.configure(DispatchApp(appID: "late", queueCapacity: 10, route: testRoute("late-key")))
        let (call, _) = d.enqueue(try batch(app: "late", timestamp: 1_700_000_001, tokens: [token(1)]))
        #expect(d.outstanding.map(\.route) == [testRoute("late-key")])
        d.respond(200)
        #expect(d.replies[call] == EnqueueResult(delivered: 1))
    }

    @Test func appsSharingARouteShareItsLimitAndANewRouteHasItsOwn() throws {
        let shared = testRoute("one-key")
        var d = SchedulerDriver(
            DispatcherConfiguration(
                apps: [
                    DispatchApp(appID: "app-a", queueCapacity: 100, route: shared),
                    DispatchApp(appID: "app-b", queueCapacity: 100, route: shared),
                ],
                maxInFlight: 100, maxInFlightPerTransport: 3, quantum: 4))
        d.enqueue(try batch(app: "app-a", tokens: (0..<10).map(token)), wait: false)
        d.enqueue(try batch(app: "app-b", tokens: (10..<20).map(token)), wait: false)
        #expect(d.outstanding.count == 3, "one route, one limit, whichever app fills it")
        // app-b moves to its own key: its queued pushes go by the new route at once.
        d.scheduler.configure(DispatchApp(appID: "app-b", queueCapacity: 100, route: testRoute("own-key")))
        d.advance(by: .zero)
        #expect(d.outstanding.filter { $0.route == testRoute("own-key") }.count == 3)
        // Answers of pushes sent before the change free the old route's slots, not the new one's.
        let before = d.outstanding.filter { $0.route == shared }.count
        d.respond(200, token: d.outstanding.first { $0.route == shared }!.request.deviceToken)
        #expect(d.outstanding.filter { $0.route == shared }.count == before)
        #expect(d.outstanding.filter { $0.route == testRoute("own-key") }.count == 3)
    }

    @Test func newCredentialsLiftARejection() throws {
        var d = SchedulerDriver(configuration(apps: [("app-a", 100)], maxInFlight: 1))
        d.enqueue(try batch(tokens: [token(1)]))
        d.respond(403, "InvalidProviderToken")
        #expect(d.scheduler.credentialError(appID: "app-a") != nil)
        // The same route again (a capacity change) keeps the suspension...
        d.scheduler.configure(DispatchApp(appID: "app-a", queueCapacity: 50, route: testRoute("key-app-a")))
        #expect(d.scheduler.credentialError(appID: "app-a") != nil)
        // ...a new key lifts it, and the app is sent to at once.
        d.scheduler.configure(DispatchApp(appID: "app-a", queueCapacity: 50, route: testRoute("new-key")))
        #expect(d.scheduler.credentialError(appID: "app-a") == nil)
        d.enqueue(try batch(timestamp: 1_700_000_001, tokens: [token(2)]))
        #expect(d.outstanding.map(\.route) == [testRoute("new-key")])
    }

    @Test func everyPushCarriesAnAPNsIDNamingItsCall() throws {
        var d = SchedulerDriver(configuration(apps: [("app-a", 100)]))
        d.enqueue(try batch(tokens: [token(1), token(2)]), wait: false)
        d.enqueue(try batch(activity: "act-2", tokens: [token(3)]), wait: false)
        let ids = d.outstanding.compactMap(\.request.apnsID)
        #expect(ids.count == 3 && Set(ids).count == 3)
        let prefixes = ids.map { String($0.prefix(18)) }
        #expect(prefixes[0] == prefixes[1] && prefixes[1] != prefixes[2], "one prefix per call")
        // A retry keeps its push's id: it is the same notification.
        d.respond(503, "ServiceUnavailable", token: token(3))
        d.advance(by: .seconds(1))
        #expect(d.outstanding.first { $0.request.deviceToken == token(3) }?.request.apnsID == ids[2])
    }
}
