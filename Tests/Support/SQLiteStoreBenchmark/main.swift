// sqlite-store-benchmark [--dir DIR] [--callers 64] [--seconds 10] [--tokens 100000] [--shape push-to-start|update]
//                        [--throughput-only] [--keep]
//
// The SQLite store alone (no RPC), release build, for docs/BENCHMARKS.md ("SQLite"):
//   1. durable RegisterToken applies per second with --callers concurrent callers, each
//      awaiting its acknowledgement before the next call (new push-to-start tokens, every
//      index touched), for --seconds; then the same with one caller (the fsync floor);
//   2. the time to load the --tokens update tokens of one activity, on a file that also
//      holds everything from step 1: through the read connection (`updateTokens(of:)`),
//      first after reopening and then warm, and inside the writer as an UpdateActivity
//      (the plan reads every token and builds the 100k-target push batch, then commits);
//   3. a StartActivity to `all_devices` of the push-to-start tokens of step 1 (its plan
//      reads every one as a target), four times;
//   4. the EndActivity of the activity of step 2 (its live targets read, its update tokens deleted).
//
// Run: swift build -c release --scratch-path .build-sqlite --product sqlite-store-benchmark
//      .build-sqlite/release/sqlite-store-benchmark --dir /var/tmp

import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import LiveRelayStoreSQLite
import NIOCore
import NIOPosix
import StoreBenchmarkSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let baseDirectory = option("--dir", "/var/tmp")
let callers = Int(option("--callers", "64"))!
let seconds = Double(option("--seconds", "10"))!
let tokenCount = Int(option("--tokens", "100000"))!
let shape = option("--shape", "push-to-start")
let throughputOnly = CommandLine.arguments.contains("--throughput-only")

/// Bytes this process caused to be written to storage so far (Linux; 0 elsewhere).
func writtenBytes() -> Int { procValue("/proc/self/io", "write_bytes:") }

/// The store's configuration from the command line (defaults: the store's own).
func storeConfiguration() -> SQLiteActivityStore.Configuration {
    var configuration = SQLiteActivityStore.Configuration()
    switch option("--durability", "pipelined") {
    case "full": configuration.durability = .fullSync
    case "pipelined": configuration.durability = .pipelined
    case let other: fatalError("--durability full|pipelined, not \(other)")
    }
    configuration.checkpointFrames = Int(option("--checkpoint-frames", String(configuration.checkpointFrames)))!
    configuration.walLimitFrames = max(
        configuration.checkpointFrames,
        Int(option("--wal-limit-frames", String(configuration.walLimitFrames)))!)
    configuration.pageSize = Int(option("--page-size", String(configuration.pageSize)))!
    configuration.maxBatch = Int(option("--max-batch", String(configuration.maxBatch)))!
    configuration.cacheKiB = Int(option("--cache-kib", String(configuration.cacheKiB)))!
    configuration.readerMmapBytes = Int(option("--reader-mmap", String(configuration.readerMmapBytes)))!
    return configuration
}

/// Where the writer's time went between two snapshots.
func statisticsLine(_ a: SQLiteActivityStore.Statistics, _ b: SQLiteActivityStore.Statistics, seconds: Double) -> String {
    func share(_ x: Double) -> String { format(x / seconds * 100, 0) + "%" }
    return """
        writer: execute \(share(b.executeSeconds - a.executeSeconds)), wait for sync \(share(b.waitSeconds - a.waitSeconds)), \
        commit \(share(b.commitSeconds - a.commitSeconds)), wait for checkpoint \(share(b.restartWaitSeconds - a.restartWaitSeconds)); \
        durability thread: \(b.syncs - a.syncs) fdatasyncs, \(share(b.syncSeconds - a.syncSeconds)) busy; \
        checkpoints: \(b.checkpoints - a.checkpoints) (\(b.walRestarts - a.walRestarts) RESTART), \
        \(share(b.checkpointSeconds - a.checkpointSeconds)) busy; largest WAL \(b.largestWALFrames) frames
        """
}

/// A fixed pseudo-random 64-hex-digit token for `n` (SplitMix64): spread over the key space like APNs tokens.
func randomHex(_ n: Int, salt: UInt64) -> String {
    var x = UInt64(truncatingIfNeeded: n) &+ salt &* 0x9E37_79B9_7F4A_7C15
    var out = ""
    for _ in 0..<4 {
        let digits = String(splitMix64(&x), radix: 16)
        out += String(repeating: "0", count: 16 - digits.count) + digits
    }
    return out
}

let appID = "bench.app"
let app = App(id: appID, bundleID: appID)
let group = MultiThreadedEventLoopGroup.singleton

/// `callers` concurrent loops of RegisterToken (new tokens) for `duration` seconds.
func registrations(
    _ store: SQLiteActivityStore, callers: Int, duration: Double, prefix: String,
    make: @escaping @Sendable (String, Int) -> RegisterTokenRequest
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
let configuration = storeConfiguration()
print("# configuration: \(configuration)")
var store = try SQLiteActivityStore(path: path, configuration: configuration)

// 1. Throughput.
let pushToStart: @Sendable (String, Int) -> RegisterTokenRequest = { hex, n in
    RegisterTokenRequest(
        appID: appID, kind: .pushToStart, token: hex, environment: .production,
        attributesType: "BenchAttributes", externalUserID: "user-\(n % 50_000)", deviceID: "device-\(n)")
}
/// Benchmarks/StoreRPC's request: a new update token (random-looking hex) for a new device, 1,000 activities.
let updateShape: @Sendable (String, Int) -> RegisterTokenRequest = { hex, n in
    RegisterTokenRequest(
        appID: appID, kind: .update, token: randomHex(n, salt: UInt64(hex.utf8.first ?? 0) << 8 | UInt64(hex.utf8.dropFirst().first ?? 0)),
        environment: .production, activityID: "bench-act-\(n % 1000)", deviceID: "bench-\(hex.prefix(2))-\(n)")
}
let make = shape == "update" ? updateShape : pushToStart
_ = try await registrations(store, callers: callers, duration: 1, prefix: "aa", make: make)  // warm-up
let before = store.statistics
let writtenBefore = writtenBytes()
let run = try await registrations(store, callers: callers, duration: seconds, prefix: "ab", make: make)
let after = store.statistics
let written = writtenBytes() - writtenBefore
let commits = after.commits - before.commits
print(
    """
    register (\(shape)), \(callers) callers: \(run.count) applies in \(format(run.seconds, 2)) s = \(Int(Double(run.count) / run.seconds)) applies/s; \
    \(commits) commits (\(format(Double(run.count) / Double(max(commits, 1)))) applies/commit, \
    \(Int(Double(commits) / run.seconds)) commits/s); latency p50 \(format(percentile(run.latencies, 0.5) * 1000, 2)) ms, \
    p99 \(format(percentile(run.latencies, 0.99) * 1000, 2)) ms; written \(format(Double(written) / Double(max(run.count, 1)) / 1024)) KiB/apply
    """)
print(statisticsLine(before, after, seconds: run.seconds))
if throughputOnly {
    try await store.close()
    exit(0)
}
let single = try await registrations(store, callers: 1, duration: min(seconds, 3), prefix: "ac", make: make)
print(
    """
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
                let request = RegisterTokenRequest(
                    appID: appID, kind: .update, token: hexToken("ba", n), environment: .sandbox,
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

store = try SQLiteActivityStore(path: path, configuration: configuration)
let loop = group.next()
var loads: [Double] = []
for _ in 0..<6 {
    let t = monotonic()
    let tokens = try await store.updateTokens(of: big, on: loop).get()
    loads.append(monotonic() - t)
    precondition(tokens.count == tokenCount, "loaded \(tokens.count)")
}
let warm = loads.dropFirst().sorted()
print(
    """
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
print(
    """
    UpdateActivity of the \(tokenCount)-token activity (writer: read all, build the batch, commit): \
    first \(format(updates[0] * 1000)) ms, median \(format(warmUpdates[warmUpdates.count / 2] * 1000)) ms
    """)

// 3 and 4: a StartActivity to `all_devices`, then the big activity's EndActivity.
try await timeStartsAndEnd(of: store, app: app, ending: big, tokens: tokenCount, on: loop)
try await store.close()
