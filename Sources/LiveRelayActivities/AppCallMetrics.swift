import LiveRelayWire
import Metrics
import NIOConcurrencyHelpers

/// The service's calls per app: `liverelay_app_calls_total{app, method, status}`
/// and `liverelay_app_call_duration{app, method}` (a histogram of seconds from
/// the service taking the call to its answer, refusals included).
///
/// The server counts every RPC by method and status (`liverelay_rpc_requests_total`)
/// before it knows the app; this is the same seen per tenant, which is what a
/// platform team alerts on ("app X's calls fail").
///
/// The `app` label is bounded: the first ``maxApps`` app ids keep their name,
/// later ones count as "other", so a caller naming random apps (with an
/// operator key, on a server without configured apps) cannot grow the number
/// of series. Handlers are made once per label set and kept.
final class AppCallMetrics: Sendable {
    static let maxApps = 1_000
    static let otherApp = "other"

    private struct Handlers {
        var counters: [String: Counter] = [:]
        var timers: [String: Timer] = [:]
        var apps: Set<String> = []
    }

    private let handlers = NIOLockedValueBox(Handlers())

    func record(appID: String, method: String, status: StatusCode, nanoseconds: Int64) {
        let (counter, timer) = handlers.withLockedValue { handlers in
            var app = appID
            if !handlers.apps.contains(app) {
                if handlers.apps.count < Self.maxApps { handlers.apps.insert(app) } else { app = Self.otherApp }
            }
            let timerKey = app + "|" + method
            let counterKey = timerKey + "|" + status.description
            let counter: Counter
            if let existing = handlers.counters[counterKey] {
                counter = existing
            } else {
                counter = Counter(
                    label: "liverelay_app_calls_total", dimensions: [("app", app), ("method", method), ("status", status.description)])
                handlers.counters[counterKey] = counter
            }
            let timer: Timer
            if let existing = handlers.timers[timerKey] {
                timer = existing
            } else {
                timer = Timer(label: "liverelay_app_call_duration", dimensions: [("app", app), ("method", method)])
                handlers.timers[timerKey] = timer
            }
            return (counter, timer)
        }
        counter.increment()
        timer.recordNanoseconds(nanoseconds)
    }
}
