// memory-store-benchmark [--tokens 1000000] [--shape push-to-start|update]
//
// What the in-memory store (InMemoryState, the storage of `serve --store memory`) costs per
// registered token, for docs/BENCHMARKS.md ("Stores (issue 14)"): registers --tokens new
// tokens through the RegisterToken rule and prints the growth of the process's anonymous
// resident memory (RssAnon: the heap) and of its whole resident set (VmRSS), each divided
// by the number of tokens. Tokens are random 64-hex (like APNs's), device ids
// random UUIDs (36 characters, as devices send them). Shapes:
//   push-to-start: one attributes type, a user id per 4 devices (a user with a few devices);
//   update:        update tokens of 1,000 activities.
//
// Run: swift build -c release --scratch-path .build-release --product memory-store-benchmark
//      .build-release/release/memory-store-benchmark --tokens 1000000

import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func option(_ name: String, _ fallback: String) -> String {
    let args = CommandLine.arguments
    if let i = args.firstIndex(of: name), i + 1 < args.count { return args[i + 1] }
    return fallback
}

let count = Int(option("--tokens", "1000000"))!
let shape = option("--shape", "push-to-start")

func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Anonymous resident memory (RssAnon in /proc/self/status: the heap and the other private
/// pages, not the binary and libraries), in bytes (Linux; 0 elsewhere).
func anonymousResidentBytes() -> Int {
    let fd = open("/proc/self/status", O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let n = read(fd, &buffer, buffer.count)
    guard n > 0 else { return 0 }
    for line in String(decoding: buffer[..<n], as: UTF8.self).split(separator: "\n") where line.hasPrefix("RssAnon:") {
        return (Int(line.dropFirst(8).filter { $0.isNumber }) ?? 0) * 1024
    }
    return 0
}

/// The resident set, from /proc/self/statm (Linux; 0 elsewhere).
func residentBytes() -> Int {
    let fd = open("/proc/self/statm", O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let n = read(fd, &buffer, buffer.count)
    guard n > 0 else { return 0 }
    let fields = String(decoding: buffer[..<n], as: UTF8.self).split(separator: " ")
    return (fields.count > 1 ? Int(fields[1]) ?? 0 : 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// SplitMix64: random-looking hex, spread over the key space like APNs tokens.
struct Scatter {
    var x: UInt64
    mutating func next() -> UInt64 {
        x &+= 0x9E37_79B9_7F4A_7C15
        var z = x
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
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
for i in 0..<count {
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
    let plan = try state.apply(RegisterToken(request), now: now)
    precondition(plan.result == .created)
}
let seconds = monotonic() - start
let anonGrowth = anonymousResidentBytes() - anonBefore
let rssGrowth = residentBytes() - rssBefore
precondition(state.tokenCount == count + 1000)
print(
    """
    memory store, \(count) \(shape) tokens registered in \(Double(Int(seconds * 100)) / 100) s \
    (\(Int(Double(count) / seconds)) registrations/s): \
    anonymous RSS +\(anonGrowth / 1_048_576) MiB = \(anonGrowth / count) bytes/token; \
    RSS +\(rssGrowth / 1_048_576) MiB = \(rssGrowth / count) bytes/token
    """)
