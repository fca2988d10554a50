import LiveRelayAPNs
import NIOConcurrencyHelpers

/// A wall clock that moves only when told to, shared safely between threads:
/// the 8-hour expiry, provider-token refreshes and same-second updates are
/// exercised without sleeping.
public final class ManualClock: WallClock, @unchecked Sendable {
    private let lock = NIOLock()
    private var current: UnixTime

    public init(_ start: UnixTime = UnixTime(seconds: 1_700_000_000)) { self.current = start }

    public func now() -> UnixTime { lock.withLock { current } }

    public func set(_ time: UnixTime) { lock.withLock { current = time } }

    public func advance(by duration: UnixTime.Duration) {
        lock.withLock { current = current + duration }
    }
}
