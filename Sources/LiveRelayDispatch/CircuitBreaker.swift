import LiveRelayBackoff
import NIOCore

/// When a route's circuit breaker opens and how long it stays open.
public struct CircuitBreakerPolicy: Hashable, Sendable {
    /// Consecutive route failures (5xx answers, connection failures, timeouts)
    /// that open a closed breaker. High enough that one dropped connection's
    /// handful of streams or a short 503 burst costs nothing, low enough that
    /// an outage is noticed within one round of the in-flight window.
    public var failureThreshold: Int
    /// The cooldown after the n-th opening since the breaker was last closed:
    /// each failed probe waits longer, up to the back-off's maximum, so a long
    /// outage costs one request per cooldown, not a retry storm.
    public var cooldown: Backoff

    public init(
        failureThreshold: Int = 50,
        cooldown: Backoff = Backoff(initial: .seconds(1), maximum: .seconds(30), multiplier: 2, jitter: 0.2)
    ) {
        self.failureThreshold = max(1, failureThreshold)
        self.cooldown = cooldown
    }
}

/// One route's circuit breaker, as a value: the scheduler asks it before each
/// send and tells it what each answer said; it holds no clock and no random
/// source (the caller passes both), so its rules are tested step by step.
///
/// - closed: everything is sent; `failureThreshold` route failures in a row
///   open it (any other answer resets the count);
/// - open: nothing is sent until the cooldown ends; queued pushes wait (and
///   still expire at their send-by time), they do not fail;
/// - half-open: one send (the probe) goes; its success closes the breaker,
///   its failure opens it again with the next, longer cooldown.
///
/// Only fresh evidence counts: while open or half-open, answers to sends made
/// before the breaker opened are ignored (a success that left before the
/// outage proves nothing about it, and a failure has been counted already),
/// and only the probe's answer moves a half-open breaker.
public struct CircuitBreaker: Hashable, Sendable {
    public enum State: Hashable, Sendable {
        case closed
        case open(until: NIODeadline)
        /// `probing`: the one probe is on the wire, so nothing else may go.
        case halfOpen(probing: Bool)
    }

    /// A change of state, for the logs and the metrics.
    public enum Transition: Hashable, Sendable {
        /// Opened (from closed, or again after a failed probe) until the cooldown's end.
        case opened(until: NIODeadline)
        case halfOpened
        case closed

        /// The `to` dimension of the transition counter.
        public var label: String {
            switch self {
            case .opened: "open"
            case .halfOpened: "half_open"
            case .closed: "closed"
            }
        }
    }

    /// What an answer says about the route.
    public enum Outcome: Hashable, Sendable {
        /// APNs answered (whatever it said about the push, except a 5xx).
        case success
        /// A 5xx answer, or no answer: the connection failed, was lost or timed out.
        case failure
        /// Says nothing about the route's health (a GOAWAY refusal, the transport shutting down).
        case neutral
    }

    public let policy: CircuitBreakerPolicy
    public private(set) var state = State.closed
    /// Route failures in a row while closed.
    public private(set) var consecutiveFailures = 0
    /// Openings since the breaker was last closed: the next cooldown is the back-off after this many.
    public private(set) var openings = 0

    public init(policy: CircuitBreakerPolicy = CircuitBreakerPolicy()) {
        self.policy = policy
    }

    /// When an open breaker's cooldown ends (the scheduler wakes up then).
    public var reopensAt: NIODeadline? {
        if case let .open(until) = state { until } else { nil }
    }

    /// Whether a send may go now (call ``advance(now:)`` first).
    public var allowsSend: Bool {
        switch state {
        case .closed, .halfOpen(probing: false): true
        case .open, .halfOpen(probing: true): false
        }
    }

    /// Ends a cooldown that is over: open becomes half-open.
    public mutating func advance(now: NIODeadline) -> Transition? {
        guard case let .open(until) = state, until <= now else { return nil }
        state = .halfOpen(probing: false)
        return .halfOpened
    }

    /// Records a send ``allowsSend`` let through; true when it is the probe
    /// (its answer must then be recorded with `probe: true`).
    public mutating func sent() -> Bool {
        guard case .halfOpen(probing: false) = state else { return false }
        state = .halfOpen(probing: true)
        return true
    }

    /// Records an answer to a send; `probe` as ``sent()`` returned for it.
    /// `random` is drawn from only when the breaker opens (the cooldown's
    /// jitter), so the caller's other random draws do not shift with every answer.
    public mutating func record<Random: RandomNumberGenerator>(
        _ outcome: Outcome, probe: Bool, now: NIODeadline, using random: inout Random
    ) -> Transition? {
        switch state {
        case .closed:
            switch outcome {
            case .success:
                consecutiveFailures = 0
            case .failure:
                consecutiveFailures += 1
                if consecutiveFailures >= policy.failureThreshold { return open(now: now, using: &random) }
            case .neutral:
                break
            }
        case .halfOpen(probing: true) where probe:
            switch outcome {
            case .success:
                state = .closed
                consecutiveFailures = 0
                openings = 0
                return .closed
            case .failure:
                return open(now: now, using: &random)
            case .neutral:
                // The probe proved nothing; the next send probes instead.
                state = .halfOpen(probing: false)
            }
        case .open, .halfOpen:
            break
        }
        return nil
    }

    private mutating func open<Random: RandomNumberGenerator>(now: NIODeadline, using random: inout Random) -> Transition {
        openings += 1
        consecutiveFailures = 0
        let until = now + policy.cooldown.delay(after: openings, random: Double.random(in: 0...1, using: &random))
        state = .open(until: until)
        return .opened(until: until)
    }
}
