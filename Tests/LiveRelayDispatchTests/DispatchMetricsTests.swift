import MetricsTestKit
import Testing

@testable import LiveRelayDispatch

/// The `app` label stays bounded by the configured apps: an invented app id cannot add series to /metrics.
struct DispatchMetricsTests {
    @Test func unknownAppIDsFoldIntoOther() {
        let metrics = DispatchMetrics(knownApps: ["dev.app", "com.example.scores"])
        #expect(metrics.appLabel("dev.app") == "dev.app")
        #expect(metrics.appLabel("com.example.scores") == "com.example.scores")
        #expect(metrics.appLabel("no.such.app") == "other")
        #expect(metrics.appLabel("") == "other")
    }

    /// The `reason` label takes APNs's documented reasons and LiveRelay's own; anything
    /// else an endpoint answers (any HOST:PORT can be one) counts as "other".
    @Test func reasonsOutsideTheKnownSetFoldIntoOther() {
        let metrics = DispatchMetrics(knownApps: [])
        for reason in [
            "Unregistered", "ExpiredToken", "BadDeviceToken", "DeviceTokenNotForTopic", "TooManyRequests", "InvalidProviderToken",
            "ChannelNotRegistered", "AppNotConfigured", "ShuttingDown", "MassBadDeviceToken", "ConnectFailed", "TransportShutDown",
            "HTTP502",
        ] {
            #expect(metrics.reasonLabel(reason) == reason)
        }
        for reason in ["SomethingAPNsNeverSaid", "unregistered", "Reason0", "HTTP", "HTTP5021", "HTTP50x", ""] {
            #expect(metrics.reasonLabel(reason) == "other", "\(reason)")
        }
    }

    /// `liverelay_dispatch_pushes_total` counts failed and pruned pushes with their reason,
    /// pushes of an app without a route (AppNotConfigured) included.
    @Test func pushesAreCountedByOutcomeAndReason() throws {
        var d = SchedulerDriver()
        d.enqueue(try batch(tokens: [token(1), token(2), token(3), token(4), token(5)]))
        d.respond(410, "Unregistered", token: token(1))
        d.respond(410, "Unregistered", token: token(2))
        d.respond(400, "BadDeviceToken", token: token(3))
        d.respond(400, "BadPriority", token: token(4))
        d.respond(200, token: token(5))
        d.enqueue(try batch(app: "no-route", tokens: [token(6), token(7)]))
        let test = TestMetrics()
        let metrics = DispatchMetrics(knownApps: ["app-a", "app-b"], factory: test)
        metrics.record(outcomes: d.outcomes, retries: [:], sends: [])
        func count(_ dimensions: [(String, String)]) throws -> Int64 {
            try test.expectCounter("liverelay_dispatch_pushes_total", dimensions).totalValue
        }
        #expect(try count([("app", "app-a"), ("outcome", "pruned"), ("reason", "Unregistered")]) == 2)
        // Answered before the mass-prune guard's verdict: failed with APNs's reason, its prune held.
        #expect(try count([("app", "app-a"), ("outcome", "failed"), ("reason", "BadDeviceToken")]) == 1)
        #expect(try count([("app", "app-a"), ("outcome", "failed"), ("reason", "BadPriority")]) == 1)
        #expect(try count([("app", "app-a"), ("outcome", "delivered")]) == 1)
        #expect(try count([("app", "other"), ("outcome", "failed"), ("reason", "AppNotConfigured")]) == 2)
        #expect(test.counters.filter { $0.label == "liverelay_dispatch_pushes_total" }.count == 5)
    }
}
