import Foundation
import LiveRelayClient

/// One RPC kind's line of the final table.
public struct RPCReport: Sendable, Codable, Equatable {
    public var rpc: String
    public var sent: UInt64
    public var ok: UInt64
    public var errors: UInt64
    /// Completions by status name ("OK", "NOT_FOUND", ...); only statuses that occurred.
    public var statuses: [String: UInt64]
    public var latencyUs: LatencySummary
    public var serviceTimeUs: LatencySummary

    public init(rpc: String, stats: RPCStats) {
        self.rpc = rpc
        sent = stats.sent
        ok = stats.ok
        errors = stats.errors
        var statuses: [String: UInt64] = [:]
        for code in StatusCode.allCases where stats.statusCounts[Int(code.rawValue)] > 0 {
            statuses[code.description] = stats.statusCounts[Int(code.rawValue)]
        }
        self.statuses = statuses
        latencyUs = LatencySummary(stats.latency)
        serviceTimeUs = LatencySummary(stats.serviceTime)
    }
}

/// The result of one run, for people (`table`) and machines (`--json`, the gate, bench.sh).
public struct BenchReport: Sendable, Codable {
    public var scenario: String
    public var description: String
    public var mode: String
    public var askedRate: Double?
    public var connections: Int
    public var depth: Int?
    public var maxOutstanding: Int?
    public var setupCalls: Int
    public var setupSeconds: Double
    /// Length of the measured window in seconds (see `achievedRate`).
    public var windowSeconds: Double
    public var sent: UInt64
    public var completed: UInt64
    public var ok: UInt64
    public var errors: UInt64
    /// Requests actually sent per second during the window, from the send timestamps.
    public var achievedRate: Double
    /// OK replies per second over the window.
    public var throughput: Double
    /// Open loop: requests that came due while `max_outstanding` calls were in flight, so they
    /// could only be sent later (their wait is in `latencyUs`).
    public var late: UInt64
    /// Open loop: requests due in the window that were never sent (the run ended first).
    public var unsent: UInt64
    /// Open loop: actual send time minus intended time, all requests; shows the generator's own lag.
    public var sendLagUs: LatencySummary?
    public var latencyUs: LatencySummary
    public var serviceTimeUs: LatencySummary
    public var rpcs: [RPCReport]
    /// Up to five distinct error messages, for diagnosis.
    public var sampleErrors: [String]
    /// With a server PID: its CPU over the window, in % of one core and µs per completed call.
    public var serverCPUPercent: Double?
    public var serverCPUUsPerCall: Double?
    /// When the scenario waits for delivery: what the measured calls' summaries add up to.
    public var pushes: PushAccount? = nil
    /// With a server PID: its resident memory at the end of the run, and its peak (VmHWM).
    public var serverRSSBytes: UInt64? = nil
    public var serverPeakRSSBytes: UInt64? = nil
    /// From the actual send, of the calls refused RESOURCE_EXHAUSTED or UNAVAILABLE, when there were any.
    public var refusalLatencyUs: LatencySummary? = nil
    /// The load generator's own CPU over the window, in µs per completed call.
    public var clientCPUUsPerCall: Double? = nil

    /// Whether every call of the window is accounted for: each sent call completed with exactly one status.
    public var countsAddUp: Bool {
        sent == completed && completed == ok + errors && rpcs.reduce(0) { $0 + $1.sent } == sent
            && rpcs.allSatisfy { $0.sent == $0.ok + $0.errors && $0.statuses.values.reduce(0, +) == $0.sent }
    }

    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// The final table: one line per RPC and a total, then what is needed to read it.
    public func table() -> String {
        var lines: [String] = []
        lines.append("scenario \(scenario): \(description)")
        lines.append(
            "setup: \(setupCalls) calls in \(fmt(setupSeconds, 2)) s; window \(fmt(windowSeconds, 2)) s; "
                + "sent \(sent) (\(formatCount(achievedRate))/s\(askedRate.map { " of \(formatCount($0))/s asked" } ?? "")), "
                + "ok \(ok) (\(formatCount(throughput))/s), errors \(errors)")
        let header = ["RPC", "sent", "ok", "errors", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"]
        var rows: [[String]] = []
        func ms(_ us: Double) -> String { fmt(us / 1000, 3) }
        for r in rpcs where r.sent > 0 {
            rows.append([
                r.rpc, "\(r.sent)", "\(r.ok)", "\(r.errors)", ms(r.latencyUs.p50), ms(r.latencyUs.p90), ms(r.latencyUs.p99),
                ms(r.latencyUs.p999), ms(r.latencyUs.max),
            ])
        }
        rows.append([
            "all", "\(sent)", "\(ok)", "\(errors)", ms(latencyUs.p50), ms(latencyUs.p90), ms(latencyUs.p99),
            ms(latencyUs.p999), ms(latencyUs.max),
        ])
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func render(_ row: [String]) -> String {
            row.enumerated().map { i, cell in
                i == 0
                    ? cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[i] - cell.count) + cell
            }.joined(separator: "  ")
        }
        lines.append(render(header))
        for row in rows { lines.append(render(row)) }
        for r in rpcs where r.errors > 0 {
            let statuses = r.statuses.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append("statuses \(r.rpc): \(statuses)")
        }
        if let refusal = refusalLatencyUs {
            lines.append(
                "refused (RESOURCE_EXHAUSTED, UNAVAILABLE) from the send in p50 \(ms(refusal.p50)) p99 \(ms(refusal.p99)) max \(ms(refusal.max)) ms"
            )
        }
        if mode == "open" {
            lines.append(
                "latency is from each request's intended send time (coordinated-omission corrected); "
                    + "from the actual send: p50 \(ms(serviceTimeUs.p50)) p99 \(ms(serviceTimeUs.p99)) max \(ms(serviceTimeUs.max)) ms")
            lines.append(
                "late (held back by max_outstanding): \(late); unsent: \(unsent); generator send lag p99 \(ms(sendLagUs?.p99 ?? 0)) "
                    + "max \(ms(sendLagUs?.max ?? 0)) ms")
        } else {
            lines.append("latency is from the actual send (closed loop: a slow reply delays the caller's next request)")
        }
        if let pct = serverCPUPercent, let perCall = serverCPUUsPerCall {
            lines.append("server CPU: \(fmt(pct, 1))% of a core, \(fmt(perCall, 1)) µs per call")
        }
        if let perCall = clientCPUUsPerCall { lines.append("load generator CPU: \(fmt(perCall, 1)) µs per call") }
        if let pushes { lines.append(pushes.line) }
        if let rss = serverRSSBytes, let peak = serverPeakRSSBytes {
            lines.append("server memory: RSS \(rss / 1_048_576) MiB at the end, peak \(peak / 1_048_576) MiB")
        }
        for e in sampleErrors { lines.append("error: \(e)") }
        return lines.joined(separator: "\n")
    }
}

/// One line per second on stderr while a run goes.
public struct ProgressSnapshot: Sendable {
    public var elapsedSeconds: Double
    public var phase: String
    /// Completions per second since the previous snapshot.
    public var rate: Double
    public var errors: UInt64
    public var errorsTotal: UInt64
    /// p99 of the completions since the previous snapshot, in microseconds.
    public var p99Us: Double
    public var outstanding: Int
    public var late: UInt64

    public var line: String {
        "[\(fmt(elapsedSeconds, 1)) s] \(phase): \(formatCount(rate)) req/s, errors \(errors) (total \(errorsTotal)), "
            + "p99 \(fmt(p99Us / 1000, 2)) ms, in flight \(outstanding)\(late > 0 ? ", late \(late)" : "")"
    }
}

func fmt(_ v: Double, _ digits: Int) -> String {
    guard v.isFinite else { return "\(v)" }
    let m = pow(10.0, Double(digits))
    let r = (v * m).rounded() / m
    var s = String(r)
    if let dot = s.firstIndex(of: ".") {
        let decimals = s.distance(from: dot, to: s.endIndex) - 1
        if decimals < digits { s += String(repeating: "0", count: digits - decimals) }
    } else if digits > 0 {
        s += "." + String(repeating: "0", count: digits)
    }
    return s
}
