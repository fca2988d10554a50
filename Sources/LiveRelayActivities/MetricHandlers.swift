import Metrics
import NIOConcurrencyHelpers

/// The service's swift-metrics handlers, made once per label set and kept:
/// making one goes through the metrics factory (a lock and a registry
/// lookup), too slow for every call of a flood.
///
/// Every handler here has an `app` dimension, and it is bounded: the first
/// ``maxApps`` app ids keep their name, later ones count as "other", so a
/// caller naming random apps (with an operator key, on a server without
/// configured apps) cannot grow the number of series.
final class MetricHandlers: Sendable {
    static let maxApps = 1_000
    static let otherApp = "other"

    private struct State {
        var counters: [String: Counter] = [:]
        var timers: [String: Timer] = [:]
        var apps: Set<String> = []

        mutating func appLabel(_ appID: String) -> String {
            // The label of what has none of its own takes no app's place.
            if appID == MetricHandlers.otherApp || apps.contains(appID) { return appID }
            guard apps.count < MetricHandlers.maxApps else { return MetricHandlers.otherApp }
            apps.insert(appID)
            return appID
        }
    }

    private let state = NIOLockedValueBox(State())
    /// Where handlers are made; nil: the bootstrapped system's, read when a handler is made.
    private let factory: (any MetricsFactory)?

    init(factory: (any MetricsFactory)? = nil) {
        self.factory = factory
    }

    func counter(_ label: String, app appID: String, _ dimensions: [(String, String)] = []) -> Counter {
        state.withLockedValue { state in
            let all = [("app", state.appLabel(appID))] + dimensions
            let key = Self.key(label, all)
            if let counter = state.counters[key] { return counter }
            let counter = Counter(label: label, dimensions: all, factory: factory ?? MetricsSystem.factory)
            state.counters[key] = counter
            return counter
        }
    }

    func timer(_ label: String, app appID: String, _ dimensions: [(String, String)] = []) -> Timer {
        state.withLockedValue { state in
            let all = [("app", state.appLabel(appID))] + dimensions
            let key = Self.key(label, all)
            if let timer = state.timers[key] { return timer }
            let timer = Timer(label: label, dimensions: all, factory: factory ?? MetricsSystem.factory)
            state.timers[key] = timer
            return timer
        }
    }

    /// Whether `appID` keeps its own label (it was seen before the bound was reached).
    func isNamed(_ appID: String) -> Bool {
        state.withLockedValue { $0.apps.contains(appID) }
    }

    private static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        dimensions.reduce(label) { $0 + "|" + $1.1 }
    }
}
