import LiveRelayMessages
import LiveRelayWire
import Metrics
import NIOCore

/// Every metric the server reports, created once per server.
///
/// Created up front rather than per request: building a `Counter` asks the
/// metrics factory (typically a lock and a dictionary lookup), which the hot
/// path must not do per call. The request table is small (6 methods x 17
/// statuses), so eager creation costs nothing worth measuring.
final class ServerMetrics: Sendable {
    /// Labels of the `method` dimension; the last one covers unknown methods and
    /// requests refused before dispatch (too many in flight, server going away).
    static let methodLabels: [String] =
        LiveRelayMethod.allCases.map(\.methodName) + AdminMethod.allCases.map(\.methodName) + ["unknown"]
    static let unknownMethod = methodLabels.count - 1

    let connectionsAccepted: Counter
    let connectionsActive: Meter
    let authenticationFailures: Counter
    /// Connections closed at accept: the server had `maxConnections` open.
    let connectionsRefusedOverGlobalLimit: Counter
    /// Connections answered GOAWAY TOO_MANY_CONNECTIONS: their key had `maxConnectionsPerKey` open.
    let connectionsRefusedOverKeyLimit: Counter
    /// Times a connection stopped reading until its partial frame's bytes fit
    /// the request memory budget (``RequestMemoryBudget``).
    let readsHeldForMemory: Counter
    private let requests: [[Counter]]
    private let latency: [Timer]
    private let goAways: [Counter]

    /// For handlers made outside an `RPCServer` (custom pipelines, benchmarks):
    /// created on first use, so after `MetricsSystem.bootstrap` in any sane startup.
    static let shared = ServerMetrics()

    init() {
        connectionsAccepted = Counter(label: "liverelay_connections_total")
        connectionsActive = Meter(label: "liverelay_connections_active")
        authenticationFailures = Counter(label: "liverelay_authentication_failures_total")
        connectionsRefusedOverGlobalLimit = Counter(label: "liverelay_connections_refused_total", dimensions: [("limit", "global")])
        connectionsRefusedOverKeyLimit = Counter(label: "liverelay_connections_refused_total", dimensions: [("limit", "per_key")])
        readsHeldForMemory = Counter(label: "liverelay_connection_reads_held_for_memory_total")
        requests = Self.methodLabels.map { method in
            StatusCode.allCases.map { status in
                Counter(label: "liverelay_rpc_requests_total", dimensions: [("method", method), ("status", status.description)])
            }
        }
        latency = Self.methodLabels.map { method in
            Timer(label: "liverelay_rpc_duration", dimensions: [("method", method)])
        }
        goAways = (0...Self.otherGoAway).map { code in
            let name = code < Self.otherGoAway ? GoAwayCode(rawValue: UInt32(code)).description : "OTHER"
            return Counter(label: "liverelay_goaways_sent_total", dimensions: [("code", name)])
        }
    }

    /// The slot of every GOAWAY code this version does not name (one past the last it does).
    private static let otherGoAway = Int(GoAwayCode.tooManyConnections.rawValue) + 1

    static func index(of method: LiveRelayMethod) -> Int {
        LiveRelayMethod.allCases.firstIndex(of: method)!
    }

    static func index(of method: AdminMethod) -> Int {
        LiveRelayMethod.allCases.count + AdminMethod.allCases.firstIndex(of: method)!
    }

    /// One answered request; `latency` is nil for requests refused before dispatch.
    func recordRequest(method: Int, status: StatusCode, latency: TimeAmount?) {
        requests[method][Int(status.rawValue)].increment()
        if let latency {
            self.latency[method].recordNanoseconds(latency.nanoseconds)
        }
    }

    func recordGoAway(_ code: GoAwayCode) {
        goAways[Int(min(code.rawValue, UInt32(Self.otherGoAway)))].increment()
    }
}
