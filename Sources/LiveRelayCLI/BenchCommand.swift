import ArgumentParser
import Foundation
import LiveRelayBench
import LiveRelayClient
import LiveRelayTLS
import Logging
import NIOCore
import NIOPosix

/// `liverelay bench`: load generation against a running server (see docs/BENCHMARKS.md,
/// "liverelay bench, the load generator"). In the same binary as the server so that a deployment can be sized
/// with nothing else installed.
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Load a LiveRelay server (open or closed loop) and report latencies per RPC.",
        subcommands: [BenchRun.self, BenchGate.self, BenchOverload.self, BenchBroadcast.self],
        defaultSubcommand: BenchRun.self
    )
}

/// Where the server is. Defaults match the rest of the CLI (dev setup's certificate, LIVERELAY_API_KEY).
struct BenchServerOptions: ParsableArguments {
    @Option(help: "The server's host name or IP address.") var host = "127.0.0.1"
    @Option(help: "The server's port.") var port = 7443
    @Option(help: "PEM file of the CA to trust (default: \(DevSetup.defaultDataDirectory)/cert.pem when it exists).") var caFile: String?
    @Option(help: "The API key (default: the LIVERELAY_API_KEY environment variable).") var apiKey: String?
    @Flag(help: "Plain TCP, for a server without TLS.") var plaintext = false
    @Option(help: "Event-loop threads of the load generator.") var threads = 1
    @Option(help: "PID of the server, when on this machine: its CPU per call is reported.") var serverPid: Int32?

    func clientConfiguration(port: Int? = nil) throws -> LiveRelayClient.Configuration {
        guard let key = apiKey ?? ProcessInfo.processInfo.environment["LIVERELAY_API_KEY"], !key.isEmpty else {
            throw ValidationError("no API key: pass --api-key or set LIVERELAY_API_KEY (liverelay serve prints one on its first start)")
        }
        let tls: LiveRelayClient.TLS?
        if plaintext {
            tls = nil
        } else if let caFile {
            tls = .trusting(caFile: caFile)
        } else if FileManager.default.fileExists(atPath: DevSetup.defaultDataDirectory + "/cert.pem") {
            tls = .trusting(caFile: DevSetup.defaultDataDirectory + "/cert.pem")
        } else {
            tls = .systemTrust
        }
        return LiveRelayClient.Configuration(host: host, port: port ?? self.port, tls: tls, apiKey: key, clientName: "liverelay-bench")
    }
}

var benchLogger: Logger {
    var logger = Logger(label: "liverelay.bench")
    logger.logLevel = .critical
    return logger
}

func writeStandardError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

struct BenchRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run one scenario (the default subcommand: `liverelay bench --rate 5000 ...`).",
        discussion: """
            A scenario comes from --scenario FILE (JSON; keys: name, mode, rate, connections, depth,
            max_outstanding, mix, apps, app_id, activities_per_app, tokens_per_activity,
            content_state_bytes, duration_seconds, requests, warmup_seconds, timeout_seconds) and/or
            flags, which override the file. --rate selects open loop (latency from each request's
            intended send time); otherwise closed loop (connections x depth callers).
            A progress line goes to stderr every second; the final table to stdout (to stderr with --json,
            which prints the report as JSON on stdout).
            """
    )

    @OptionGroup var server: BenchServerOptions
    @Option(help: "Scenario JSON file.") var scenario: String?
    @Option(help: "Scenario name for the report.") var name: String?
    @Option(help: "open or closed (default: open when --rate is given).") var mode: String?
    @Option(help: "Open loop: requests per second.") var rate: Double?
    @Option(help: "Connections (default 4).") var connections: Int?
    @Option(help: "Closed loop: calls in flight per connection (default 32).") var depth: Int?
    @Option(help: "Open loop: bound on calls in flight; later requests wait and count as late (default 10000).") var maxOutstanding: Int?
    @Option(help: "RPC mix with weights, e.g. update=4,register=1,start=1,end=1,ping=1 (default register).") var mix: String?
    @Option(help: "Number of apps (default 1: --app-id itself).") var apps: Int?
    @Option(help: "App id, or prefix when --apps > 1 (default dev.app).") var appId: String?
    @Option(help: "Activities per app created in the setup phase (default 100).") var activities: Int?
    @Option(help: "Update tokens per activity registered in the setup phase (default 1).") var tokensPerActivity: Int?
    @Option(help: "Content-state JSON size in bytes for Start/Update/End (default 200).") var payloadBytes: Int?
    @Option(help: "Measured seconds (default 10).") var duration: Double?
    @Option(help: "Measured request count, instead of --duration.") var requests: Int?
    @Option(help: "Warm-up seconds, not recorded (default 2).") var warmup: Double?
    @Option(help: "Per-call timeout in seconds (default 10).") var timeout: Double?
    @Flag(
        help:
            "Start, Update and End wait until APNs answered every push; the report adds the pushes' account, delivered pushes/s and the server's memory."
    )
    var waitForDelivery = false
    @Flag(help: "Print the report as JSON on stdout.") var json = false
    @Flag(help: "No progress lines.") var quiet = false

    func run() async throws {
        let scenario: Scenario
        do {
            scenario = try resolveScenario()
        } catch let error as ScenarioError {
            throw ValidationError(error.description)
        }
        let report = try await runBench(scenario, server: server, quiet: quiet)
        if json {
            writeStandardError(report.table())
            writeStandardOutput(report.json())
        } else {
            writeStandardOutput(report.table())
        }
    }

    func resolveScenario() throws -> Scenario {
        var spec = ScenarioSpec()
        if let path = scenario {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ScenarioError("cannot read the scenario file \(path)")
            }
            spec = try ScenarioSpec(json: data, source: path)
        }
        var flags = ScenarioSpec()
        flags.name = name
        if let mode {
            guard let m = ScenarioSpec.Mode(rawValue: mode) else { throw ScenarioError("--mode must be open or closed, got \"\(mode)\"") }
            flags.mode = m
        }
        flags.rate = rate
        flags.connections = connections
        flags.depth = depth
        flags.maxOutstanding = maxOutstanding
        flags.mix = try mix.map { try ScenarioSpec.parseMix($0) }
        flags.apps = apps
        flags.appID = appId
        flags.activitiesPerApp = activities
        flags.tokensPerActivity = tokensPerActivity
        flags.contentStateBytes = payloadBytes
        flags.durationSeconds = duration
        flags.requests = requests
        flags.warmupSeconds = warmup
        flags.timeoutSeconds = timeout
        if waitForDelivery { flags.waitForDelivery = true }
        // A --rate on the command line over a closed-loop file means "run it open loop".
        if rate != nil, mode == nil { flags.mode = .open; spec.depth = nil }
        return try spec.overridden(by: flags).resolve()
    }
}

/// Runs one scenario with its own event-loop group; progress lines go to stderr.
func runBench(
    _ scenario: Scenario, server: BenchServerOptions, port: Int? = nil, serverPID: Int32? = nil, quiet: Bool
) async throws -> BenchReport {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, server.threads))
    let configuration = try server.clientConfiguration(port: port)
    let name = scenario.name
    var progress: (@Sendable (ProgressSnapshot) -> Void)?
    if !quiet {
        progress = { (snapshot: ProgressSnapshot) -> Void in
            let line: String = name + " " + snapshot.line
            writeStandardError(line)
        }
    }
    let runner = BenchRunner(
        scenario: scenario, client: configuration, eventLoopGroup: group, logger: benchLogger,
        serverPID: serverPID ?? server.serverPid, progress: progress)
    if !quiet { writeStandardError("\(scenario.name): \(scenario.shapeDescription)") }
    let result: Result<BenchReport, any Error>
    do {
        result = .success(try await runner.run())
    } catch {
        result = .failure(error)
    }
    try? await group.shutdownGracefully()
    switch result {
    case .success(let report): return report
    case .failure(let error as BenchError): throw CLIError(error.description)
    case .failure(let error): throw error
    }
}

struct BenchGate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gate",
        abstract: "CI regression gate: null service vs a realistic mix, as a ratio, against a committed baseline.",
        discussion: """
            Needs two servers sharing one API key and CA: `liverelay serve --null-service` on --null-port and
            `liverelay serve --store memory` on --port (scripts/bench.sh gate starts both). Each round runs
            the null scenario then the realistic one; the realistic/null throughput ratio (median of the
            rounds) is compared with the baseline's. Fails (exit 1) only when it dropped by 30% or more.
            """
    )

    @OptionGroup var server: BenchServerOptions
    @Option(help: "Port of the null-service server.") var nullPort: Int
    @Option(help: "PID of the null-service server (for its CPU per call).") var nullPid: Int32?
    @Option(help: "The baseline file.") var baseline = "Benchmarks/bench-baseline.json"
    @Option(help: "Rounds (null + realistic each).") var rounds = 3
    @Option(help: "Measured seconds per run.") var seconds = 2.0
    @Flag(help: "Write the measured ratios as the new baseline instead of comparing.") var writeBaseline = false
    @Flag(help: "No progress lines.") var quiet = false

    func run() async throws {
        let (nullScenario, realistic) = Gate.scenarios(seconds: seconds)
        var nullRates: [Double] = [], realisticRates: [Double] = []
        for round in 1...max(1, rounds) {
            let n = try await runBench(nullScenario, server: server, port: nullPort, serverPID: nullPid ?? -1, quiet: quiet)
            let r = try await runBench(realistic, server: server, quiet: quiet)
            for report in [n, r] where report.errors > 0 {
                throw CLIError("gate: \(report.scenario) had \(report.errors) errors: \(report.sampleErrors.joined(separator: "; "))")
            }
            nullRates.append(n.throughput)
            realisticRates.append(r.throughput)
            writeStandardError(
                "gate round \(round): null \(Int(n.throughput))/s, realistic \(Int(r.throughput))/s, ratio \(r.throughput / max(1, n.throughput))"
            )
        }
        let ratio = Gate.ratio(scenario: realisticRates, null: nullRates)
        let nullMedian = Gate.ratio(scenario: nullRates, null: nullRates.map { _ in 1 })
        let realisticMedian = Gate.ratio(scenario: realisticRates, null: realisticRates.map { _ in 1 })
        if writeBaseline {
            let file = GateBaseline(
                note:
                    "liverelay bench gate --write-baseline, \(rounds) rounds of \(seconds) s, \(ISO8601DateFormatter().string(from: Date())). "
                    + "Ratios to the null service in the same run are compared; absolute figures are for information.",
                nullThroughput: nullMedian.rounded(),
                scenarios: ["realistic": .init(throughput: realisticMedian.rounded(), ratioToNull: (ratio * 10000).rounded() / 10000)])
            try file.json().write(toFile: baseline, atomically: true, encoding: .utf8)
            writeStandardOutput("wrote \(baseline): realistic/null \(ratio)")
            return
        }
        let base = try GateBaseline.load(path: baseline)
        let results = try Gate.evaluate(baseline: base, measuredRatios: ["realistic": ratio])
        writeStandardOutput("null service: \(Int(nullMedian))/s (baseline \(Int(base.nullThroughput))/s, information only)")
        for r in results {
            writeStandardOutput(
                "\(r.scenario): ratio to null \(String(format: "%.4f", r.measuredRatio)) vs baseline \(String(format: "%.4f", r.baselineRatio)) "
                    + "(\(String(format: "%+.1f", r.change * 100))%): \(r.passed ? "ok" : "FAIL (drop of \(Int(base.maxDrop * 100))% or more)")"
            )
        }
        if results.contains(where: { !$0.passed }) { throw ExitCode.failure }
    }
}

struct BenchOverload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "overload",
        abstract: "Overload isolation: one app floods at a multiple of the capacity while another sends steadily.",
        discussion: """
            RegisterToken against one server: the noisy app alone, closed loop
            (--capacity-connections x --capacity-depth in flight, at most what admission lets one
            app have), gives the capacity (skipped with --capacity); then --rounds times the quiet
            app alone, open loop at --quiet-rate, for its reference latencies, and both at once,
            the noisy app open loop at --flood-factor x the capacity. The result is the median
            round's ratio of the quiet app's p99 under the flood to its p99 alone.
            Reports the quiet app's p50/p99 alone and under the flood, the noisy app's refusal
            rate (RESOURCE_EXHAUSTED, UNAVAILABLE) and how fast refusals came back, and, with
            --server-pid, the server's memory through the flood. The API key must be allowed
            for both apps (an operator key: "all_apps": true).
            """
    )

    @OptionGroup var server: BenchServerOptions
    @Option(help: "The flooding app.") var noisyApp = "noisy.app"
    @Option(help: "The steady app.") var quietApp = "quiet.app"
    @Option(help: "The quiet app's calls per second (open loop).") var quietRate = 500.0
    @Option(help: "The noisy app's rate as a multiple of the capacity.") var floodFactor = 3.0
    @Option(help: "The capacity in calls/s, instead of measuring it.") var capacity: Double?
    @Option(help: "Capacity run: connections.") var capacityConnections = 4
    @Option(help: "Capacity run: calls in flight per connection (4 x 64: what admission lets an app alone have by default).")
    var capacityDepth = 64
    @Option(help: "Capacity run: measured seconds.") var capacitySeconds = 5.0
    @Option(help: "Connections of the noisy app.") var noisyConnections = 4
    @Option(help: "Rounds of (quiet alone, quiet under the flood); the median round's ratio is the result.") var rounds = 3
    @Option(help: "Measured seconds of each quiet run and of each flood.") var duration = 10.0
    @Option(help: "Warm-up seconds before each measured window.") var warmup = 2.0
    @Option(help: "Per-call timeout in seconds.") var timeout = 10.0
    @Flag(help: "Print the report as JSON on stdout (the summary goes to stderr).") var json = false
    @Flag(help: "No progress lines.") var quiet = false

    func run() async throws {
        var scenario = OverloadScenario()
        scenario.noisyApp = noisyApp
        scenario.quietApp = quietApp
        scenario.quietRate = quietRate
        scenario.floodFactor = floodFactor
        scenario.capacity = capacity
        scenario.capacityConnections = capacityConnections
        scenario.capacityDepth = capacityDepth
        scenario.capacitySeconds = capacitySeconds
        scenario.noisyConnections = noisyConnections
        scenario.rounds = rounds
        scenario.durationSeconds = duration
        scenario.warmupSeconds = warmup
        scenario.timeoutSeconds = timeout
        do {
            try scenario.validate()
        } catch {
            throw ValidationError(error.description)
        }
        var progress: (@Sendable (String) -> Void)?
        if !quiet { progress = { @Sendable (line: String) -> Void in writeStandardError(line) } }
        let run = OverloadRun(
            scenario: scenario, client: try server.clientConfiguration(), logger: benchLogger, serverPID: server.serverPid,
            progress: progress)
        let report: OverloadReport
        do {
            report = try await run.run()
        } catch let error as BenchError {
            throw CLIError(error.description)
        }
        if json {
            writeStandardError(report.table())
            writeStandardOutput(report.json())
        } else {
            writeStandardOutput(report.table())
        }
    }
}

struct BenchBroadcast: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcast",
        abstract: "A broadcast channel update (one APNs POST) vs the same update fanned out to many tokens.",
        discussion: """
            Against a server whose app pushes to an APNs (a mock) that implements broadcast channels:
            creates a no-storage channel of --app-id, starts an activity subscribed to it (waiting for
            delivery), then sends --broadcast-calls UpdateActivity calls to the channel only, one at a
            time, each waiting for delivery: its latency is the time until APNs answered the broadcast
            POST. Then registers --tokens update tokens of a second activity (pipelined:
            --register-connections x --register-depth in flight) and sends --fanout-calls
            UpdateActivity calls to it, one at a time, each waiting until APNs answered every token's
            push. Deletes the channel at the end, also after a failure. The app's queue must hold
            --tokens pushes (the development app's holds 100,000).
            """
    )

    @OptionGroup var server: BenchServerOptions
    @Option(help: "The app (its key must be allowed to create channels).") var appId = "dev.app"
    @Option(help: "sandbox or production: the environment of the channel and the tokens.") var environment = "sandbox"
    @Option(help: "Measured UpdateActivity calls to the channel.") var broadcastCalls = 200
    @Option(help: "Unmeasured UpdateActivity calls to the channel first.") var warmupCalls = 5
    @Option(help: "Update tokens of the fan-out activity.") var tokens = 100_000
    @Option(help: "Measured UpdateActivity calls to the fan-out activity.") var fanoutCalls = 10
    @Option(help: "Connections registering the fan-out's tokens.") var registerConnections = 4
    @Option(help: "RegisterToken calls in flight per connection while registering.") var registerDepth = 32
    @Option(help: "Content-state JSON size in bytes.") var payloadBytes = 200
    @Option(help: "Per-call timeout in seconds (a fan-out waits for every token's APNs answer).") var timeout = 120.0
    @Flag(help: "Print the report as JSON on stdout (the summary goes to stderr).") var json = false
    @Flag(help: "No progress lines.") var quiet = false

    func run() async throws {
        var scenario = BroadcastScenario()
        scenario.appID = appId
        switch environment {
        case "sandbox": scenario.environment = .sandbox
        case "production": scenario.environment = .production
        default: throw ValidationError("--environment must be sandbox or production, got \"\(environment)\"")
        }
        scenario.broadcastCalls = broadcastCalls
        scenario.warmupCalls = warmupCalls
        scenario.fanoutTokens = tokens
        scenario.fanoutCalls = fanoutCalls
        scenario.registerConnections = registerConnections
        scenario.registerDepth = registerDepth
        scenario.contentStateBytes = payloadBytes
        scenario.timeoutSeconds = timeout
        do {
            try scenario.validate()
        } catch {
            throw ValidationError(error.description)
        }
        var progress: (@Sendable (String) -> Void)?
        if !quiet { progress = { @Sendable (line: String) -> Void in writeStandardError("broadcast: " + line) } }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, server.threads))
        let result: Result<BroadcastReport, any Error>
        do {
            let run = BroadcastRun(
                scenario: scenario, client: try server.clientConfiguration(), eventLoopGroup: group, logger: benchLogger,
                serverPID: server.serverPid, progress: progress)
            result = .success(try await run.run())
        } catch {
            result = .failure(error)
        }
        try? await group.shutdownGracefully()
        let report: BroadcastReport
        switch result {
        case .success(let r): report = r
        case .failure(let error as BenchError): throw CLIError(error.description)
        case .failure(let error): throw error
        }
        if json {
            writeStandardError(report.table())
            writeStandardOutput(report.json())
        } else {
            writeStandardOutput(report.table())
        }
        // Every call must have succeeded with every push delivered, or the figures measure something else.
        if !report.clean { throw ExitCode.failure }
    }
}
