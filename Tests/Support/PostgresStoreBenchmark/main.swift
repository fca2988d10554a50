// postgres-store-benchmark [--callers 64] [--seconds 10] [--tokens 100000] [--lanes 1] [--max-batch 512]
//
// The PostgreSQL store alone (no RPC), release build, for docs/BENCHMARKS.md: the same two
// measurements as sqlite-store-benchmark, against LIVERELAY_POSTGRES_URL (a fresh schema,
// dropped at the end; start a throwaway server with `eval "$(bash scripts/postgres.sh start)"`):
//   1. durable RegisterToken applies per second with --callers concurrent callers, each
//      awaiting its acknowledgement (COMMIT returned) before the next call;
//   2. the time to load the --tokens update tokens of one activity (`updateTokens(of:)`,
//      first and warm), an UpdateActivity of it (the plan reads its targets, builds the
//      batch, commits);
//   3. a StartActivity to `all_devices` of the push-to-start tokens of step 1, four times;
//   4. the EndActivity of the activity of step 2 (its live targets read, its update tokens deleted).
//
// Run: swift build -c release --scratch-path .build-pg --product postgres-store-benchmark
//      .build-pg/release/postgres-store-benchmark --seconds 10

import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStorePostgres
import NIOCore
import NIOPosix
import StoreBenchmarkSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let callers = Int(option("--callers", "64"))!
let seconds = Double(option("--seconds", "10"))!
let tokenCount = Int(option("--tokens", "100000"))!
let lanes = Int(option("--lanes", "1"))!
let maxBatch = Int(option("--max-batch", "512"))!

guard let urlPointer = getenv("LIVERELAY_POSTGRES_URL") else {
    print("set LIVERELAY_POSTGRES_URL (eval \"$(bash scripts/postgres.sh start)\")")
    exit(2)
}
var configuration = try PostgresStoreConfiguration(url: String(cString: urlPointer))
configuration.schema = "bench_\(getpid())"
configuration.lanes = lanes
configuration.maxBatch = maxBatch
configuration.maxConnections = lanes + 4

let appID = "bench.app"
let app = App(id: appID, bundleID: appID)
let group = MultiThreadedEventLoopGroup.singleton

func registrations(
    _ store: PostgresActivityStore, callers: Int, duration: Double, prefix: String,
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
                    _ = try await store.apply(RegisterToken(make(hexToken(prefix, n), n)), now: SystemClock().now(), on: loop).get()
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

print("# PostgreSQL store benchmark: \(configuration), lanes \(lanes), max batch \(maxBatch)")
var store = try await PostgresActivityStore(configuration: configuration)

let pushToStart: @Sendable (String, Int) -> RegisterTokenRequest = { hex, n in
    RegisterTokenRequest(
        appID: appID, kind: .pushToStart, token: hex, environment: .production,
        attributesType: "BenchAttributes", externalUserID: "user-\(n % 50_000)", deviceID: "device-\(n)")
}
_ = try await registrations(store, callers: callers, duration: 1, prefix: "aa", make: pushToStart)  // warm-up
let before = store.statistics
let run = try await registrations(store, callers: callers, duration: seconds, prefix: "ab", make: pushToStart)
let after = store.statistics
let commits = after.commits - before.commits
print(
    """
    register, \(callers) callers: \(run.count) applies in \(format(run.seconds, 2)) s = \(Int(Double(run.count) / run.seconds)) applies/s; \
    \(commits) transactions (\(format(Double(run.count) / Double(max(commits, 1)))) applies each), \
    \(after.conflicts - before.conflicts) conflicts; latency p50 \(format(percentile(run.latencies, 0.5) * 1000, 2)) ms, \
    p99 \(format(percentile(run.latencies, 0.99) * 1000, 2)) ms
    """)
let single = try await registrations(store, callers: 1, duration: min(seconds, 3), prefix: "ac", make: pushToStart)
print(
    """
    register, 1 caller: \(Int(Double(single.count) / single.seconds)) applies/s; latency p50 \
    \(format(percentile(single.latencies, 0.5) * 1000, 2)) ms, p99 \(format(percentile(single.latencies, 0.99) * 1000, 2)) ms
    """)

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

store = try await PostgresActivityStore(configuration: configuration)
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
    load \(tokenCount) update tokens (pooled connection): first after reopen \(format(loads[0] * 1000)) ms, \
    warm median \(format(warm[warm.count / 2] * 1000)) ms (min \(format(warm.first! * 1000)) ms)
    """)

var updates: [Double] = []
for i in 0..<4 {
    let request = UpdateActivityRequest(appID: appID, activityID: big.activityID, contentStateJSON: #"{"n":\#(i)}"#)
    let t = monotonic()
    let outcome = try await store.apply(ChangeActivity(request, app: app), now: SystemClock().now(), on: loop).get()
    updates.append(monotonic() - t)
    guard case let .accepted(call) = outcome, call.batch.targets.count == tokenCount else { fatalError("unexpected outcome \(outcome)") }
}
let warmUpdates = updates.dropFirst().sorted()
print(
    """
    UpdateActivity of the \(tokenCount)-token activity (a lane: read all, build the batch, commit): \
    first \(format(updates[0] * 1000)) ms, median \(format(warmUpdates[warmUpdates.count / 2] * 1000)) ms
    """)

// 3 and 4: a StartActivity to `all_devices`, then the big activity's EndActivity.
try await timeStartsAndEnd(of: store, app: app, ending: big, tokens: tokenCount, on: loop)
try await store.close()
if !CommandLine.arguments.contains("--keep") {
    try await PostgresActivityStore.dropSchema(configuration: configuration)
}
