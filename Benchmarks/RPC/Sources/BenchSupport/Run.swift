import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The phases of a run: callers record nothing while warming up, record every
/// completion while measuring, and stop issuing once stopping.
public enum RunPhase: Int, Sendable {
    case warmup = 0
    case measuring = 1
    case stopping = 2
}

public final class PhaseFlag: Sendable {
    private let raw = Atomic<Int>(RunPhase.warmup.rawValue)
    public init() {}
    @inline(__always)
    public var current: RunPhase { RunPhase(rawValue: raw.load(ordering: .relaxed))! }
    public func set(_ phase: RunPhase) { raw.store(phase.rawValue, ordering: .sequentiallyConsistent) }
}

/// What one closed-loop caller saw. Owned by one caller at a time (its calls are
/// sequential), merged by the driver after the run.
public final class CallerStats: @unchecked Sendable {
    public var histogram = LatencyHistogram()
    public var errorsWhileMeasuring: UInt64 = 0
    public var errorsTotal: UInt64 = 0
    public var completedTotal: UInt64 = 0
    public var lastError: String?
    public init() {}

    /// Records one finished call that started at `startNanos`.
    @inline(__always)
    public func finished(startNanos: UInt64, ok: Bool, phase: RunPhase, error: @autoclosure () -> String? = nil) {
        completedTotal &+= 1
        if ok {
            if phase == .measuring { histogram.record(monotonicNanos() &- startNanos) }
        } else {
            errorsTotal &+= 1
            if phase == .measuring { errorsWhileMeasuring &+= 1 }
            if lastError == nil { lastError = error() }
        }
    }
}

/// The measured window: its wall time and the CPU both processes used during it.
public struct MeasuredWindow: Sendable {
    public var seconds: Double
    public var loadCPUSeconds: Double?
    public var serverCPUSeconds: Double?
    /// Busy CPU time of the whole machine (all processes, all CPUs) during the window.
    public var machineCPUSeconds: Double?

    /// CPU used during the window by processes other than this server and load generator
    /// (other builds and benchmarks on a shared machine), as a percentage of one CPU.
    public var otherCPUPercent: Double? {
        guard let machine = machineCPUSeconds, let load = loadCPUSeconds else { return nil }
        return Swift.max(0, machine - load - (serverCPUSeconds ?? 0)) / seconds * 100
    }
}

/// Warm-up, then the measured window, then `stopping`. Returns when the window ends.
public func runWindow(options: LoadOptions, phase: PhaseFlag) async throws -> MeasuredWindow {
    try await Task.sleep(for: .milliseconds(Int(options.warmupSeconds * 1000)))
    let selfPID = currentProcessID()
    let load0 = processCPUSeconds(pid: selfPID)
    let server0 = options.serverPID > 0 ? processCPUSeconds(pid: options.serverPID) : nil
    let machine0 = machineBusyCPUSeconds()
    let t0 = monotonicNanos()
    phase.set(.measuring)
    try await Task.sleep(for: .milliseconds(Int(options.durationSeconds * 1000)))
    phase.set(.stopping)
    let t1 = monotonicNanos()
    let load1 = processCPUSeconds(pid: selfPID)
    let server1 = options.serverPID > 0 ? processCPUSeconds(pid: options.serverPID) : nil
    let machine1 = machineBusyCPUSeconds()
    func delta(_ a: Double?, _ b: Double?) -> Double? {
        guard let a, let b else { return nil }
        return b - a
    }
    return MeasuredWindow(
        seconds: Double(t1 - t0) / 1e9,
        loadCPUSeconds: delta(load0, load1),
        serverCPUSeconds: delta(server0, server1),
        machineCPUSeconds: delta(machine0, machine1)
    )
}

/// One run's result: a human-readable block and a `RESULT {json}` line for scripts.
public struct LoadReport {
    public var target: String
    public var options: LoadOptions
    public var window: MeasuredWindow
    public var histogram: LatencyHistogram
    public var errors: UInt64
    public var lastError: String?

    public init(target: String, options: LoadOptions, window: MeasuredWindow, callers: [CallerStats]) {
        self.target = target
        self.options = options
        self.window = window
        var merged = LatencyHistogram()
        var errors: UInt64 = 0
        var lastError: String?
        for c in callers {
            merged.merge(c.histogram)
            errors += c.errorsWhileMeasuring
            if lastError == nil { lastError = c.lastError }
        }
        self.histogram = merged
        self.errors = errors
        self.lastError = lastError
    }

    public var requestsPerSecond: Double { Double(histogram.totalCount) / window.seconds }

    public func printReport() {
        let us = { (ns: UInt64) in Double(ns) / 1000 }
        let p50 = us(histogram.value(atPercentile: 50))
        let p90 = us(histogram.value(atPercentile: 90))
        let p99 = us(histogram.value(atPercentile: 99))
        let p999 = us(histogram.value(atPercentile: 99.9))
        let maxv = us(histogram.max)
        let serverPct = window.serverCPUSeconds.map { $0 / window.seconds * 100 }
        let loadPct = window.loadCPUSeconds.map { $0 / window.seconds * 100 }
        let serverUsPerReq = window.serverCPUSeconds.map { histogram.totalCount > 0 ? $0 * 1e6 / Double(histogram.totalCount) : 0 }
        func f(_ v: Double, _ digits: Int = 1) -> String {
            let m = pow(10.0, Double(digits))
            return String((v * m).rounded() / m)
        }
        func opt(_ v: Double?) -> String { v.map { f($0) } ?? "null" }
        say(
            """
            \(target) c=\(options.connections) d=\(options.depth): \(f(requestsPerSecond, 0)) req/s over \(f(window.seconds, 2)) s \
            (\(histogram.totalCount) ok, \(errors) errors)
              latency us: p50 \(f(p50)) p90 \(f(p90)) p99 \(f(p99)) p99.9 \(f(p999)) max \(f(maxv)) mean \(f(histogram.mean / 1000))
              cpu: server \(opt(serverPct))% (\(opt(serverUsPerReq)) us/req), load generator \(opt(loadPct))%, other processes \(opt(window.otherCPUPercent))%
            """)
        if let lastError { say("  first error: \(lastError)") }
        let label = options.label.isEmpty ? target : options.label
        say(
            "RESULT {\"target\":\"\(target)\",\"label\":\"\(label)\",\"connections\":\(options.connections),\"depth\":\(options.depth),"
                + "\"seconds\":\(f(window.seconds, 3)),\"requests\":\(histogram.totalCount),\"errors\":\(errors),"
                + "\"rps\":\(f(requestsPerSecond, 0)),\"p50_us\":\(f(p50)),\"p90_us\":\(f(p90)),\"p99_us\":\(f(p99)),"
                + "\"p999_us\":\(f(p999)),\"max_us\":\(f(maxv)),\"mean_us\":\(f(histogram.mean / 1000)),"
                + "\"server_cpu_pct\":\(opt(serverPct)),\"server_cpu_us_per_req\":\(opt(serverUsPerReq)),\"load_cpu_pct\":\(opt(loadPct)),\"other_cpu_pct\":\(opt(window.otherCPUPercent)),"
                + "\"request_bytes\":\(RequestFixture.bytes.count),\"request_fnv\":\"\(RequestFixture.fingerprint)\"}")
    }
}
