import LiveRelayAPNs
import Metrics
import NIOConcurrencyHelpers

/// The dispatcher's swift-metrics counters, per app:
/// - `liverelay_dispatch_pushes_total{app, outcome[, reason]}`: final outcomes
///   (delivered, failed and pruned with their reason, superseded, expired);
/// - `liverelay_dispatch_sends_total{app}` and `liverelay_dispatch_retries_total{app}`;
/// - `liverelay_dispatch_credential_rejections_total{app, reason}`;
/// - `liverelay_dispatch_app_held{app}`: 1 while the app's pushes are held for
///   rejected credentials (or tokens rejected en masse), 0 once they flow again;
/// - `liverelay_dispatch_refused_calls_total{app}`: RESOURCE_EXHAUSTED answers;
/// - `liverelay_dispatch_circuit_transitions_total{route, to}`: circuit breaker
///   state changes per route (`to` open, half_open or closed), so an outage
///   and its recovery show on a dashboard without reading logs.
///
/// Counters are made once per label set and kept: creating one goes through
/// the metrics factory, too slow for every push of a fan-out.
///
/// The `app` label is bounded: an app id the dispatcher was not configured
/// with (a caller naming an app that does not exist) counts as "other", so a
/// caller cannot grow the number of series, and with it the scrape and the
/// memory kept here, by inventing app ids. The `reason` label comes from the
/// APNs endpoint's answers, a closed set at Apple (``APNsReasons/documented``),
/// but an endpoint can be any HOST:PORT: a reason keeps its name when APNs
/// documents it or LiveRelay makes it (``DispatchFailure``, the transport's
/// failures, `HTTP<status>` for an error answer without one), and counts as
/// "other" otherwise, so no endpoint can grow the series either.
final class DispatchMetrics: @unchecked Sendable {
    static let otherApp = "other"
    static let otherReason = "other"
    /// Every reason that keeps its name.
    static let knownReasons: Set<String> =
        APNsReasons.documented.union(DispatchFailure.own).union(APNsTransportError.Kind.allCases.map(\.rawValue))

    private let lock = NIOLock()
    private let factory: any MetricsFactory
    private var counters: [String: Counter] = [:]
    // Guarded by `lock`: grows as apps are configured while serving.
    private var knownApps: Set<String>

    /// - Parameter factory: where the counters go: the process's metrics system, or a test's.
    init(knownApps: Set<String>, factory: any MetricsFactory = MetricsSystem.factory) {
        self.knownApps = knownApps
        self.factory = factory
    }

    /// The `app` label for `appID`: itself when configured, "other" otherwise.
    func appLabel(_ appID: String) -> String {
        lock.withLock { knownApps.contains(appID) } ? appID : Self.otherApp
    }

    /// An app configured while serving (``Dispatcher/configure(_:)``) keeps its own label from now on.
    func know(_ appID: String) {
        lock.withLock { _ = knownApps.insert(appID) }
    }

    /// The `reason` label for `reason`: itself when it is one of ``knownReasons``
    /// or `HTTP` and a three-digit status, "other" otherwise.
    func reasonLabel(_ reason: String) -> String {
        if Self.knownReasons.contains(reason) { return reason }
        // ``DispatchFailure/status(_:)``: an error answer that carried no reason.
        let bytes = reason.utf8
        let isStatus = bytes.count == 7 && reason.hasPrefix("HTTP") && bytes.dropFirst(4).allSatisfy { $0 &- UInt8(ascii: "0") < 10 }
        return isStatus ? reason : Self.otherReason
    }

    func record(outcomes: [OutcomeCount], retries: [String: Int], sends: [DispatchSend]) {
        for run in outcomes {
            var dimensions = [("app", appLabel(run.appID)), ("outcome", run.outcome.label)]
            switch run.outcome {
            case let .failed(reason), let .pruned(reason): dimensions.append(("reason", reasonLabel(reason)))
            case .delivered, .superseded, .expired: break
            }
            counter("liverelay_dispatch_pushes_total", dimensions).increment(by: run.count)
        }
        for (app, count) in retries {
            counter("liverelay_dispatch_retries_total", [("app", appLabel(app))]).increment(by: count)
        }
        if !sends.isEmpty {
            var perApp: [String: Int] = [:]
            for send in sends { perApp[appLabel(send.appID), default: 0] += 1 }
            for (app, count) in perApp { counter("liverelay_dispatch_sends_total", [("app", app)]).increment(by: count) }
        }
    }

    func credentialsRejected(appID: String, reason: String) {
        counter("liverelay_dispatch_credential_rejections_total", [("app", appLabel(appID)), ("reason", reasonLabel(reason))]).increment()
    }

    func appHeld(appID: String, _ held: Bool) {
        Gauge(label: "liverelay_dispatch_app_held", dimensions: [("app", appLabel(appID))], factory: factory).record(held ? 1 : 0)
    }

    func circuitTransition(route: APNsRoute, _ transition: CircuitBreaker.Transition) {
        counter("liverelay_dispatch_circuit_transitions_total", [("route", route.description), ("to", transition.label)]).increment()
    }

    func refused(appID: String) {
        counter("liverelay_dispatch_refused_calls_total", [("app", appLabel(appID))]).increment()
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> Counter {
        let key = label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        return lock.withLock {
            if let counter = counters[key] { return counter }
            let counter = Counter(label: label, dimensions: dimensions, factory: factory)
            counters[key] = counter
            return counter
        }
    }
}
