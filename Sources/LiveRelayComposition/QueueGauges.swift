import LiveRelayDispatch
import Metrics
import NIOConcurrencyHelpers

/// `liverelay_queue_depth{app}` and `liverelay_queue_capacity{app}`, set from
/// the dispatcher when `/metrics` is scraped: a gauge moved on every push of
/// a fan-out would cost the dispatcher's hot path for a value read every few
/// seconds. The dispatcher is attached once it exists (the operations port
/// starts before it).
package final class QueueGauges: Sendable {
    private let dispatcher = NIOLockedValueBox<Dispatcher?>(nil)

    package func attach(_ dispatcher: Dispatcher) {
        self.dispatcher.withLockedValue { $0 = dispatcher }
    }

    package func update() {
        guard let dispatcher = dispatcher.withLockedValue({ $0 }) else { return }
        for level in dispatcher.queueLevels {
            Gauge(label: "liverelay_queue_depth", dimensions: [("app", level.appID)]).record(level.unfinished)
            Gauge(label: "liverelay_queue_capacity", dimensions: [("app", level.appID)]).record(level.capacity)
        }
    }
}
