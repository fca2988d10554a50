import Foundation
import LiveRelayMessages

/// The RPCs a scenario can mix, named as in the protocol so scenario files read like the API.
public enum BenchRPC: String, CaseIterable, Sendable, Hashable, Codable {
    case registerToken = "RegisterToken"
    case startActivity = "StartActivity"
    case updateActivity = "UpdateActivity"
    case endActivity = "EndActivity"
    case ping = "Ping"

    public var method: LiveRelayMethod {
        switch self {
        case .registerToken: .registerToken
        case .startActivity: .startActivity
        case .updateActivity: .updateActivity
        case .endActivity: .endActivity
        case .ping: .ping
        }
    }

    /// Stable index for per-RPC arrays (cheaper than dictionaries on the hot path).
    public var index: Int { Self.allCases.firstIndex(of: self)! }

    /// Accepts the protocol name in any case and the short forms people type on a command line.
    public init?(name: String) {
        switch name.lowercased() {
        case "registertoken", "register": self = .registerToken
        case "startactivity", "start": self = .startActivity
        case "updateactivity", "update": self = .updateActivity
        case "endactivity", "end": self = .endActivity
        case "ping": self = .ping
        default: return nil
        }
    }
}

/// How load is offered.
public enum LoadShape: Sendable, Equatable {
    /// A constant arrival rate (requests/s) spread over `connections`, whatever the server does:
    /// at most `maxOutstanding` calls in flight, later ones wait (and count as late).
    case open(rate: Double, connections: Int, maxOutstanding: Int)
    /// `connections` × `depth` callers, each sending its next call when the previous one ends.
    case closed(connections: Int, depth: Int)

    public var connections: Int {
        switch self {
        case let .open(_, connections, _): connections
        case let .closed(connections, _): connections
        }
    }
}

/// When the measured part of a run ends.
public enum StopCondition: Sendable, Equatable {
    case duration(seconds: Double)
    case requests(Int)
}

/// One entry of the RPC mix.
public struct MixEntry: Sendable, Equatable, Codable {
    public var rpc: BenchRPC
    public var weight: Int
    public init(_ rpc: BenchRPC, _ weight: Int) {
        self.rpc = rpc
        self.weight = weight
    }
}

/// Everything a run needs besides where the server is. A value, so a scenario can be
/// parsed, checked and printed without touching a socket.
public struct Scenario: Sendable, Equatable {
    public var name = "custom"
    public var shape = LoadShape.closed(connections: 4, depth: 32)
    public var mix = [MixEntry(.registerToken, 1)]
    /// Apps the load is spread over. One app uses `appID` itself (the development key's app);
    /// more use `appID-1`, `appID-2`, ... and need an API key allowed for them.
    public var apps = 1
    public var appID = "dev.app"
    /// Activities per app that the setup phase creates and UpdateActivity round-robins over.
    public var activitiesPerApp = 100
    /// Update tokens registered per activity in the setup phase: each update fans out to them.
    public var tokensPerActivity = 1
    /// Size in bytes of the content-state JSON of Start, Update and End.
    public var contentStateBytes = 200
    public var stop = StopCondition.duration(seconds: 10)
    /// Load is offered but not recorded for this long first (connections, caches, allocators settle).
    public var warmupSeconds = 2.0
    /// Per-call deadline.
    public var timeoutSeconds = 10.0
    /// Start, Update and End ask the server to wait until APNs answered every push, so each
    /// reply carries the final account and the run measures delivery, not queueing.
    public var waitForDelivery = false

    public init() {}

    public var appIDs: [String] {
        apps == 1 ? [appID] : (1...apps).map { "\(appID)-\($0)" }
    }

    public var totalWeight: Int { mix.reduce(0) { $0 + $1.weight } }

    public func weight(of rpc: BenchRPC) -> Int { mix.first { $0.rpc == rpc }?.weight ?? 0 }

    /// Whether the setup phase has anything to do (Ping-only runs need no state).
    public var needsSetup: Bool { mix.contains { $0.rpc != .ping && $0.weight > 0 } }

    /// One line for the report and the progress output.
    public var shapeDescription: String {
        let load: String
        switch shape {
        case let .open(rate, connections, maxOutstanding):
            load = "open loop at \(formatCount(rate))/s over \(connections) connection(s), at most \(maxOutstanding) outstanding"
        case let .closed(connections, depth):
            load = "closed loop, \(connections) connection(s) x \(depth) in flight"
        }
        let stopText: String
        switch stop {
        case let .duration(seconds): stopText = "\(formatSeconds(seconds)) measured"
        case let .requests(n): stopText = "\(n) requests measured"
        }
        let mixText = mix.filter { $0.weight > 0 }.map { "\($0.rpc.rawValue)=\($0.weight)" }.joined(separator: ",")
        return "\(load); \(stopText) after \(formatSeconds(warmupSeconds)) warm-up; mix \(mixText)"
            + (waitForDelivery ? "; each call waits for delivery" : "")
    }
}

func formatSeconds(_ s: Double) -> String {
    s == s.rounded() ? "\(Int(s)) s" : "\((s * 100).rounded() / 100) s"
}

/// Thousands separators, no Foundation formatter (its output depends on the locale).
public func formatCount(_ value: Double) -> String {
    let n = Int(value.rounded())
    let digits = String(abs(n))
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0, (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return n < 0 ? "-" + out : out
}
