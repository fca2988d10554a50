#if canImport(Glibc)
import Glibc
#endif

/// Keeps a value alive and observable so the optimizer cannot drop the work that made it.
@_optimize(none)
@inline(never)
func blackHole<T>(_ value: T) {}

/// This thread's CPU time, not wall time: on a shared machine, time spent descheduled
/// (other processes on the same cores) would otherwise land in the figures.
/// `--wall-clock` switches to CLOCK_MONOTONIC.
nonisolated(unsafe) var benchmarkClock = CLOCK_THREAD_CPUTIME_ID

@inline(__always)
func nowNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(benchmarkClock, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

struct Options {
    var batches = 7
    var batchMilliseconds = 60
    var verbose = false
    var only: String?
    /// Runs only the measurement with this exact name, for `profileSeconds`: for perf / callgrind.
    var profile: String?
    var profileSeconds = 5.0

    init(_ arguments: [String]) {
        var i = 1
        while i < arguments.count {
            let a = arguments[i]
            func value() -> String {
                i += 1
                guard i < arguments.count else { fatalError("\(a) needs a value") }
                return arguments[i]
            }
            switch a {
            case "--batches": batches = max(5, Int(value()) ?? 7)
            case "--batch-ms": batchMilliseconds = max(5, Int(value()) ?? 60)
            case "--verbose", "-v": verbose = true
            case "--wall-clock": benchmarkClock = CLOCK_MONOTONIC
            case "--only": only = value()
            case "--profile": profile = value()
            case "--profile-seconds": profileSeconds = Double(value()) ?? 5
            case "--help", "-h":
                print("""
                    usage: CodecBenchmark [--batches N (>=5, default 7)] [--batch-ms MS (default 60)] [--only SUBSTRING] [--wall-clock] [--verbose]\n                           [--profile 'StartActivityRequest protobuf-c decode' [--profile-seconds S]]
                    Each figure is the median of N timed batches after one warm-up batch; a batch runs
                    the operation as many times as fit in MS milliseconds (calibrated first). Times are
                    the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) unless --wall-clock is given.
                    """)
                exit(0)
            default: fatalError("unknown argument \(a) (try --help)")
            }
            i += 1
        }
    }
}

struct Measurement {
    var name: String
    /// Nanoseconds per operation, one entry per timed batch.
    var batches: [Double]
    var iterations: Int

    var median: Double {
        let s = batches.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    /// (max - min) / median: how noisy the batches were.
    var spread: Double {
        guard let lo = batches.min(), let hi = batches.max(), median > 0 else { return 0 }
        return (hi - lo) / median
    }
}

/// Runs `body(n)` (which must perform the operation n times) in calibrated batches.
func measure(_ name: String, options: Options, _ body: (Int) -> Void) -> Measurement {
    if let profile = options.profile {
        guard profile == name else { return Measurement(name: name, batches: [1], iterations: 0) }
        let end = nowNanoseconds() + UInt64(options.profileSeconds * 1e9)
        var runs = 0
        while nowNanoseconds() < end {
            body(1000)
            runs += 1000
        }
        print("profiled \(name): \(runs) operations")
        return Measurement(name: name, batches: [1], iterations: runs)
    }
    // Calibrate: grow n until one run takes at least a tenth of a batch.
    var n = 1
    var elapsed: UInt64 = 0
    let target = UInt64(options.batchMilliseconds) * 1_000_000
    while true {
        let start = nowNanoseconds()
        body(n)
        elapsed = nowNanoseconds() - start
        if elapsed >= target / 10 || n >= 1 << 30 { break }
        n *= elapsed < target / 1000 ? 10 : 2
    }
    let iterations = max(1, Int(Double(n) * Double(target) / Double(max(elapsed, 1))))
    body(iterations)  // warm-up batch
    var results: [Double] = []
    for _ in 0..<options.batches {
        let start = nowNanoseconds()
        body(iterations)
        let ns = Double(nowNanoseconds() - start)
        results.append(ns / Double(iterations))
    }
    let m = Measurement(name: name, batches: results, iterations: iterations)
    if options.verbose {
        let list = results.map { format($0, 1) }.joined(separator: " ")
        print("  \(name): \(iterations) ops/batch; ns/op: \(list); median \(format(m.median, 1)); spread \(format(m.spread * 100, 1))%")
    }
    return m
}

func format(_ value: Double, _ decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    var s = String(rounded)
    if decimals == 0, s.hasSuffix(".0") { s.removeLast(2) }
    if decimals > 0, let dot = s.firstIndex(of: ".") {
        let have = s.distance(from: dot, to: s.endIndex) - 1
        if have < decimals { s += String(repeating: "0", count: decimals - have) }
    }
    return s
}

func grouped(_ value: Double) -> String {
    let digits = String(Int(value.rounded()))
    var out = ""
    for (i, c) in digits.reversed().enumerated() {
        if i > 0, i % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}
