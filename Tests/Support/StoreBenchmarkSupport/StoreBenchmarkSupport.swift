// What the three store benchmarks (memory, SQLite, PostgreSQL) share: their command-line
// options, a monotonic clock, tokens, /proc readings and the formatting of their figures
// (and, in StoreCallTimings.swift, the SQL stores' timed calls).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The value after `name` on the command line, or `fallback`.
public func option(_ name: String, _ fallback: String) -> String {
    let args = CommandLine.arguments
    if let i = args.firstIndex(of: name), i + 1 < args.count { return args[i + 1] }
    return fallback
}

/// Seconds on the monotonic clock.
public func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// A 64-hex token: `prefix`, then `n` in hex, zero-padded between.
public func hexToken(_ prefix: String, _ n: Int) -> String {
    let digits = String(n, radix: 16)
    return prefix + String(repeating: "0", count: 64 - prefix.count - digits.count) + digits
}

/// One step of SplitMix64: random-looking words, spread over the key space like APNs tokens.
public func splitMix64(_ x: inout UInt64) -> UInt64 {
    x &+= 0x9E37_79B9_7F4A_7C15
    var z = x
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

/// The value of the line of a /proc file that starts with `key` (say "RssAnon:"), as a
/// number with its unit dropped; 0 when the file or the line is missing (not Linux).
public func procValue(_ path: String, _ key: String) -> Int {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let n = read(fd, &buffer, buffer.count)
    guard n > 0 else { return 0 }
    for line in String(decoding: buffer[..<n], as: UTF8.self).split(separator: "\n") where line.hasPrefix(key) {
        return Int(line.dropFirst(key.count).filter { $0.isNumber }) ?? 0
    }
    return 0
}

public func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// `value` rounded to `digits` decimals.
public func format(_ value: Double, _ digits: Int = 1) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    return String((value * scale).rounded() / scale)
}
