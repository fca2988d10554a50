/// Picks RPCs in the scenario's proportions, deterministically.
///
/// Smooth weighted round-robin (each pick adds every weight to a running credit and takes
/// the largest, then subtracts the total): after any n picks each RPC's count is within one
/// of n × weight / total, and the kinds are interleaved rather than bunched. A random draw
/// would make short runs and the tests depend on luck.
public struct WeightedMix: Sendable {
    private let rpcs: [BenchRPC]
    private let weights: [Int]
    private let total: Int
    private var credit: [Int]

    public init(_ entries: [MixEntry]) {
        let positive = entries.filter { $0.weight > 0 }
        precondition(!positive.isEmpty, "a mix needs a positive weight")
        rpcs = positive.map(\.rpc)
        weights = positive.map(\.weight)
        total = weights.reduce(0, +)
        credit = Array(repeating: 0, count: positive.count)
    }

    public mutating func next() -> BenchRPC {
        var best = 0
        for i in credit.indices {
            credit[i] += weights[i]
            if credit[i] > credit[best] { best = i }
        }
        credit[best] -= total
        return rpcs[best]
    }
}

/// The open-loop timetable: request `i` is due at `start + i / rate`, fixed before the run.
///
/// Computing each due time from its index (not by adding an interval to the previous send)
/// keeps the rate exact over long runs and makes the *intended* send time of every request
/// known whether or not it could be sent then: latency is measured from it, so time a request
/// spends waiting behind a stalled server or a full outstanding bound is counted instead of
/// being omitted (coordinated omission).
public struct ArrivalSchedule: Sendable, Equatable {
    public let startNanos: UInt64
    public let rate: Double

    public init(startNanos: UInt64, rate: Double) {
        precondition(rate > 0)
        self.startNanos = startNanos
        self.rate = rate
    }

    /// When request `index` (0-based) should be sent.
    @inline(__always)
    public func intendedNanos(_ index: Int) -> UInt64 {
        startNanos &+ UInt64((Double(index) * 1e9 / rate).rounded())
    }

    /// How many requests are due by `nanos` (the index of the first one that is not).
    public func dueCount(by nanos: UInt64) -> Int {
        guard nanos >= startNanos else { return 0 }
        // Floor from the formula, then correct the rounding at the edge exactly.
        var n = Int((Double(nanos - startNanos) * rate / 1e9).rounded(.down)) + 1
        while n > 0, intendedNanos(n - 1) > nanos { n -= 1 }
        while intendedNanos(n) <= nanos { n += 1 }
        return n
    }

    /// Requests in `seconds` of schedule (at least one).
    public func count(forSeconds seconds: Double) -> Int { max(1, Int((seconds * rate).rounded())) }
}

/// The content-state JSON of Start, Update and End at an exact byte size, so payload size
/// is a scenario knob: `{"seq":N,"pad":"xxxx"}` with the padding filling the rest.
public enum ContentState {
    /// `{"seq":0,"pad":""}` plus room for a sequence number of up to 12 digits.
    public static let minimumBytes = 32

    public static func json(bytes: Int, sequence: Int) -> String {
        let seq = String(sequence % 1_000_000_000_000)
        let fixed = #"{"seq":,"pad":""}"#.utf8.count + seq.utf8.count
        let pad = max(0, bytes - fixed)
        return #"{"seq":"# + seq + #","pad":""# + String(repeating: "x", count: pad) + #""}"#
    }
}
