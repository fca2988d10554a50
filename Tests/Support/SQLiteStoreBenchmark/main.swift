// sqlite-store-benchmark [--dir DIR] [--callers 64] [--seconds 10] [--tokens 100000] [--keep]
//
// The SQLite store alone (no RPC), release build, for docs/BENCHMARKS.md ("Store (issue 4)"):
//   1. durable RegisterToken applies per second with --callers concurrent callers, each
//      awaiting its acknowledgement before the next call (new push-to-start tokens, every
//      index touched), for --seconds; then the same with one caller (the fsync floor);
//   2. the time to load the --tokens update tokens of one activity, on a file that also
//      holds everything from step 1: through the read connection (`updateTokens(of:)`),
//      first after reopening and then warm, and inside the writer as an UpdateActivity
//      (the plan reads every token and builds the 100k-target push batch, then commits).
//
// Run: swift build -c release --scratch-path .build-sqlite --product sqlite-store-benchmark
//      .build-sqlite/release/sqlite-store-benchmark --dir /var/tmp

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import NIOCore
import NIOPosix

func option(_ name: String, _ fallback: String) -> String {
    let args = CommandLine.arguments
    if let i = args.firstIndex(of: name), i + 1 < args.count { return args[i + 1] }
    return fallback
}

let baseDirectory = option("--dir", "/var/tmp")
let callers = Int(option("--callers", "64"))!
let seconds = Double(option("--seconds", "10"))!
let tokenCount = Int(option("--tokens", "100000"))!

func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func hexToken(_ prefix: String, _ n: Int) -> String {
    let digits = String(n, radix: 16)
    return prefix + String(repeating: "0", count: 64 - prefix.count - digits.count) + digits
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func format(_ value: Double, _ digits: Int = 1) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    return String(rounded)
}

let appID = "bench.app"
let app = App(id: appID, bundleID: appID)
let group = MultiThreadedEventLoopGroup.singleton

/// `callers` concurrent loops of RegisterToken (new tokens) for `duration` seconds.
func registrations(
    _ store: SQLiteActivityStore, callers: Int, duration: Double, prefix: String, make: @escaping @Sendable (String, Int) -> RegisterTokenRequest
) async throws -> (count: Int, seconds: Double, latencies: [Double]) {
    let start = monotonic()
    let deadline = start + duration
    let results = try await withThrowingTaskGroup(of: [Double].self) { tasks in
        for caller in 0..<callers {
            tasks.addTask {
                let loop = group.next()
                var latencies: [Double] = []
                var n = caller
                while monotonic() < deadline {
                    let t = monotonic()
                    let request = make(hexToken(prefix, n), n)
                    _ = try await store.apply(RegisterToken(request), now: SystemClock().now(), on: loop).get()
                    latencies.append(monotonic() - t)
                    n += callers
                }
                return latencies
            }
        }
        return try await tasks.reduce(into: [Double]()) { $0 += $1 }
    }
    return (results.count, monotonic() - start, results.sorted())
}

let directory = baseDirectory + "/liverelay-store-bench-\(getpid())"
mkdir(directory, 0o755)
let path = directory + "/liverelay.sqlite3"
let keep = CommandLine.arguments.contains("--keep")
defer {
    if !keep {
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        rmdir(directory)
    }
}

print("# SQLite store benchmark: \(path), SQLite \(SQLiteActivityStore.sqliteVersion)")
var store = try SQLiteActivityStore(path: path)

// 1. Throughput.
let pushToStart: @Sendable (String, Int) -> RegisterTokenRequest = { hex, n in
    RegisterTokenRequest(appID: appID, kind: .pushToStart, token: hex, environment: .production,
                         attributesType: "BenchAttributes", externalUserID: "user-\(n % 50_000)", deviceID: "device-\(n)")
}
_ = try await registrations(store, callers: callers, duration: 1, prefix: "aa", make: pushToStart) // warm-up
let before = store.statistics
let run = try await registrations(store, callers: callers, duration: seconds, prefix: "ab", make: pushToStart)
let after = store.statistics
let commits = after.commits - before.commits
print("""
    register, \(callers) callers: \(run.count) applies in \(format(run.seconds, 2)) s = \(Int(Double(run.count) / run.seconds)) applies/s; \
    \(commits) commits (\(format(Double(run.count) / Double(max(commits, 1)))) applies/commit, \
    \(Int(Double(commits) / run.seconds)) fsync'd commits/s); latency p50 \(format(percentile(run.latencies, 0.5) * 1000, 2)) ms, \
    p99 \(format(percentile(run.latencies, 0.99) * 1000, 2)) ms
    """)
let single = try await registrations(store, callers: 1, duration: min(seconds, 3), prefix: "ac", make: pushToStart)
print("""
    register, 1 caller: \(Int(Double(single.count) / single.seconds)) applies/s; latency p50 \
    \(format(percentile(single.latencies, 0.5) * 1000, 2)) ms, p99 \(format(percentile(single.latencies, 0.99) * 1000, 2)) ms
    """)

// 2. The update tokens of one activity.
let big = ActivityKey(appID: appID, activityID: "big-activity")
let fillStart = monotonic()
try await withThrowingTaskGroup(of: Void.self) { tasks in
    for caller in 0..<callers {
        tasks.addTask {
            let loop = group.next()
            var n = caller
            while n < tokenCount {
                let request = RegisterTokenRequest(appID: appID, kind: .update, token: hexToken("ba", n), environment: .sandbox,
                                                   activityID: big.activityID, deviceID: "device-\(n)")
                _ = try await store.apply(RegisterToken(request), now: SystemClock().now(), on: loop).get()
                n += callers
            }
        }
    }
    try await tasks.waitForAll()
}
print("registered \(tokenCount) update tokens of one activity in \(format(monotonic() - fillStart, 2)) s")
try await store.close()

func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : 0
}
print("file: \(fileSize(path) / 1_048_576) MiB")

store = try SQLiteActivityStore(path: path)
let loop = group.next()
var loads: [Double] = []
for _ in 0..<6 {
    let t = monotonic()
    let tokens = try await store.updateTokens(of: big, on: loop).get()
    loads.append(monotonic() - t)
    precondition(tokens.count == tokenCount, "loaded \(tokens.count)")
}
let warm = loads.dropFirst().sorted()
print("""
    load \(tokenCount) update tokens (read connection): first after reopen \(format(loads[0] * 1000)) ms, \
    warm median \(format(warm[warm.count / 2] * 1000)) ms (min \(format(warm.first! * 1000)) ms)
    """)

var updates: [Double] = []
for i in 0..<4 {
    let request = UpdateActivityRequest(appID: appID, activityID: big.activityID, contentStateJSON: #"{"n":\#(i)}"#)
    let t = monotonic()
    let outcome = try await store.apply(ChangeActivity(request, app: app), now: SystemClock().now(), on: loop).get()
    updates.append(monotonic() - t)
    guard case let .accepted(call) = outcome, call.batch.targets.count == tokenCount else {
        fatalError("unexpected outcome \(outcome)")
    }
}
let warmUpdates = updates.dropFirst().sorted()
print("""
    UpdateActivity of the \(tokenCount)-token activity (writer: read all, build the batch, commit): \
    first \(format(updates[0] * 1000)) ms, median \(format(warmUpdates[warmUpdates.count / 2] * 1000)) ms
    """)
try await store.close()
