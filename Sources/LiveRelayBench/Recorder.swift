import Histogram
import LiveRelayClient
import LiveRelayMessages
import NIOConcurrencyHelpers
import NIOCore

/// Monotonic nanoseconds on the clock NIO schedules with, so timers and timestamps agree.
@inline(__always)
func nowNanos() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

/// Where every call of a run is accounted: sends, completions by status, latencies,
/// calls in flight, and the per-second progress figures. One lock; each call takes it
/// twice, which costs far less than the call's own encoding and I/O.
final class Recorder: @unchecked Sendable {
    enum Phase: String { case setup = "setup", warmup = "warm-up", measuring = "measuring", draining = "draining" }

    private let lock = NIOLock()
    private var stats = Array(repeating: RPCStats(), count: BenchRPC.allCases.count)
    private var sendLag = makeLatencyHistogram()
    private var interval = makeLatencyHistogram()
    private var intervalCompleted: UInt64 = 0
    private var intervalErrors: UInt64 = 0
    private var errorsTotal: UInt64 = 0
    private(set) var outstandingUnlocked = 0
    private var late: UInt64 = 0
    private var firstSend = UInt64.max
    private var lastSend: UInt64 = 0
    private var lastCompletion: UInt64 = 0
    private var sampleErrors: [String] = []
    private var drained: EventLoopPromise<Void>?
    private var phase = Phase.setup
    private var measureStart: UInt64 = 0
    private var measureEnd: UInt64?
    /// Closed loop with a request count: measured calls still to issue.
    private var budget: Int?
    private var lastSnapshot = nowNanos()
    private let runStart = nowNanos()
    /// CPU seconds of the server process (if known) at the window's start and end.
    private let cpuProbe: (@Sendable () -> Double?)?
    private var cpuStart: Double?
    private var cpuEnd: Double?
    /// This process's CPU seconds at the window's start and end.
    private var ownCPUStart: Double?
    private var ownCPUEnd: Double?
    private var pushes = PushAccount()
    private var summaries: UInt64 = 0

    init(cpuProbe: (@Sendable () -> Double?)? = nil) {
        self.cpuProbe = cpuProbe
    }

    /// Reads the server's CPU at the end of the window if the phase change did not.
    func noteWindowEnd() {
        let cpu = cpuProbe?()
        let own = ownCPUSeconds()
        lock.withLock {
            if cpuEnd == nil { cpuEnd = cpu }
            if ownCPUEnd == nil { ownCPUEnd = own }
        }
    }

    var outstanding: Int { lock.withLock { outstandingUnlocked } }

    func setPhase(_ phase: Phase, at time: UInt64 = nowNanos()) {
        let cpu = phase == .measuring || phase == .draining ? cpuProbe?() : nil
        let own = phase == .measuring || phase == .draining ? ownCPUSeconds() : nil
        lock.withLock {
            self.phase = phase
            if phase == .measuring { measureStart = time; cpuStart = cpu; ownCPUStart = own }
            if phase == .draining, measureEnd == nil { measureEnd = time; cpuEnd = cpu; ownCPUEnd = own }
        }
    }

    func setBudget(_ n: Int) { lock.withLock { budget = n } }

    /// Closed loop: whether to send another call, and whether it is measured.
    func beginClosedLoopCall(rpc: BenchRPC, at time: UInt64) -> Bool? {
        lock.withLock {
            switch phase {
            case .draining: return nil
            case .setup, .warmup:
                outstandingUnlocked += 1
                return false
            case .measuring:
                if let b = budget {
                    if b == 0 { return nil }
                    budget = b - 1
                    if b == 1 {
                        phase = .draining
                        measureEnd = nil  // the window ends with the last measured completion
                    }
                }
                outstandingUnlocked += 1
                noteSend(rpc: rpc, at: time)
                return true
            }
        }
    }

    /// Open loop: a call leaves now; `intended` is when the schedule wanted it to.
    func openLoopSend(rpc: BenchRPC, measured: Bool, intended: UInt64, at time: UInt64, late isLate: Bool) {
        lock.withLock {
            outstandingUnlocked += 1
            if measured {
                noteSend(rpc: rpc, at: time)
                sendLag.recordClamped(time &- intended)
                if isLate { late += 1 }
            }
        }
    }

    private func noteSend(rpc: BenchRPC, at time: UInt64) {
        stats[rpc.index].sent += 1
        firstSend = min(firstSend, time)
        lastSend = max(lastSend, time)
    }

    /// A call ended with `status` (OK or the failure's); `intended` equals `sent` in closed loop.
    func completed(rpc: BenchRPC, measured: Bool, intended: UInt64, sent: UInt64, status: StatusCode, error: @autoclosure () -> String?) {
        let now = nowNanos()
        let promise: EventLoopPromise<Void>? = lock.withLock {
            outstandingUnlocked -= 1
            intervalCompleted += 1
            interval.recordClamped(now &- intended)
            if status != .ok {
                intervalErrors += 1
                errorsTotal += 1
                if sampleErrors.count < 5, let text = error(), !sampleErrors.contains(text) { sampleErrors.append(text) }
            }
            if measured {
                stats[rpc.index].statusCounts[Int(status.rawValue)] += 1
                stats[rpc.index].latency.recordClamped(now &- intended)
                stats[rpc.index].serviceTime.recordClamped(now &- sent)
                if status == .resourceExhausted || status == .unavailable {
                    stats[rpc.index].refusalLatency.recordClamped(now &- sent)
                }
                lastCompletion = max(lastCompletion, now)
            }
            guard outstandingUnlocked == 0, phase == .draining, let p = drained else { return nil }
            drained = nil
            return p
        }
        promise?.succeed()
    }

    /// A measured call's delivery summary (recorded before its completion).
    func delivery(_ summary: DeliverySummary, measured: Bool) {
        guard measured else { return }
        lock.withLock { pushes.add(summary) }
    }

    /// Succeeds once the phase is draining and nothing is in flight.
    func whenDrained(on loop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        let done: Bool = lock.withLock {
            if outstandingUnlocked == 0 { return true }
            drained = promise
            return false
        }
        if done { promise.succeed() }
        return promise.futureResult
    }

    func snapshot() -> ProgressSnapshot {
        let now = nowNanos()
        return lock.withLock {
            let seconds = max(1e-9, Double(now - lastSnapshot) / 1e9)
            let s = ProgressSnapshot(
                elapsedSeconds: Double(now - runStart) / 1e9, phase: phase.rawValue, rate: Double(intervalCompleted) / seconds,
                errors: intervalErrors, errorsTotal: errorsTotal,
                p99Us: intervalCompleted > 0 ? Double(interval.valueAtPercentile(99)) / 1000 : 0,
                outstanding: outstandingUnlocked, late: late)
            interval.reset()
            intervalCompleted = 0
            intervalErrors = 0
            lastSnapshot = now
            return s
        }
    }

    struct Totals {
        var stats: [RPCStats]
        var sendLag: Histogram<UInt64>
        var late: UInt64
        var firstSend: UInt64
        var lastSend: UInt64
        var lastCompletion: UInt64
        var measureStart: UInt64
        var measureEnd: UInt64?
        var sampleErrors: [String]
        var errorsTotal: UInt64
        var serverCPUSeconds: Double?
        var clientCPUSeconds: Double?
        var pushes: PushAccount
    }

    func totals() -> Totals {
        lock.withLock {
            Totals(
                stats: stats, sendLag: sendLag, late: late, firstSend: firstSend, lastSend: lastSend, lastCompletion: lastCompletion,
                measureStart: measureStart, measureEnd: measureEnd, sampleErrors: sampleErrors, errorsTotal: errorsTotal,
                serverCPUSeconds: cpuStart.flatMap { start in cpuEnd.map { $0 - start } },
                clientCPUSeconds: ownCPUStart.flatMap { start in ownCPUEnd.map { $0 - start } }, pushes: pushes)
        }
    }
}
