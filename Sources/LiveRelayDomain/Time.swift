#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A point in wall-clock time, in UNIX milliseconds.
///
/// The rules take time as a value instead of reading a clock so that every
/// decision is reproducible in a test (and, later, in a replayed log). APNs
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

/// Where the service gets "now" from: the system clock in production, a
/// ``ManualClock`` in tests so that the 8-hour expiry and same-second updates
/// can be exercised without sleeping.
public protocol DomainClock: Sendable {
    func now() -> UnixTime
}

/// The wall clock (CLOCK_REALTIME): APNs timestamps are wall-clock UNIX seconds.
public struct SystemClock: DomainClock {
    public init() {}

    public func now() -> UnixTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UnixTime(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }
}

/// A clock that moves only when told to, shared safely between threads.
public final class ManualClock: DomainClock, @unchecked Sendable {
    private let lock = DomainMutex()
    private var current: UnixTime

    public init(_ start: UnixTime = UnixTime(seconds: 1_700_000_000)) { self.current = start }

    public func now() -> UnixTime { lock.withLock { current } }

    public func set(_ time: UnixTime) { lock.withLock { current = time } }

    public func advance(by duration: UnixTime.Duration) {
        lock.withLock { current = current + duration }
    }
}

/// A plain pthread mutex: the domain depends on nothing that offers one, and
/// `Synchronization.Mutex` needs a newer macOS than the package's floor.
final class DomainMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
