import Metrics
import NIOConcurrencyHelpers

/// The deliverer's metrics, labelled by app (only apps with a webhook have any):
///
/// - `liverelay_webhook_deliveries_total{app,outcome}`: deliveries, `delivered` (a 2xx answer) or `failed`;
/// - `liverelay_webhook_events_delivered_total{app}`: events in delivered batches;
/// - `liverelay_webhook_failing{app}`: 1 while the app's webhook is failing (retried past its window).
public final class WebhookMetrics: Sendable {
    private let factory: any MetricsFactory
    private let counters = NIOLockedValueBox<[String: Counter]>([:])

    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    func delivered(appID: String, events: Int) {
        counter("liverelay_webhook_deliveries_total", [("app", appID), ("outcome", "delivered")]).increment()
        counter("liverelay_webhook_events_delivered_total", [("app", appID)]).increment(by: events)
    }

    func failed(appID: String) {
        counter("liverelay_webhook_deliveries_total", [("app", appID), ("outcome", "failed")]).increment()
    }

    func failing(appID: String, _ failing: Bool) {
        Gauge(label: "liverelay_webhook_failing", dimensions: [("app", appID)], factory: factory).record(failing ? 1 : 0)
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> Counter {
        let key = label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        return counters.withLockedValue { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: label, dimensions: dimensions, factory: factory)
            counters[key] = counter
            return counter
        }
    }
}
