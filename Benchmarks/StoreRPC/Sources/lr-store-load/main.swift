// Closed-loop RegisterToken load against a running `liverelay serve`, through LiveRelayClient's
// `registerToken(_:timeout:)`: C connections (one client each) and D callers
// per connection, each sending its next call as soon as the previous reply arrives (D requests
// pipelined per connection). Every call registers a new update token for a new device id (1,000
// activities), so each acknowledged call is a durable INSERT and must come back CREATED.
//
//   lr-store-load --port P --api-key K --ca cert.pem [-c 4] [-d 64] [--warmup 3] [--duration 10]
//                 [--server-pid PID] [--threads 1] [--run ID]
//
// Prints calls/s over the measured window, latency percentiles, the server's CPU (from
// /proc/PID/stat, with --server-pid) and this process's CPU, and one `RESULT {json}` line.
import Dispatch
import Foundation
import LiveRelayClient
import Logging
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("lr-store-load: \(message)\n".utf8))
    exit(2)
}

func number<T: LosslessStringConvertible>(_ text: String, _ name: String) -> T {
    guard let value = T(text) else { fail("\(name): not a number: \(text)") }
    return value
}

func say(_ message: String) {
    FileHandle.standardOutput.write(Data((message + "\n").utf8))
}

struct Options {
    var host = "127.0.0.1"
    var port = 7443
    var apiKey = ProcessInfo.processInfo.environment["LIVERELAY_API_KEY"] ?? ""
    var caFile = ""
    var connections = 4
    var depth = 64
    var warmup = 3.0
    var duration = 10.0
    var threads = 1
    var serverPID: Int32?
    var run = String(UInt32.random(in: 0...UInt32.max), radix: 16)
    var appID = "dev.app"

    init(_ arguments: [String]) {
        var i = 0
        func value() -> String {
            i += 1
            guard i < arguments.count else { fail("\(arguments[i - 1]) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--host": host = value()
            case "--port": port = number(value(), "--port")
            case "--api-key": apiKey = value()
            case "--ca": caFile = value()
            case "-c", "--connections": connections = number(value(), "-c")
            case "-d", "--depth": depth = number(value(), "-d")
            case "--warmup": warmup = number(value(), "--warmup")
            case "--duration": duration = number(value(), "--duration")
            case "--threads": threads = number(value(), "--threads")
            case "--server-pid": serverPID = number(value(), "--server-pid")
            case "--run": run = value()
            case "--app-id": appID = value()
            default: fail("unknown argument \(arguments[i])")
            }
            i += 1
        }
        if apiKey.isEmpty { fail("--api-key (or LIVERELAY_API_KEY) is required") }
        if caFile.isEmpty { fail("--ca is required (the server's cert.pem)") }
    }
}

func monotonicNanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// utime + stime of a process, in seconds (/proc/PID/stat fields 14 and 15).
func processCPUSeconds(_ pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // fields[0] is the state (field 3): utime is field 14, stime field 15.
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Bytes the process caused to be written to storage (/proc/PID/io write_bytes).
func processWriteBytes(_ pid: Int32) -> Double? {
    guard let io = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return nil }
    for line in io.split(separator: "\n") where line.hasPrefix("write_bytes:") {
        return Double(line.dropFirst("write_bytes:".count).trimmingCharacters(in: .whitespaces))
    }
    return nil
}

func ownCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
}

enum Phase: Int { case warmup = 0, measure = 1, stopping = 2 }

final class PhaseFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = Phase.warmup
    var current: Phase { lock.lock(); defer { lock.unlock() }; return value }
    func set(_ phase: Phase) { lock.lock(); value = phase; lock.unlock() }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
let group = MultiThreadedEventLoopGroup(numberOfThreads: options.threads)
let logger: Logger = {
    var logger = Logger(label: "lr-store-load")
    logger.logLevel = .warning
    return logger
}()
let timeout = Duration.seconds(30)

/// One closed-loop caller: its calls are strictly sequential, so its counters need no lock.
final class Caller: @unchecked Sendable {
    let client: LiveRelayClient
    let phase: PhaseFlag
    let prefix: String
    var sequence = 0
    var measured = 0
    var failed = 0
    var notCreated = 0
    var firstError: String?
    var latencies: [UInt32] = []  // microseconds, measured window only

    init(client: LiveRelayClient, phase: PhaseFlag, prefix: String) {
        self.client = client
        self.phase = phase
        self.prefix = prefix
        latencies.reserveCapacity(1 << 16)
    }

    func nextRequest() -> RegisterTokenRequest {
        let n = sequence
        sequence += 1
        // 64 hex characters, unique per (run, connection, caller, n).
        var hex = prefix
        let suffix = String(n, radix: 16)
        hex += String(repeating: "0", count: 64 - prefix.count - suffix.count) + suffix
        return RegisterTokenRequest(
            appID: options.appID, kind: .update, token: hex, environment: .sandbox,
            activityID: "bench-\(options.run)-act-\(n % 1000)", deviceID: "bench-\(prefix)-\(n)"
        )
    }

    /// Calls until the phase is `.stopping`, each as soon as the previous one is answered.
    func run() async {
        while true {
            let start = monotonicNanos()
            do {
                let reply = try await client.registerToken(nextRequest(), timeout: timeout)
                let phase = self.phase.current
                if phase == .measure {
                    self.measured += 1
                    self.latencies.append(UInt32(min((monotonicNanos() - start) / 1000, UInt64(UInt32.max))))
                    if reply.result != .created { self.notCreated += 1 }
                }
                if phase == .stopping { return }
            } catch {
                self.failed += 1
                if self.firstError == nil { self.firstError = "\(error)" }
                if self.phase.current == .stopping { return }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
    }
}

let configuration = LiveRelayClient.Configuration(
    host: options.host, port: options.port, tls: .trusting(caFile: options.caFile),
    apiKey: options.apiKey, clientName: "lr-store-load", connections: 1,
    defaultTimeout: timeout, maxPendingCalls: max(10_000, options.depth * 2)
)

/// `count` clients of one connection each, alive for `body` and shut down after it.
func withClients<T>(
    _ count: Int, _ opened: [LiveRelayClient] = [], isolation: isolated (any Actor)? = #isolation,
    _ body: ([LiveRelayClient]) async throws -> T
) async throws -> T {
    if opened.count == count { return try await body(opened) }
    return try await LiveRelayClient.withClient(configuration: configuration, eventLoopGroup: group, logger: logger) { client in
        try await withClients(count, opened + [client], body)
    }
}

/// The measured window: its clock, both processes' CPU and the server's storage writes at each end.
struct Window {
    var t0: UInt64 = 0, t1: UInt64 = 0
    var serverCPU0: Double?, serverCPU1: Double?
    var serverWritten0: Double?, serverWritten1: Double?
    var ownCPU0 = 0.0, ownCPU1 = 0.0
    var loadAfter = ""
}

let phase = PhaseFlag()
let (callers, window) = try await withClients(options.connections) { clients in
    // Open every connection (TLS handshake, HELLO/WELCOME) before the clock starts.
    for client in clients { _ = try await client.ping(timeout: .seconds(10)) }
    var callers: [Caller] = []
    for (c, client) in clients.enumerated() {
        for d in 0..<options.depth {
            // run (8) + connection (4) + caller (4) hex characters, then the sequence number.
            let run = String(repeating: "0", count: max(0, 8 - options.run.count)) + options.run.prefix(8)
            let prefix = run + String(format: "%04x%04x", c, d)
            callers.append(Caller(client: client, phase: phase, prefix: prefix.lowercased()))
        }
    }
    say("lr-store-load: \(options.connections) connection(s) x \(options.depth) in flight, warm-up \(options.warmup) s, "
        + "measure \(options.duration) s, client threads \(options.threads), load average \(loadAverage())")
    var window = Window()
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        for caller in callers { tasks.addTask { await caller.run() } }
        try await Task.sleep(nanoseconds: UInt64(options.warmup * 1e9))
        window.serverCPU0 = options.serverPID.flatMap(processCPUSeconds)
        window.serverWritten0 = options.serverPID.flatMap(processWriteBytes)
        window.ownCPU0 = ownCPUSeconds()
        window.t0 = monotonicNanos()
        phase.set(.measure)
        try await Task.sleep(nanoseconds: UInt64(options.duration * 1e9))
        phase.set(.stopping)
        window.t1 = monotonicNanos()
        window.serverCPU1 = options.serverPID.flatMap(processCPUSeconds)
        window.serverWritten1 = options.serverPID.flatMap(processWriteBytes)
        window.ownCPU1 = ownCPUSeconds()
        window.loadAfter = loadAverage()
        try await tasks.waitForAll()
    }
    return (callers, window)
}
let (t0, t1) = (window.t0, window.t1)
let (serverCPU0, serverCPU1) = (window.serverCPU0, window.serverCPU1)
let (serverWritten0, serverWritten1) = (window.serverWritten0, window.serverWritten1)
let (ownCPU0, ownCPU1, loadAfter) = (window.ownCPU0, window.ownCPU1, window.loadAfter)

let seconds = Double(t1 - t0) / 1e9
let calls = callers.reduce(0) { $0 + $1.measured }
let failed = callers.reduce(0) { $0 + $1.failed }
let notCreated = callers.reduce(0) { $0 + $1.notCreated }
let latencies = callers.flatMap(\.latencies).sorted()
func percentile(_ p: Double, _ latencies: [UInt32] = latencies) -> Double {
    guard !latencies.isEmpty else { return 0 }
    return Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1000
}
let rate = Double(calls) / seconds
let serverCores = (serverCPU0 != nil && serverCPU1 != nil) ? (serverCPU1! - serverCPU0!) / seconds : nil
let clientCores = (ownCPU1 - ownCPU0) / seconds
let bytesPerCall = (serverWritten0 != nil && serverWritten1 != nil && calls > 0) ? (serverWritten1! - serverWritten0!) / Double(calls) : nil
say(String(format: "%.0f calls/s (%d in %.2f s), p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms; failed %d, not CREATED %d",
           rate, calls, seconds, percentile(0.5), percentile(0.99), percentile(0.999), failed, notCreated))
say(String(format: "CPU: server %@ cores, load generator %.2f cores; server wrote %@ bytes to storage per call; load average after %@",
           serverCores.map { String(format: "%.2f", $0) } ?? "?", clientCores,
           bytesPerCall.map { String(format: "%.0f", $0) } ?? "?", loadAfter))
if let error = callers.compactMap(\.firstError).first { say("first error: \(error)") }
let result: [String: Any] = [
    "connections": options.connections, "depth": options.depth, "calls_per_second": Int(rate.rounded()),
    "calls": calls, "seconds": seconds, "p50_ms": percentile(0.5), "p99_ms": percentile(0.99),
    "failed": failed, "not_created": notCreated, "server_cores": serverCores ?? -1, "server_write_bytes_per_call": bytesPerCall ?? -1, "client_cores": clientCores,
    "load_average_after": loadAfter,
]
if let json = try? JSONSerialization.data(withJSONObject: result, options: [.sortedKeys]) {
    say("RESULT " + String(decoding: json, as: UTF8.self))
}
try await group.shutdownGracefully()
exit(failed == 0 && notCreated == 0 ? 0 : 1)
