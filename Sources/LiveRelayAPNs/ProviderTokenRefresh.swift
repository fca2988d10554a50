import NIOConcurrencyHelpers

/// When to sign a new provider token, as a value with no clock and no I/O:
/// every method takes the time, and says what to do in an action.
///
/// The rules (Apple's token-based connection documentation):
/// - one token per signing key, shared by every connection;
/// - a new one once the current is ``Policy/refreshAfterSeconds`` old (50 min),
///   well before APNs's one-hour expiry;
/// - never two within ``Policy/minimumIntervalSeconds`` (20 min): APNs answers
///   429 TooManyProviderTokenUpdates to a faster rotation;
/// - a 403 ExpiredProviderToken on a stream that used generation `g` forces one
///   refresh, however many streams report `g`: reports of an older generation
///   are stale (the refresh they ask for has happened).
///
/// If APNs calls a token younger than 20 minutes expired, our clock and APNs's
/// disagree by more than 40 minutes; a new token signed with the same clock
/// would not fare better, and rotating would earn 429s on top. So the report is
/// remembered, the current token stays, and the forced refresh happens as soon
/// as the token turns 20 minutes old (``ExpiredReportOutcome/deferred(untilSeconds:)``
/// tells the caller, which should log it as clock skew). Meanwhile pushes keep
/// failing with ExpiredProviderToken and the dispatcher's back-off applies.
public struct ProviderTokenRefresh: Hashable, Sendable {
    public struct Policy: Hashable, Sendable {
        /// Age at which a token is replaced without being asked.
        public var refreshAfterSeconds: Int64
        /// The smallest age at which a token may be replaced, forced or not.
        public var minimumIntervalSeconds: Int64

        public init(refreshAfterSeconds: Int64 = 50 * 60, minimumIntervalSeconds: Int64 = 20 * 60) {
            precondition(refreshAfterSeconds >= minimumIntervalSeconds, "a scheduled refresh may not break the minimum interval")
            self.refreshAfterSeconds = refreshAfterSeconds
            self.minimumIntervalSeconds = minimumIntervalSeconds
        }
    }

    enum State: Hashable, Sendable {
        case noToken
        /// `generation` counts tokens from 1; `forced` is set by an expiry report for it.
        case token(issuedAt: Int64, generation: Int, forced: Bool)
    }

    /// What the caller must do to have a token to send.
    public enum Action: Hashable, Sendable {
        /// Keep sending the current token, which is this generation.
        case useCurrent(generation: Int)
        /// Sign a token with `iat = issuedAt`; it becomes this generation. The
        /// machine already counts it as current; if signing fails, restore the
        /// copy of the machine taken before the call (it is a value).
        case signNew(issuedAt: Int64, generation: Int)
    }

    /// What became of an ExpiredProviderToken report.
    public enum ExpiredReportOutcome: Hashable, Sendable {
        /// The next ``tokenNeeded(nowSeconds:)`` signs a new token.
        case refreshScheduled
        /// Already scheduled by an earlier report of the same generation.
        case alreadyScheduled
        /// The generation is not the current one: a newer token is already in use.
        case stale
        /// The token is younger than the minimum interval: the refresh waits until then.
        case deferred(untilSeconds: Int64)
    }

    public let policy: Policy
    private(set) var state: State = .noToken

    public init(policy: Policy = Policy()) { self.policy = policy }

    /// The generation of the current token, 0 before the first.
    public var currentGeneration: Int {
        if case .token(_, let generation, _) = state { return generation }
        return 0
    }

    /// Called whenever a stream is about to open.
    public mutating func tokenNeeded(nowSeconds: Int64) -> Action {
        switch state {
        case .noToken:
            state = .token(issuedAt: nowSeconds, generation: 1, forced: false)
            return .signNew(issuedAt: nowSeconds, generation: 1)
        case .token(let issuedAt, let generation, let forced):
            // A clock stepped backwards makes the age negative: treat it as new, never as old.
            let age = max(0, nowSeconds - issuedAt)
            let due = age >= policy.refreshAfterSeconds || (forced && age >= policy.minimumIntervalSeconds)
            guard due else { return .useCurrent(generation: generation) }
            state = .token(issuedAt: nowSeconds, generation: generation + 1, forced: false)
            return .signNew(issuedAt: nowSeconds, generation: generation + 1)
        }
    }

    /// A stream that carried `generation` was answered 403 ExpiredProviderToken.
    public mutating func expiredReported(generation: Int, nowSeconds: Int64) -> ExpiredReportOutcome {
        guard case .token(let issuedAt, let current, let forced) = state, generation == current else { return .stale }
        if forced { return .alreadyScheduled }
        state = .token(issuedAt: issuedAt, generation: current, forced: true)
        let earliest = issuedAt + policy.minimumIntervalSeconds
        return nowSeconds >= earliest ? .refreshScheduled : .deferred(untilSeconds: earliest)
    }
}

/// The provider token of one signing key, shared by every connection that
/// pushes with it (connections of one pool, and pools of several endpoints).
///
/// Thread-safe; signs lazily, under its lock, so one token is signed however
/// many streams ask at once. The rules are ``ProviderTokenRefresh``'s.
public final class ProviderTokenSource: Sendable {
    private struct Locked {
        var machine: ProviderTokenRefresh
        var token: String?
    }

    private let locked: NIOLockedValueBox<Locked>
    private let signer: @Sendable (Int64) throws -> String
    private let clock: any WallClock
    /// The signing key's id, for logs and metrics (never the token).
    public let keyID: String

    /// - Parameters:
    ///   - clock: the wall clock; tests pass a `ManualClock`.
    public convenience init(
        key: APNsSigningKey,
        policy: ProviderTokenRefresh.Policy = .init(),
        clock: any WallClock = SystemClock()
    ) {
        self.init(keyID: key.keyID, policy: policy, clock: clock) { issuedAt in
            try key.makeProviderToken(issuedAt: issuedAt)
        }
    }

    /// With any signer: for tests that count signings, or keys held elsewhere.
    public init(
        keyID: String,
        policy: ProviderTokenRefresh.Policy = .init(),
        clock: any WallClock = SystemClock(),
        signer: @escaping @Sendable (Int64) throws -> String
    ) {
        self.keyID = keyID
        self.locked = NIOLockedValueBox(Locked(machine: ProviderTokenRefresh(policy: policy), token: nil))
        self.signer = signer
        self.clock = clock
    }

    /// The token to put in `authorization: bearer`, and its generation (which
    /// the caller hands back to ``reportExpired(generation:)`` if APNs calls it expired).
    public func current() throws -> (token: String, generation: Int) {
        try current(nowSeconds: clock.now().seconds)
    }

    /// ``current()`` at an explicit time.
    public func current(nowSeconds: Int64) throws -> (token: String, generation: Int) {
        try locked.withLockedValue { state in
            let before = state.machine
            switch state.machine.tokenNeeded(nowSeconds: nowSeconds) {
            case .useCurrent(let generation):
                return (state.token!, generation)
            case .signNew(let issuedAt, let generation):
                do {
                    let token = try signer(issuedAt)
                    state.token = token
                    return (token, generation)
                } catch {
                    // Signing with a loaded key fails only when OpenSSL is out of memory:
                    // forget the attempt so the next stream tries again.
                    state.machine = before
                    throw error
                }
            }
        }
    }

    /// A stream sent with `generation` got 403 ExpiredProviderToken.
    @discardableResult
    public func reportExpired(generation: Int) -> ProviderTokenRefresh.ExpiredReportOutcome {
        reportExpired(generation: generation, nowSeconds: clock.now().seconds)
    }

    @discardableResult
    public func reportExpired(generation: Int, nowSeconds: Int64) -> ProviderTokenRefresh.ExpiredReportOutcome {
        locked.withLockedValue { $0.machine.expiredReported(generation: generation, nowSeconds: nowSeconds) }
    }
}
