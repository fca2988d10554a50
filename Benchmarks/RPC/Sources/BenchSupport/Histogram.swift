/// A log-linear latency histogram in the manner of HdrHistogram: 64 linear
/// sub-buckets per power of two, so every recorded value is known to within
/// 1/64 (1.6 %) of itself, from 1 ns to about 2^40 ns (18 minutes; larger
/// values land in the last bucket, and `max` stays exact).
///
/// One per worker (no locking on the hot path); merged at the end.
public struct LatencyHistogram: Sendable {
    static let subBucketBits = 7
    static let half = 1 << (subBucketBits - 1)  // 64
    static let maxShift = 40 - (subBucketBits - 1)
    static let bucketCount = (maxShift + 2) * half

    public private(set) var counts: [UInt64]
    public private(set) var totalCount: UInt64 = 0
    public private(set) var min: UInt64 = .max
    public private(set) var max: UInt64 = 0
    public private(set) var sum: Double = 0

    public init() {
        counts = [UInt64](repeating: 0, count: Self.bucketCount)
    }

    @inline(__always)
    static func index(of value: UInt64) -> Int {
        if value < UInt64(2 * half) { return Int(value) }
        let msb = 63 - value.leadingZeroBitCount
        let shift = Swift.min(msb - (subBucketBits - 1), maxShift)
        let sub = Swift.min(Int(value >> UInt64(shift)), 2 * half - 1)
        return shift * half + sub
    }

    /// The highest value that lands in bucket `index` (what HdrHistogram reports for a percentile).
    static func highestEquivalentValue(ofIndex index: Int) -> UInt64 {
        if index < 2 * half { return UInt64(index) }
        let shift = index / half - 1
        let sub = UInt64(index - shift * half)
        return ((sub + 1) << UInt64(shift)) - 1
    }

    @inline(__always)
    public mutating func record(_ nanoseconds: UInt64) {
        counts[Self.index(of: nanoseconds)] &+= 1
        totalCount &+= 1
        if nanoseconds < min { min = nanoseconds }
        if nanoseconds > max { max = nanoseconds }
        sum += Double(nanoseconds)
    }

    public mutating func merge(_ other: LatencyHistogram) {
        guard other.totalCount > 0 else { return }
        for i in 0..<counts.count { counts[i] &+= other.counts[i] }
        totalCount &+= other.totalCount
        min = Swift.min(min, other.min)
        max = Swift.max(max, other.max)
        sum += other.sum
    }

    /// The value at `percentile` (0...100), never above the exact maximum.
    public func value(atPercentile percentile: Double) -> UInt64 {
        guard totalCount > 0 else { return 0 }
        let target = Swift.max(UInt64(1), UInt64((percentile / 100 * Double(totalCount)).rounded(.up)))
        var seen: UInt64 = 0
        for (i, c) in counts.enumerated() where c > 0 {
            seen += c
            if seen >= target { return Swift.min(Self.highestEquivalentValue(ofIndex: i), max) }
        }
        return max
    }

    public var mean: Double { totalCount == 0 ? 0 : sum / Double(totalCount) }
}
