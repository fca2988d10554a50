import LiveRelayWire
import Metrics
import NIOConcurrencyHelpers
import NIOCore

/// The service's calls per app: `liverelay_app_calls_total{app, method, status}`
/// and `liverelay_app_call_duration{app, method}` (a histogram of seconds from
/// the service taking the call to its answer, refusals included).
///
/// The server counts every RPC by method and status (`liverelay_rpc_requests_total`)
/// before it knows the app; this is the same seen per tenant, which is what a
/// platform team alerts on ("app X's calls fail"). The `app` label is bounded
/// (``MetricHandlers``), and the service gives a call the app's id only once
/// the key may act for an app the server has: other calls count as "other".
///
/// Every call records here, so the pair of handlers of an (app, method, status)
/// is kept under that key: one dictionary lookup per call. Going through
/// ``MetricHandlers`` each time would build the dimension arrays and a string
/// key twice and look up the app's label: a large share of a RegisterToken
/// (docs/BENCHMARKS.md, "Ingest through the activities service").
final class AppCallMetrics: Sendable {
    private struct Key: Hashable {
        var app: String
        var method: String
        var status: StatusCode
    }

    private struct Handlers: Sendable {
        var calls: Counter
        var duration: Timer
    }

    private let handlers = MetricHandlers()
    /// Only apps that keep their own label, and "other" itself, are kept here, so
    /// it is bounded like the labels: an app counted as "other" by the bound goes
    /// through ``MetricHandlers`` each time.
    private let cache = NIOLockedValueBox<[Key: Handlers]>([:])

    init() {}

    func record(appID: String, method: String, status: StatusCode, nanoseconds: Int64) {
        let key = Key(app: appID, method: method, status: status)
        let found = cache.withLockedValue { $0[key] } ?? make(key)
        found.calls.increment()
        found.duration.recordNanoseconds(nanoseconds)
    }

    /// The call's count, and its time from `start` (a monotonic reading) to now.
    func record(appID: String, method: String, status: StatusCode, since start: NIODeadline) {
        record(appID: appID, method: method, status: status, nanoseconds: (NIODeadline.now() - start).nanoseconds)
    }

    /// Whether `appID`'s calls are counted under its own `app` label.
    func isNamed(_ appID: String) -> Bool {
        handlers.isNamed(appID)
    }

    private func make(_ key: Key) -> Handlers {
        let made = Handlers(
            calls: handlers.counter(
                "liverelay_app_calls_total", app: key.app, [("method", key.method), ("status", key.status.description)]),
            duration: handlers.timer("liverelay_app_call_duration", app: key.app, [("method", key.method)]))
        if key.app == MetricHandlers.otherApp || handlers.isNamed(key.app) { cache.withLockedValue { $0[key] = made } }
        return made
    }
}
