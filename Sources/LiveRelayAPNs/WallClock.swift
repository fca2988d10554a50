#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A point in wall-clock time, in UNIX milliseconds.
///
/// The rules take time as a value instead of reading a clock so that every
/// decision is reproducible in a test. APNs
/// speaks UNIX seconds; LiveRelay keeps milliseconds so that Ping can report
/// skew and so that ordering within a second is not lost in the store.
public struct UnixTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var milliseconds: Int64

    public init(milliseconds: Int64) { self.milliseconds = milliseconds }
    public init(seconds: Int64) { self.milliseconds = seconds &* 1000 }

    /// Whole seconds, rounded down: what APNs `timestamp`, `stale-date` and friends carry.
    public var seconds: Int64 { milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000 }

    public static func < (a: UnixTime, b: UnixTime) -> Bool { a.milliseconds < b.milliseconds }
    public static func + (a: UnixTime, b: Duration) -> UnixTime { UnixTime(milliseconds: a.milliseconds + b.milliseconds) }
    public static func - (a: UnixTime, b: Duration) -> UnixTime { UnixTime(milliseconds: a.milliseconds - b.milliseconds) }

    /// A span of time in milliseconds; named so that lifetimes read as lifetimes.
    public struct Duration: Hashable, Sendable {
        public var milliseconds: Int64
        public init(milliseconds: Int64) { self.milliseconds = milliseconds }
        public static func milliseconds(_ ms: Int64) -> Duration { Duration(milliseconds: ms) }
        public static func seconds(_ s: Int64) -> Duration { Duration(milliseconds: s * 1000) }
        public static func minutes(_ m: Int64) -> Duration { .seconds(m * 60) }
        public static func hours(_ h: Int64) -> Duration { .seconds(h * 3600) }
    }

    public var description: String { "\(milliseconds)ms" }
}

/// Where the rules, the provider tokens and the dispatcher get wall-clock
/// "now" from: ``SystemClock`` in production, a manual clock in tests so that
/// the 8-hour expiry, token refreshes and same-second updates can be exercised
/// without sleeping.
public protocol WallClock: Sendable {
    func now() -> UnixTime
}

/// The wall clock (CLOCK_REALTIME): APNs timestamps are wall-clock UNIX seconds.
public struct SystemClock: WallClock {
    public init() {}

    public func now() -> UnixTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UnixTime(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }
}
