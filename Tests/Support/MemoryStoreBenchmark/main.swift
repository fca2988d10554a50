// memory-store-benchmark [--tokens 1000000] [--shape push-to-start|update|activities|isolation]
//
// What the in-memory store (InMemoryState, the storage of `serve --store memory`) costs per
// registered token, for docs/BENCHMARKS.md ("Memory"): registers --tokens new
// tokens through the RegisterToken rule and prints the growth of the process's anonymous
// resident memory (RssAnon: the heap) and of its whole resident set (VmRSS), each divided
// by the number of tokens. Tokens are random 64-hex (like APNs's), device ids
// random UUIDs (36 characters, as devices send them). Shapes:
//   push-to-start: one attributes type, a user id per 4 devices (a user with a few devices);
//   update:        update tokens of 1,000 activities.
//   activities:    no tokens: StartActivity of a new activity per call (with an idempotency
//                  key), so the maps with an entry per activity grow instead.
// Then it times the reads and passes that run under the memory store's lock: for `update`
// the fan-out's read of every activity's targets; for the token shapes the sweep's read of
// due tokens and whole Sweep passes once every token is due (push-to-start tokens get
// `serve`'s default retention, 30 days).
//   isolation:     one app's fan-outs (or, with --during sweep, the expiry of its tokens)
//                  against another app's registrations, through the store (Isolation.swift).
//
// Run: swift build -c release --scratch-path .build-release --product memory-store-benchmark
//      .build-release/release/memory-store-benchmark --tokens 1000000

import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import StoreBenchmarkSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let count = Int(option("--tokens", "1000000"))!
let shape = option("--shape", "push-to-start")
if shape == "isolation" {
    try await measureIsolation(tokens: Int(option("--tokens", "100000"))!)
    exit(0)
}

/// Anonymous resident memory (RssAnon in /proc/self/status: the heap and the other private
/// pages, not the binary and libraries), in bytes (Linux; 0 elsewhere).
func anonymousResidentBytes() -> Int { procValue("/proc/self/status", "RssAnon:") * 1024 }

/// The resident set (VmRSS in /proc/self/status), in bytes (Linux; 0 elsewhere).
func residentBytes() -> Int { procValue("/proc/self/status", "VmRSS:") * 1024 }

/// Random-looking hex and UUIDs (SplitMix64), spread over the key space like APNs tokens.
struct Scatter {
    var x: UInt64
    mutating func next() -> UInt64 { splitMix64(&x) }
    mutating func hex(_ digits: Int) -> String {
        var out = ""
        while out.count < digits {
            let word = String(next(), radix: 16)
            out += String(repeating: "0", count: 16 - word.count) + word
        }
        return String(out.prefix(digits))
    }
    mutating func uuid() -> String {
        let h = hex(32)
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-"
            + String(c[20..<32])
    }
}

let appID = "bench.app"
let now = UnixTime(seconds: 1_700_000_000)
var scatter = Scatter(x: 14)
var state = InMemoryState()
// Warm-up outside the measurement: the first allocations of the dictionaries and the pool.
for i in 0..<1000 {
    let request = RegisterTokenRequest(
        appID: appID, kind: .pushToStart, token: scatter.hex(64), environment: .production, attributesType: "Warm",
        deviceID: "warm-\(i)")
    _ = try state.apply(RegisterToken(request), now: now)
}

let anonBefore = anonymousResidentBytes()
let rssBefore = residentBytes()
let start = monotonic()
/// The slowest single registrations (seconds, tokens stored before it): a stall
/// while the tables grow is paid by one caller, under the store's lock.
var slowest: [(seconds: Double, stored: Int)] = []
/// Seconds as milliseconds with two decimals.
func ms(_ seconds: Double) -> Double { Double(Int(seconds * 100_000)) / 100 }
@MainActor func note(_ took: Double, stored: Int) {
    guard slowest.count < 5 || took > slowest[slowest.count - 1].seconds else { return }
    slowest.append((took, stored))
    slowest.sort { $0.seconds > $1.seconds }
    if slowest.count > 5 { slowest.removeLast() }
}
for i in 0..<count {
    if shape == "activities" {
        let start = StartActivityRequest(
            appID: appID, activityID: "order-\(i)", attributesType: "DeliveryAttributes", attributesJSON: #"{"orderID":"A1"}"#,
            contentStateJSON: #"{"status":"placed"}"#, alert: Alert(title: "Order placed"), targets: Targets(allDevices: true),
            idempotencyKey: "key-\(i)")
        let before = monotonic()
        _ = try state.apply(StartActivity(start, app: App(id: appID, bundleID: appID)), now: now)
        note(monotonic() - before, stored: i)
        continue
    }
    let request: RegisterTokenRequest
    if shape == "update" {
        request = RegisterTokenRequest(
            appID: appID, kind: .update, token: scatter.hex(64), environment: .production, activityID: "activity-\(i % 1000)",
            deviceID: scatter.uuid())
    } else {
        request = RegisterTokenRequest(
            appID: appID, kind: .pushToStart, token: scatter.hex(64), environment: .production,
            attributesType: "DeliveryAttributes", externalUserID: "user-\(i / 4)", deviceID: scatter.uuid())
    }
    let before = monotonic()
    // Push-to-start tokens with the retention `serve` gives them by default (30 days), so
    // that each has an expiry, as in a server.
    let plan = try state.apply(RegisterToken(request, pushToStartRetention: .hours(30 * 24)), now: now)
    note(monotonic() - before, stored: i + 1000)
    precondition(plan.result == .created)
}
let seconds = monotonic() - start
let anonGrowth = anonymousResidentBytes() - anonBefore
let rssGrowth = residentBytes() - rssBefore
precondition(state.tokenCount == (shape == "activities" ? 1000 : count + 1000))
let (done, calls, unit) =
    shape == "activities" ? ("activities started", "starts", "activity") : ("\(shape) tokens registered", "registrations", "token")
print(
    """
    memory store, \(count) \(done) in \(Double(Int(seconds * 100)) / 100) s \
    (\(Int(Double(count) / seconds)) \(calls)/s): \
    anonymous RSS +\(anonGrowth / 1_048_576) MiB = \(anonGrowth / count) bytes/\(unit); \
    RSS +\(rssGrowth / 1_048_576) MiB = \(rssGrowth / count) bytes/\(unit)
    """)
print(
    "slowest single \(calls): "
        + slowest.map { "\(ms($0.seconds)) ms at \($0.stored) \(unit == "token" ? "tokens" : "activities")" }
        .joined(separator: ", "))
if shape == "activities" {
    // The quota refresher's read: live activities are counted by a scan of every activity,
    // which the memory store does in slices of 16,384 (InMemoryActivityStore.usageSlice),
    // letting go of its lock between them.
    var before = monotonic()
    let usage = state.usage(of: appID, at: now)
    let whole = monotonic() - before
    var counts = [appID: 0]
    var next: Int? = 0
    var longest = 0.0
    while let start = next {
        before = monotonic()
        next = state.countLiveActivities(of: &counts, at: now, from: start, limit: 16_384)
        longest = max(longest, monotonic() - before)
    }
    precondition(counts[appID] == usage.liveActivities)
    print(
        "usage(of:) counted \(usage.liveActivities) live activities in "
            + "\(ms(whole)) ms (one scan); in slices of 16,384 the longest slice took \(ms(longest)) ms")
    // The sweep's read (every 60 s, inside the Sweep mutation, so under the store's lock):
    // the minutes that are due, by the sweep index (a scan of every activity took 51 ms).
    before = monotonic()
    let due = state.activitiesDue(at: now, limit: 10_000)
    print("activitiesDue(at:limit:) found \(due.count) due in \(ms(monotonic() - before)) ms")
}
if shape == "update" {
    // The fan-out's read: every update token of every activity, as the push targets a
    // fan-out makes (one hex string unpacked per token).
    let before = monotonic()
    var targets = 0
    for a in 0..<1000 { targets += state.updateTargets(of: ActivityKey(appID: appID, activityID: "activity-\(a)"), at: now).count }
    print("updateTargets(of:at:) read \(targets) targets of 1,000 activities in \(ms(monotonic() - before)) ms")
}
if shape == "push-to-start" {
    // A StartActivity to `all_devices`: every push-to-start token of the type resolved as
    // its targets (the rule's read, under the store's lock), three times.
    var reads: [Double] = []
    var targets = 0
    for _ in 0..<3 {
        let before = monotonic()
        targets =
            TargetResolution.resolve(
                Targets(allDevices: true), appID: appID, attributesType: "DeliveryAttributes", state: state, now: now
            ).targets.count
        reads.append(ms(monotonic() - before))
    }
    print("TargetResolution.resolve(all_devices) resolved \(targets) targets in \(reads) ms")
}
if shape != "activities" {
    // The token sweep's read (every 60 s, inside the Sweep mutation, so under the store's
    // lock): none due, then the first 10,000 once all are.
    for at in [now, now + .hours(31 * 24)] {
        let before = monotonic()
        let due = state.tokensExpired(at: at, limit: 10_000)
        print("tokensExpired(at:limit: 10,000) found \(due.count) due in \(ms(monotonic() - before)) ms")
    }
    // Whole sweep passes once every token is due (a mass expiry), as the sweeper makes them:
    // each is one mutation under the store's lock, reading and deleting up to its limit.
    let expired = now + .hours(31 * 24)
    for limit in [10_000, 1_000] {
        var passes: [Double] = []
        for _ in 0..<5 {
            let before = monotonic()
            _ = try state.apply(Sweep(limit: limit), now: expired)
            passes.append(ms(monotonic() - before))
        }
        print("Sweep(limit: \(limit)) with every token due, 5 passes: \(passes) ms")
    }
}
