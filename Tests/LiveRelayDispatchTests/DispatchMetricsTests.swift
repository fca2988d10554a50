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

    @Test func reasonsPastTheLimitFoldIntoOther() {
        let metrics = DispatchMetrics(knownApps: [])
        for i in 0..<DispatchMetrics.maxReasons { #expect(metrics.reasonLabel("Reason\(i)") == "Reason\(i)") }
        #expect(metrics.reasonLabel("OneTooMany") == "other")
        #expect(metrics.reasonLabel("Reason0") == "Reason0")
    }
}
