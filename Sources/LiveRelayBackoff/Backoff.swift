import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Capped exponential back-off with jitter: the one rule for every wait after
/// a failure (reconnects to APNs, push retries, client reconnects), so that a
/// fleet that failed at the same moment does not come back in lock step, and
/// so that the rule is read, tested and tuned in one place.
///
/// The rule: after `n` consecutive failures (n ≥ 1) the nominal delay is
/// `d = min(initial × multiplierⁿ⁻¹, maximum)`, and the delay returned is
/// `d × (1 − jitter × random)`, drawn from [d × (1 − jitter), d]. Jitter only
/// ever shortens a wait, so `maximum` is a true upper bound that operators can
/// rely on, and `jitter` 0 gives exactly `d`.
///
/// Pure: the caller passes the random number, so a state machine stays
/// deterministic and its tests can pin the delay.
public struct Backoff: Hashable, Sendable {
    /// The nominal wait after the first failure.
    public var initial: TimeAmount
    /// No wait is longer, however many failures came before.
    public var maximum: TimeAmount
    /// Growth per further failure; clamped to at least 1, so waits never shrink as failures add up.
    public var multiplier: Double
    /// The share of each wait (0...1) that the random number may take off.
    public var jitter: Double

    public init(initial: TimeAmount, maximum: TimeAmount, multiplier: Double = 2, jitter: Double = 0.5) {
        self.initial = max(initial, .zero)
        self.maximum = max(maximum, .zero)
        self.multiplier = multiplier.isNaN ? 1 : max(1, multiplier)
        self.jitter = jitter.isNaN ? 0 : min(max(jitter, 0), 1)
    }

    /// The wait after `failures` consecutive failures; `random` in 0...1 (values outside are clamped).
    ///
    /// Zero failures means nothing failed yet, so there is nothing to wait for:
    /// the result is zero, and a first connect goes out at once.
    public func delay(after failures: Int, random: Double) -> TimeAmount {
        guard failures > 0 else { return .zero }
        let cap = Double(self.maximum.nanoseconds)
        // pow with a Double exponent: a huge failure count gives +inf, which the
        // cap absorbs, instead of a loop per failure or an integer overflow.
        let grown = Double(self.initial.nanoseconds) * pow(self.multiplier, Double(failures - 1))
        let nominal = grown.isNaN ? cap : min(grown, cap)
        let unit = random.isNaN ? 0 : min(max(random, 0), 1)
        let nanos = nominal * (1 - self.jitter * unit)
        // Double(Int64.max) rounds up to 2^63, which Int64 cannot hold.
        guard nanos < 9_223_372_036_854_774_784 else { return self.maximum }
        return .nanoseconds(min(Int64(nanos), self.maximum.nanoseconds))
    }
}
