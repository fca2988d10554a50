import LiveRelayClient
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// A failure of the run itself (unreachable server, failed setup), not of a measured call.
public struct BenchError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Runs one scenario against one server through `LiveRelayClient`'s low-level
/// `call(_:payload:timeout:idempotent:)`: replies complete on the connection's event loop,
/// so the generator adds no Swift-concurrency hop per call to what it measures.
///
/// Each connection is its own client of one connection, so "connections × depth" means
/// exactly that many calls pipelined per connection. Client retries are off: a load
/// generator reports what happened instead of resending behind the numbers.
public final class BenchRunner: @unchecked Sendable {
    public let scenario: Scenario
    public let workload: Workload
    let clients: [LiveRelayClient]
    let group: any EventLoopGroup
    let loop: any EventLoop
    let recorder: Recorder
    let progress: (@Sendable (ProgressSnapshot) -> Void)?
    let timeout: TimeAmount
    let serverPID: Int32?

    /// - Parameters:
    ///   - client: where the server is and how to authenticate; pool, retry and limit
    ///     settings are the runner's.
    ///   - endReserve: activities the setup creates for EndActivity to end; nil estimates it.
    ///   - serverPID: a server process on this machine whose CPU time over the window is
    ///     reported (per request, the figure that survives a noisy shared machine).
    ///   - progress: called about once a second with the figures of that second.
    public init(
        scenario: Scenario, client: LiveRelayClient.Configuration, eventLoopGroup: any EventLoopGroup, logger: Logger,
        endReserve: Int? = nil, serverPID: Int32? = nil, progress: (@Sendable (ProgressSnapshot) -> Void)? = nil
    ) {
        var probe: (@Sendable () -> Double?)?
        if let serverPID { probe = { processCPUSeconds(pid: serverPID) } }
        self.recorder = Recorder(cpuProbe: probe)
        self.serverPID = serverPID
        self.scenario = scenario
        self.group = eventLoopGroup
        self.loop = eventLoopGroup.next()
        self.progress = progress
        self.timeout = .nanoseconds(Int64(scenario.timeoutSeconds * 1e9))
        self.workload = Workload(scenario: scenario, runTag: Workload.makeRunTag(), endReserve: endReserve ?? Self.estimatedEnds(scenario))
        let inFlight: Int
        switch scenario.shape {
        case let .open(_, _, maxOutstanding): inFlight = maxOutstanding
        case let .closed(_, depth): inFlight = depth
        }
        var configuration = client
        configuration.connections = 1
        configuration.retryPolicy = LiveRelayClient.RetryPolicy(maxAttempts: 1, retryIdempotentCalls: false)
        configuration.defaultTimeout = Duration(timeout)
        // The client counts a finished call as pending until its connection's read batch
        // ends (one lock per batch, not per reply), and a caller may already have sent its
        // next call by then: up to twice the callers' own bound, never a refusal of ours.
        configuration.maxPendingCalls = 2 * (inFlight + Self.setupConcurrency) + 16
        configuration.shutdownGracePeriod = .seconds(2)
        clients = (0..<scenario.shape.connections).map { _ in
            LiveRelayClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        }
    }

    static let setupConcurrency = 256

    /// EndActivity calls the run will probably make, capped: each reserve entry is a setup call.
    static func estimatedEnds(_ s: Scenario) -> Int {
        let share = Double(s.weight(of: .endActivity)) / Double(max(1, s.totalWeight))
        guard share > 0 else { return 0 }
        let calls: Double
        switch (s.shape, s.stop) {
        case let (.open(rate, _, _), .duration(seconds)): calls = rate * (seconds + s.warmupSeconds)
        case let (.open(rate, _, _), .requests(n)): calls = Double(n) + rate * s.warmupSeconds
        case let (.closed, .requests(n)): calls = Double(n) * 2
        case (.closed, .duration): calls = 40_000
        }
        return min(40_000, Int(calls * share * 1.1) + 10)
    }

    /// Setup, warm-up, the measured window, drain; then the report. Always shuts the clients down.
    public func run() async throws -> BenchReport {
        let ticker = loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [recorder, progress] _ in
            progress?(recorder.snapshot())
        }
        defer { ticker.cancel() }
        do {
            let report = try await runPhases()
            await shutdown()
            return report
        } catch {
            await shutdown()
            throw error
        }
    }

    private func shutdown() async {
        for client in clients { await client.shutdown() }
    }

    private func runPhases() async throws -> BenchReport {
        // Open every connection (TCP, TLS, HELLO) before any clock starts.
        for client in clients {
            do {
                _ = try await client.call(.ping, payload: ByteBuffer(), timeout: .seconds(10), idempotent: true).get()
            } catch {
                throw BenchError("cannot reach the server at \(client.configuration.host):\(client.configuration.port): \(error)")
            }
        }
        let setupStart = nowNanos()
        try await runSetup()
        let setupSeconds = Double(nowNanos() - setupStart) / 1e9
        recorder.setPhase(.warmup)
        let window: Double
        switch scenario.shape {
        case let .open(rate, _, maxOutstanding):
            window = try await runOpenLoop(rate: rate, maxOutstanding: maxOutstanding)
        case let .closed(_, depth):
            window = try await runClosedLoop(depth: depth)
        }
        return makeReport(windowSeconds: window, setupSeconds: setupSeconds)
    }

    // MARK: Setup

    private func runSetup() async throws {
        let count = workload.setupCount
        guard count > 0 else { return }
        let next = NIOLockedValueBox(0)
        let failure = NIOLockedValueBox<String?>(nil)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for worker in 0..<min(Self.setupConcurrency, count) {
                let client = clients[worker % clients.count]
                tasks.addTask { [workload, timeout] in
                    while true {
                        let i = next.withLockedValue { v -> Int in
                            defer { v += 1 }; return v
                        }
                        guard i < count, failure.withLockedValue({ $0 == nil }) else { return }
                        do {
                            _ = try await client.call(.registerToken, payload: workload.setupRequest(i), timeout: timeout, idempotent: true)
                                .get()
                        } catch {
                            failure.withLockedValue { if $0 == nil { $0 = "\(error)" } }
                        }
                    }
                }
            }
            try await tasks.waitForAll()
        }
        if let first = failure.withLockedValue({ $0 }) {
            throw BenchError("setup failed (registering the scenario's tokens, \(count) calls): \(first)")
        }
    }

    // MARK: Calls

    private func send(
        _ rpc: BenchRPC, on client: LiveRelayClient, measured: Bool, intended: UInt64, sent: UInt64,
        then: (@Sendable (LiveRelayClientError?, any EventLoop) -> Void)? = nil
    ) {
        let request = workload.request(rpc)
        let future = client.call(rpc.method, payload: request.payload, timeout: timeout, idempotent: rpc == .registerToken || rpc == .ping)
        future.whenComplete { [recorder, workload] result in
            switch result {
            case .success(let reply):
                if let started = request.started { workload.started(started) }
                if let summary = PushAccount.summary(of: rpc, reply: reply) { recorder.delivery(summary, measured: measured) }
                recorder.completed(rpc: rpc, measured: measured, intended: intended, sent: sent, status: .ok, error: nil)
                then?(nil, future.eventLoop)
            case .failure(let error):
                let clientError =
                    error as? LiveRelayClientError
                    ?? LiveRelayClientError(status: .unknown, message: "\(error)", processing: .mayHaveBeenProcessed)
                recorder.completed(
                    rpc: rpc, measured: measured, intended: intended, sent: sent, status: clientError.status,
                    error: "\(rpc.rawValue): \(clientError)")
                then?(clientError, future.eventLoop)
            }
        }
    }

    // MARK: Open loop

    /// Sends on the schedule from one event loop; returns the window length in seconds.
    private func runOpenLoop(rate: Double, maxOutstanding: Int) async throws -> Double {
        let start = nowNanos() + 5_000_000
        let schedule = ArrivalSchedule(startNanos: start, rate: rate)
        let warmupCount = scenario.warmupSeconds > 0 ? schedule.count(forSeconds: scenario.warmupSeconds) : 0
        let measuredCount: Int
        switch scenario.stop {
        case let .duration(seconds): measuredCount = schedule.count(forSeconds: seconds)
        case let .requests(n): measuredCount = n
        }
        let pump = OpenLoopPump(
            runner: self, schedule: schedule, warmupCount: warmupCount, total: warmupCount + measuredCount,
            maxOutstanding: maxOutstanding, giveUpAfter: UInt64(scenario.timeoutSeconds * 1e9))
        loop.execute { pump.pump() }
        try await pump.finished.futureResult.get()
        recorder.setPhase(.draining)
        try await recorder.whenDrained(on: loop).get()
        recorder.noteWindowEnd()
        unsentCount = pump.unsent
        return Double(measuredCount) / rate
    }

    private var unsentCount = 0

    /// The open-loop sender's state; touched only on `runner.loop`.
    private final class OpenLoopPump: @unchecked Sendable {
        let runner: BenchRunner
        let schedule: ArrivalSchedule
        let warmupCount: Int
        let total: Int
        let maxOutstanding: Int
        let giveUpAfter: UInt64
        let finished: EventLoopPromise<Void>
        var next = 0
        var blocked = false
        var mix: WeightedMix
        var connection = 0
        var unsent = 0

        init(runner: BenchRunner, schedule: ArrivalSchedule, warmupCount: Int, total: Int, maxOutstanding: Int, giveUpAfter: UInt64) {
            self.runner = runner
            self.schedule = schedule
            self.warmupCount = warmupCount
            self.total = total
            self.maxOutstanding = maxOutstanding
            self.giveUpAfter = giveUpAfter
            self.finished = runner.loop.makePromise()
            self.mix = WeightedMix(runner.scenario.mix)
        }

        /// Sends everything due, unless `maxOutstanding` calls are in flight: then the rest wait
        /// (polled every 0.5 ms) and count as late; their latency still starts at their due time.
        func pump() {
            let now = nowNanos()
            let wasBlocked = blocked
            blocked = false
            while next < total {
                let intended = schedule.intendedNanos(next)
                if intended > now { break }
                if runner.recorder.outstanding >= maxOutstanding {
                    blocked = true
                    break
                }
                if next == warmupCount { runner.recorder.setPhase(.measuring, at: intended) }
                let rpc = mix.next()
                let client = runner.clients[connection]
                connection = (connection + 1) % runner.clients.count
                let measured = next >= warmupCount
                runner.recorder.openLoopSend(rpc: rpc, measured: measured, intended: intended, at: now, late: wasBlocked)
                runner.send(rpc, on: client, measured: measured, intended: intended, sent: now)
                next += 1
            }
            if next >= total {
                finished.succeed()
                return
            }
            // A server that never frees a slot must not keep the run alive forever.
            if blocked, now > schedule.intendedNanos(total - 1) &+ giveUpAfter {
                unsent = total - max(next, warmupCount)
                finished.succeed()
                return
            }
            if blocked {
                runner.loop.scheduleTask(in: .microseconds(500)) { self.pump() }
            } else {
                runner.loop.scheduleTask(deadline: .uptimeNanoseconds(schedule.intendedNanos(next))) { self.pump() }
            }
        }
    }

    // MARK: Closed loop

    /// `depth` callers per connection; returns the window length in seconds.
    private func runClosedLoop(depth: Int) async throws -> Double {
        let mixBox = NIOLockedValueBox(WeightedMix(scenario.mix))
        func startCallers() {
            for client in clients {
                for _ in 0..<depth {
                    ClosedLoopCaller(runner: self, client: client, mix: mixBox).issue()
                }
            }
        }
        // Without a warm-up the first calls are measured ones: a run of a few long calls
        // (a 100k-token fan-out each) must not spend one of them unrecorded.
        let warm = scenario.warmupSeconds > 0
        if warm {
            startCallers()
            try await Task.sleep(nanoseconds: UInt64(scenario.warmupSeconds * 1e9))
        }
        let measureStart = nowNanos()
        if case let .requests(n) = scenario.stop { recorder.setBudget(n) }
        recorder.setPhase(.measuring, at: measureStart)
        if !warm { startCallers() }
        if case let .duration(seconds) = scenario.stop {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            recorder.setPhase(.draining)
        }
        try await recorder.whenDrained(on: loop).get()
        recorder.noteWindowEnd()
        let totals = recorder.totals()
        let end = totals.measureEnd ?? totals.lastCompletion
        return Double(max(end, measureStart + 1) - measureStart) / 1e9
    }

    private final class ClosedLoopCaller: @unchecked Sendable {
        let runner: BenchRunner
        let client: LiveRelayClient
        let mix: NIOLockedValueBox<WeightedMix>

        init(runner: BenchRunner, client: LiveRelayClient, mix: NIOLockedValueBox<WeightedMix>) {
            self.runner = runner
            self.client = client
            self.mix = mix
        }

        func issue() {
            let rpc = mix.withLockedValue { $0.next() }
            let now = nowNanos()
            guard let measured = runner.recorder.beginClosedLoopCall(rpc: rpc, at: now) else { return }
            runner.send(rpc, on: client, measured: measured, intended: now, sent: now) { error, loop in
                if let error, error.processing == .notProcessed {
                    // Refused locally or before reaching the server: back off instead of spinning.
                    loop.scheduleTask(in: .milliseconds(1)) { self.issue() }
                } else if error != nil {
                    // A failure may complete synchronously inside `call`: do not recurse.
                    loop.execute { self.issue() }
                } else {
                    // Replies arrive from the connection's read loop, never inside `call`.
                    self.issue()
                }
            }
        }
    }

    // MARK: Report

    private func makeReport(windowSeconds: Double, setupSeconds: Double) -> BenchReport {
        let t = recorder.totals()
        var all = RPCStats()
        for s in t.stats { all.add(s) }
        let mode: String
        var askedRate: Double?, depth: Int?, maxOutstanding: Int?
        let achieved: Double
        switch scenario.shape {
        case let .open(rate, _, bound):
            mode = "open"
            askedRate = rate
            maxOutstanding = bound
            achieved = all.sent > 1 && t.lastSend > t.firstSend ? Double(all.sent - 1) / (Double(t.lastSend - t.firstSend) / 1e9) : 0
        case let .closed(_, d):
            mode = "closed"
            depth = d
            achieved = Double(all.sent) / windowSeconds
        }
        var pushes: PushAccount?
        if t.pushes.calls > 0 {
            pushes = t.pushes
            pushes?.deliveredPerSecond = Double(t.pushes.delivered) / windowSeconds
        }
        let memory = serverPID.flatMap { processMemory(pid: $0) }
        return BenchReport(
            scenario: scenario.name, description: scenario.shapeDescription, mode: mode, askedRate: askedRate,
            connections: scenario.shape.connections, depth: depth, maxOutstanding: maxOutstanding,
            setupCalls: workload.setupCount, setupSeconds: setupSeconds, windowSeconds: windowSeconds,
            sent: all.sent, completed: all.completed, ok: all.ok, errors: all.errors, achievedRate: achieved,
            throughput: Double(all.ok) / windowSeconds, late: t.late, unsent: UInt64(unsentCount),
            sendLagUs: mode == "open" ? LatencySummary(t.sendLag) : nil,
            latencyUs: LatencySummary(all.latency), serviceTimeUs: LatencySummary(all.serviceTime),
            rpcs: BenchRPC.allCases.map { RPCReport(rpc: $0.rawValue, stats: t.stats[$0.index]) },
            sampleErrors: t.sampleErrors,
            serverCPUPercent: t.serverCPUSeconds.map { ($0 / windowSeconds * 1000).rounded() / 10 },
            serverCPUUsPerCall: t.serverCPUSeconds.flatMap { all.completed > 0 ? ($0 * 1e7 / Double(all.completed)).rounded() / 10 : nil },
            pushes: pushes, serverRSSBytes: memory?.rss, serverPeakRSSBytes: memory?.peak,
            refusalLatencyUs: all.refusalLatency.totalCount > 0 ? LatencySummary(all.refusalLatency) : nil,
            clientCPUUsPerCall: t.clientCPUSeconds.flatMap { all.completed > 0 ? ($0 * 1e7 / Double(all.completed)).rounded() / 10 : nil })
    }
}
