import Histogram
import LiveRelayClient

/// Latencies are recorded in nanoseconds with 3 significant digits (0.1% error) from 1 µs up
/// to 10 minutes; larger values are clamped to the top so a pathological stall still counts.
public func makeLatencyHistogram() -> Histogram<UInt64> {
    Histogram<UInt64>(lowestDiscernibleValue: 1_000, highestTrackableValue: 600_000_000_000, numberOfSignificantValueDigits: .three)
}

extension Histogram where Count == UInt64 {
    @inline(__always)
    mutating func recordClamped(_ nanos: UInt64) {
        record(Swift.min(nanos, highestTrackableValue))
    }
}

/// What one RPC kind saw during the measured window.
public struct RPCStats: Sendable {
    /// Open loop: from the request's intended send time to its completion (coordinated-omission
    /// corrected). Closed loop: from the actual send (there is no schedule to be late against).
    public var latency = makeLatencyHistogram()
    /// From the actual send to completion: what a naive load generator would report.
    /// Kept beside `latency` so the difference (time spent waiting to be sent) is visible.
    public var serviceTime = makeLatencyHistogram()
    /// From the actual send to completion, of the calls the server turned away
    /// (RESOURCE_EXHAUSTED, UNAVAILABLE): an overloaded server must say no quickly, and this
    /// shows how quickly it did, without the generator's own lag in an open-loop flood.
    public var refusalLatency = makeLatencyHistogram()
    /// Completions per status code, indexed by `StatusCode.rawValue` (OK included).
    public var statusCounts = [UInt64](repeating: 0, count: StatusCode.allCases.count)
    /// Calls issued whose outcome belongs to the window.
    public var sent: UInt64 = 0

    public init() {}

    public var completed: UInt64 { statusCounts.reduce(0, +) }
    public var ok: UInt64 { statusCounts[Int(StatusCode.ok.rawValue)] }
    public var errors: UInt64 { completed - ok }

    public mutating func add(_ other: RPCStats) {
        latency.add(other.latency)
        serviceTime.add(other.serviceTime)
        refusalLatency.add(other.refusalLatency)
        for i in statusCounts.indices { statusCounts[i] += other.statusCounts[i] }
        sent += other.sent
    }
}

/// Percentiles of one histogram, in microseconds, for reports.
public struct LatencySummary: Sendable, Codable, Equatable {
    public var p50: Double
    public var p90: Double
    public var p99: Double
    public var p999: Double
    public var max: Double
    public var mean: Double

    public init(p50: Double, p90: Double, p99: Double, p999: Double, max: Double, mean: Double) {
        self.p50 = p50
        self.p90 = p90
        self.p99 = p99
        self.p999 = p999
        self.max = max
        self.mean = mean
    }

    public init(_ h: Histogram<UInt64>) {
        guard h.totalCount > 0 else {
            self.init(p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0)
            return
        }
        func us(_ ns: UInt64) -> Double { (Double(ns) / 100).rounded() / 10 }
        self.init(
            p50: us(h.valueAtPercentile(50)), p90: us(h.valueAtPercentile(90)), p99: us(h.valueAtPercentile(99)),
            p999: us(h.valueAtPercentile(99.9)), max: us(h.maxRecorded), mean: (h.mean / 100).rounded() / 10)
    }
}
