import LiveRelayWire
import Metrics

/// The service's calls per app: `liverelay_app_calls_total{app, method, status}`
/// and `liverelay_app_call_duration{app, method}` (a histogram of seconds from
/// the service taking the call to its answer, refusals included).
///
/// The server counts every RPC by method and status (`liverelay_rpc_requests_total`)
/// before it knows the app; this is the same seen per tenant, which is what a
/// platform team alerts on ("app X's calls fail"). The `app` label is bounded
/// (``MetricHandlers``).
struct AppCallMetrics: Sendable {
    private let handlers = MetricHandlers()

    func record(appID: String, method: String, status: StatusCode, nanoseconds: Int64) {
        handlers.counter("liverelay_app_calls_total", app: appID, [("method", method), ("status", status.description)]).increment()
        handlers.timer("liverelay_app_call_duration", app: appID, [("method", method)]).recordNanoseconds(nanoseconds)
    }
}
