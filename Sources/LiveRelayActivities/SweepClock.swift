import LiveRelayAPNs

/// The time the expiry sweep runs at: the wall clock, unless it jumped
/// forward while the process ran.
///
/// The sweep expires every activity whose 8 hours have passed and deletes its
/// tokens, on every node sharing the database. A wall clock stepped forward
/// by hours (a bad NTP source, an operator's typo, a VM restored from a
/// snapshot) would expire every live activity at once. So between two sweeps
/// the sweep's time advances by no more than the monotonic clock did, plus
/// ``tolerance`` (NTP's slewing and small steps pass); beyond that it stays
/// held back, advancing with the monotonic clock, and the caller logs the
/// jump. A backward step is taken as is: sweeping later loses nothing.
/// Holding back lasts until the process restarts, when the sweep takes the
/// wall clock again: the operator fixes the clock (or confirms it) first.
/// The calls' own rules read the wall clock; only the mass deletion waits.
public struct SweepClock: Sendable {
    /// How far the wall clock may run ahead of the monotonic clock between two sweeps.
    public static let tolerance = UnixTime.Duration.minutes(2)

    private var last: (sweptAt: UnixTime, monotonicMilliseconds: Int64)?

    public init() {}

    /// The time to sweep at, given the wall clock and a monotonic clock (any
    /// origin, in milliseconds) read now; `heldBack` is how far the wall clock
    /// is ahead of it (nil when the wall clock is taken).
    public mutating func sweepTime(wall: UnixTime, monotonicMilliseconds: Int64) -> (now: UnixTime, heldBack: UnixTime.Duration?) {
        var now = wall
        var heldBack: UnixTime.Duration?
        if let last {
            let expected = last.sweptAt + .milliseconds(max(0, monotonicMilliseconds - last.monotonicMilliseconds))
            if wall > expected + Self.tolerance {
                now = expected
                heldBack = .milliseconds(wall.milliseconds - expected.milliseconds)
            }
        }
        last = (now, monotonicMilliseconds)
        return (now, heldBack)
    }
}
