import Foundation
import LiveRelayClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The overload isolation scenario: one app floods the server open loop at a multiple of
/// what it can carry while another sends at a steady, modest rate; the question is whether
/// the quiet app notices. Against one server, RegisterToken only (every call is a store
/// write, so the store's queue is what the flood fills):
///
/// 1. capacity: the noisy app alone, closed loop, as many calls in flight as admission
///    lets one app have; its OK/s is what the server carries for one app;
/// 2. `rounds` times: the quiet app alone at its open-loop rate (the reference), then
///    the noisy app open loop at `floodFactor` × capacity and the quiet app as before, at
///    the same time, each from its own event-loop thread so that neither generator delays
///    the other's sends (latency counts from the intended send time).
///
/// The server's resident memory is sampled through the flood: admission must keep it flat.
public struct OverloadScenario: Sendable, Equatable {
    public var noisyApp = "noisy.app"
    public var quietApp = "quiet.app"
    /// The quiet app's open-loop rate, calls per second.
    public var quietRate = 500.0
    /// The noisy app's open-loop rate as a multiple of the measured capacity.
    public var floodFactor = 3.0
    /// The server's capacity in calls/s; measured in phase 1 when nil.
    public var capacity: Double?
    public var capacityConnections = 4
    public var capacityDepth = 64
    public var capacitySeconds = 5.0
    public var noisyConnections = 4
    public var quietConnections = 1
    public var durationSeconds = 10.0
    public var warmupSeconds = 2.0
    public var timeoutSeconds = 10.0
    /// The goal: the quiet app's p99 under the flood at most this multiple of its p99 alone.
    public var goalRatio = 1.5
    /// Rounds of (quiet alone, quiet under the flood): on a shared machine the load of
    /// others drifts, so each round compares two neighbouring windows and the median is kept.
    public var rounds = 3

    public init() {}

    /// Checks the knobs; the message names the flag.
    public func validate() throws(ScenarioError) {
        guard quietRate > 0, quietRate <= 1_000_000 else { throw ScenarioError("--quiet-rate must be > 0 and at most 1,000,000") }
        guard floodFactor > 0, floodFactor <= 100 else { throw ScenarioError("--flood-factor must be > 0 and at most 100") }
        if let capacity, !(capacity > 0) { throw ScenarioError("--capacity must be above 0") }
        guard noisyApp != quietApp else { throw ScenarioError("the noisy and the quiet app must differ") }
        guard rounds >= 1, rounds <= 100 else { throw ScenarioError("--rounds must be 1...100") }
        guard durationSeconds > 0, warmupSeconds >= 0, capacitySeconds > 0, timeoutSeconds > 0 else {
            throw ScenarioError("durations must be above 0 (warm-up at least 0)")
        }
    }

    func phase(_ name: String, app: String) -> Scenario {
        var s = Scenario()
        s.name = name
        s.appID = app
        s.mix = [MixEntry(.registerToken, 1)]
        // RegisterToken needs no activities: the setup registers only the app's push-to-start
        // token, one call, instead of hundreds that would themselves meet the app's limit.
        s.activitiesPerApp = 1
        s.tokensPerActivity = 0
        s.stop = .duration(seconds: durationSeconds)
        s.warmupSeconds = warmupSeconds
        s.timeoutSeconds = timeoutSeconds
        return s
    }

    var capacityRun: Scenario {
        var s = phase("overload-capacity", app: noisyApp)
        s.shape = .closed(connections: capacityConnections, depth: capacityDepth)
        s.stop = .duration(seconds: capacitySeconds)
        return s
    }

    var quietRun: Scenario {
        var s = phase("overload-quiet", app: quietApp)
        s.shape = .open(rate: quietRate, connections: quietConnections, maxOutstanding: 10_000)
        return s
    }

    func floodRun(capacity: Double) -> Scenario {
        var s = phase("overload-noisy", app: noisyApp)
        s.shape = .open(rate: capacity * floodFactor, connections: noisyConnections, maxOutstanding: 10_000)
        return s
    }
}

/// What the phases measured. Latencies in microseconds, from the intended send time.
public struct OverloadReport: Sendable, Codable {
    public struct Side: Sendable, Codable {
        public var askedRate: Double
        /// What the generator managed to send per second (below `askedRate` when its own
        /// thread could not keep up, or `max_outstanding` held calls back).
        public var achievedRate: Double
        /// Calls held back by `max_outstanding` (sent late).
        public var late: UInt64
        public var sent: UInt64
        public var ok: UInt64
        /// OK replies per second: of sending, in open loop; of the window, in closed loop.
        public var okPerSecond: Double
        public var statuses: [String: UInt64]
        /// From the intended send time (what the app sees, its generator's lag included).
        public var latencyUs: LatencySummary
        /// From the actual send (the server's part, without the generator's lag).
        public var serviceTimeUs: LatencySummary
        /// Actual minus intended send time: the generator's own lag on a busy machine.
        public var sendLagUs: LatencySummary?
        /// From the actual send, of the calls refused RESOURCE_EXHAUSTED or UNAVAILABLE.
        public var refusalLatencyUs: LatencySummary?
        public var sampleErrors: [String]

        init(_ r: BenchReport) {
            askedRate = r.askedRate ?? r.achievedRate
            achievedRate = r.achievedRate
            late = r.late
            sent = r.sent
            ok = r.ok
            // Open loop: per second of sending. The report's own figure divides by the
            // scheduled window, which a generator held back by `max_outstanding` overruns.
            okPerSecond = r.mode == "open" && r.sent > 0 ? r.achievedRate * Double(r.ok) / Double(r.sent) : r.throughput
            statuses = r.rpcs.reduce(into: [:]) { all, rpc in for (k, v) in rpc.statuses { all[k, default: 0] += v } }
            latencyUs = r.latencyUs
            serviceTimeUs = r.serviceTimeUs
            sendLagUs = r.sendLagUs
            refusalLatencyUs = r.refusalLatencyUs
            sampleErrors = r.sampleErrors
        }

        /// Calls answered RESOURCE_EXHAUSTED or UNAVAILABLE.
        public var refused: UInt64 { (statuses["RESOURCE_EXHAUSTED"] ?? 0) + (statuses["UNAVAILABLE"] ?? 0) }

        /// ``refused`` as a fraction of the calls sent.
        public var refusalRate: Double { sent == 0 ? 0 : Double(refused) / Double(sent) }
    }

    /// One round: the quiet app alone, then the quiet app under the flood, a few seconds apart.
    public struct Round: Sendable, Codable {
        public var quietAlone: Side
        public var quietFlood: Side
        public var noisyFlood: Side
        /// Quiet p99 under the flood / quiet p99 alone, in this round.
        public var quietP99Ratio: Double
        /// The same from the actual send: the server's part, without the generators' lag.
        public var quietServiceP99Ratio: Double
        public var serverCPUPercentDuringFlood: Double?
        /// The server's CPU during the flood per noisy call answered (mostly refusals; the
        /// quiet app's calls are in it too): what refusing costs, at most.
        public var serverCPUUsPerNoisyCall: Double?
    }

    public var description: String
    public var capacity: Double
    /// Whether the capacity was measured (phase 1) or given.
    public var capacityMeasured: Bool
    public var capacityP99Us: Double?
    public var rounds: [Round]
    /// The median of the rounds' ratios: each compares two windows a few seconds apart,
    /// so a neighbour's build that disturbs one round does not decide the result.
    public var quietP99Ratio: Double
    /// The round whose ratio is the median (the lower middle one for an even count): its
    /// figures are the ones quoted.
    public var medianRound: Int
    /// Refused calls of the noisy app over every flood, as a fraction of those it sent.
    public var noisyRefusalRate: Double
    public var goalRatio: Double
    public var goalMet: Bool
    /// The server's resident memory: before the first flood, the most sampled during the
    /// floods (every 250 ms), after the last one, and the process's lifetime peak (VmHWM).
    public var serverRSSBeforeFloodBytes: UInt64?
    public var serverRSSMaxDuringFloodBytes: UInt64?
    public var serverRSSAfterFloodBytes: UInt64?
    public var serverPeakRSSBytes: UInt64?

    public var quoted: Round { rounds[medianRound] }

    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data("{}".utf8), as: UTF8.self)
    }

    public func table() -> String {
        func ms(_ us: Double) -> String { fmt(us / 1000, 2) }
        func mib(_ b: UInt64?) -> String { b.map { "\($0 / 1_048_576) MiB" } ?? "n/a" }
        var lines = [description]
        lines.append(
            "capacity (noisy app alone, closed loop): \(formatCount(capacity)) calls/s"
                + (capacityMeasured ? "" : " (given)") + (capacityP99Us.map { ", p99 \(ms($0)) ms" } ?? ""))
        for (i, r) in rounds.enumerated() {
            let refusal = r.noisyFlood.refusalLatencyUs.map { ", refusals answered in p50 \(ms($0.p50)) p99 \(ms($0.p99)) ms" } ?? ""
            lines.append(
                "round \(i + 1)\(i == medianRound ? " (median)" : ""): quiet alone p50 \(ms(r.quietAlone.latencyUs.p50)) "
                    + "p99 \(ms(r.quietAlone.latencyUs.p99)) ms (ok \(r.quietAlone.ok) of \(r.quietAlone.sent)); under the flood p50 "
                    + "\(ms(r.quietFlood.latencyUs.p50)) p99 \(ms(r.quietFlood.latencyUs.p99)) ms (from the send p99 "
                    + "\(ms(r.quietFlood.serviceTimeUs.p99)) ms; ok \(r.quietFlood.ok) of \(r.quietFlood.sent)); "
                    + "ratio \(fmt(r.quietP99Ratio, 2)) (from the send \(fmt(r.quietServiceP99Ratio, 2))); "
                    + "noisy \(formatCount(r.noisyFlood.askedRate))/s asked, \(formatCount(r.noisyFlood.achievedRate))/s sent, "
                    + "\(formatCount(r.noisyFlood.okPerSecond)) OK/s, refused \(fmt(r.noisyFlood.refusalRate * 100, 1))%\(refusal)"
                    + (r.serverCPUPercentDuringFlood.map { "; server CPU \(fmt($0, 0))% of a core" } ?? ""))
        }
        lines.append(
            "quiet p99 flood / alone, median of \(rounds.count) round(s): \(fmt(quietP99Ratio, 2)) "
                + "(goal ≤ \(fmt(goalRatio, 2)): \(goalMet ? "met" : "NOT met")); "
                + "noisy refused \(fmt(noisyRefusalRate * 100, 1))% overall")
        lines.append(
            "server RSS: \(mib(serverRSSBeforeFloodBytes)) before the floods, at most \(mib(serverRSSMaxDuringFloodBytes)) during them, "
                + "\(mib(serverRSSAfterFloodBytes)) after; lifetime peak \(mib(serverPeakRSSBytes))")
        for e in quoted.quietFlood.sampleErrors { lines.append("quiet error: \(e)") }
        return lines.joined(separator: "\n")
    }
}

/// Runs ``OverloadScenario``'s phases, each with its own event-loop threads.
public struct OverloadRun: Sendable {
    public let scenario: OverloadScenario
    let client: LiveRelayClient.Configuration
    let logger: Logger
    let serverPID: Int32?
    let progress: (@Sendable (String) -> Void)?

    public init(
        scenario: OverloadScenario, client: LiveRelayClient.Configuration, logger: Logger, serverPID: Int32?,
        progress: (@Sendable (String) -> Void)? = nil
    ) {
        self.scenario = scenario
        self.client = client
        self.logger = logger
        self.serverPID = serverPID
        self.progress = progress
    }

    public func run() async throws -> OverloadReport {
        let s = scenario
        var capacity = s.capacity ?? 0
        var capacityP99: Double?
        if s.capacity == nil {
            let r = try await phase(s.capacityRun)
            capacity = r.throughput
            capacityP99 = r.latencyUs.p99
            guard capacity > 0 else { throw BenchError("the capacity run had no OK reply: \(r.sampleErrors.joined(separator: "; "))") }
        }
        let flood = s.floodRun(capacity: capacity)
        var rounds: [OverloadReport.Round] = []
        var before: UInt64?
        var maxDuring: UInt64?
        for _ in 0..<s.rounds {
            let alone = try await phase(s.quietRun)
            if before == nil { before = serverPID.flatMap { processMemory(pid: $0)?.rss } }
            let sampler = RSSSampler(pid: serverPID)
            async let noisyReport = phase(flood)
            async let quietReport = phase(s.quietRun)
            let (noisy, quiet) = try await (noisyReport, quietReport)
            if let sampled = await sampler.stop() { maxDuring = max(maxDuring ?? 0, sampled) }
            rounds.append(
                OverloadReport.Round(
                    quietAlone: OverloadReport.Side(alone), quietFlood: OverloadReport.Side(quiet), noisyFlood: OverloadReport.Side(noisy),
                    quietP99Ratio: alone.latencyUs.p99 > 0 ? quiet.latencyUs.p99 / alone.latencyUs.p99 : .infinity,
                    quietServiceP99Ratio: alone.serviceTimeUs.p99 > 0 ? quiet.serviceTimeUs.p99 / alone.serviceTimeUs.p99 : .infinity,
                    serverCPUPercentDuringFlood: noisy.serverCPUPercent, serverCPUUsPerNoisyCall: noisy.serverCPUUsPerCall))
        }
        let after = serverPID.flatMap { processMemory(pid: $0) }
        let order = rounds.indices.sorted { rounds[$0].quietP99Ratio < rounds[$1].quietP99Ratio }
        let middle = order[(order.count - 1) / 2]
        let ratio =
            order.count % 2 == 1
            ? rounds[middle].quietP99Ratio : (rounds[middle].quietP99Ratio + rounds[order[order.count / 2]].quietP99Ratio) / 2
        let sent = rounds.reduce(UInt64(0)) { $0 + $1.noisyFlood.sent }
        let refused = rounds.reduce(UInt64(0)) { $0 + $1.noisyFlood.refused }
        return OverloadReport(
            description:
                "overload isolation: \(s.noisyApp) floods at \(fmt(s.floodFactor, 1))x capacity "
                + "(open loop, \(s.noisyConnections) connections) while \(s.quietApp) sends \(formatCount(s.quietRate))/s "
                + "(open loop, \(s.quietConnections) connection(s)); "
                + "RegisterToken; \(s.rounds) round(s) of \(formatSeconds(s.durationSeconds)) alone then "
                + "\(formatSeconds(s.durationSeconds)) under the flood, each after \(formatSeconds(s.warmupSeconds)) warm-up",
            capacity: capacity, capacityMeasured: s.capacity == nil, capacityP99Us: capacityP99,
            rounds: rounds, quietP99Ratio: ratio, medianRound: middle,
            noisyRefusalRate: sent == 0 ? 0 : Double(refused) / Double(sent), goalRatio: s.goalRatio, goalMet: ratio <= s.goalRatio,
            serverRSSBeforeFloodBytes: before, serverRSSMaxDuringFloodBytes: maxDuring,
            serverRSSAfterFloodBytes: after?.rss, serverPeakRSSBytes: after?.peak)
    }

    /// One scenario on a group of its own (one thread), shut down afterwards.
    private func phase(_ scenario: Scenario) async throws -> BenchReport {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let name = scenario.name
        let progress = self.progress
        progress?("\(name): \(scenario.shapeDescription)")
        var lines: (@Sendable (ProgressSnapshot) -> Void)?
        if let progress {
            lines = { (snapshot: ProgressSnapshot) -> Void in progress(name + " " + snapshot.line) }
        }
        let runner = BenchRunner(
            scenario: scenario, client: client, eventLoopGroup: group, logger: logger, serverPID: serverPID, progress: lines)
        let result: Result<BenchReport, any Error>
        do {
            result = .success(try await runner.run())
        } catch {
            result = .failure(error)
        }
        try? await group.shutdownGracefully()
        return try result.get()
    }
}

/// Reads a process's RSS every 250 ms until stopped; the largest reading is the answer.
private final class RSSSampler: Sendable {
    private let task: Task<UInt64?, Never>?

    init(pid: Int32?) {
        guard let pid else {
            task = nil
            return
        }
        task = Task {
            var largest: UInt64?
            while !Task.isCancelled {
                if let rss = processMemory(pid: pid)?.rss { largest = max(largest ?? 0, rss) }
                try? await Task.sleep(nanoseconds: 250_000_000)
            }
            return largest
        }
    }

    func stop() async -> UInt64? {
        task?.cancel()
        return await task?.value
    }
}
