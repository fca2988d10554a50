import LiveRelayAPNs

/// SplitMix64: a tiny seeded generator. Seeded rather than system randomness
/// so a test that injects 10% errors sees the same pushes fail on every run.
public struct MockAPNsRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    public mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1p-53 }
}

/// The injected faults that apply per stream: which error (if any) replaces a
/// 200, and how long to wait before answering. A value type, so a test can
/// replay a seed and know exactly which pushes the server will fail.
public struct MockAPNsFaultPlan: Sendable {
    public var injectedErrors: [MockAPNsInjectedError]
    public var latency: MockAPNsLatency
    public var outages: MockAPNsOutages?
    private var random: MockAPNsRandom

    public init(injectedErrors: [MockAPNsInjectedError], latency: MockAPNsLatency, outages: MockAPNsOutages? = nil, seed: UInt64) {
        self.injectedErrors = injectedErrors
        self.latency = latency
        self.outages = outages
        self.random = MockAPNsRandom(seed: seed)
    }

    /// Applies injection to a verdict: only a 200 can be replaced (a request
    /// APNs would refuse stays refused). During an outage every 200 becomes the
    /// outage's error; otherwise one number is drawn per 200 even when no error
    /// is configured to fire, so the sequence depends only on the count of 200s.
    ///
    /// - Parameters:
    ///   - nowMilliseconds: the mock's clock, for an injected 410's `timestamp`
    ///     (APNs always says when it learnt the token was invalid).
    ///   - sinceStart: how long the server has run, which places the outages.
    public mutating func apply(
        to verdict: MockAPNsVerdict, nowMilliseconds: Int64 = 0, sinceStart: Duration = .zero
    )
        -> MockAPNsVerdict
    {
        guard verdict.status == 200 else { return verdict }
        if let outages, outages.isOutage(sinceStart: sinceStart) {
            return Self.replace(verdict, status: outages.status, reason: outages.reason, retryAfter: nil, now: nowMilliseconds)
        }
        guard !injectedErrors.isEmpty else { return verdict }
        let draw = random.nextUnit()
        var cumulative = 0.0
        for error in injectedErrors {
            cumulative += error.rate
            if draw < cumulative {
                return Self.replace(
                    verdict, status: error.status, reason: error.reason, retryAfter: error.retryAfterSeconds, now: nowMilliseconds)
            }
        }
        return verdict
    }

    private static func replace(
        _ verdict: MockAPNsVerdict, status: Int, reason: String, retryAfter: Int?, now: Int64
    )
        -> MockAPNsVerdict
    {
        var injected = verdict
        injected.response = APNsResponse(
            status: status, reason: reason, timestampMilliseconds: status == 410 ? now : nil,
            apnsID: verdict.response.apnsID, retryAfterSeconds: retryAfter)
        return injected
    }

    /// The delay before the next answer: the fixed part, a draw from the random
    /// range, and for the slow share of answers a draw from the slow range.
    public mutating func nextDelay() -> Duration { nextAnswerDelay().delay }

    /// ``nextDelay()``, and whether the answer is one of the slow tail.
    public mutating func nextAnswerDelay() -> (delay: Duration, slow: Bool) {
        var delay = latency.fixed
        if let range = latency.random { delay += Self.draw(range, random.nextUnit()) }
        guard let slow = latency.slow, slow.rate > 0 else { return (delay, false) }
        // Two draws whether or not this answer is slow, so the sequence depends only on the count of answers.
        let (decide, within) = (random.nextUnit(), random.nextUnit())
        guard decide < slow.rate else { return (delay, false) }
        return (delay + Self.draw(slow.range, within), true)
    }

    private static func draw(_ range: ClosedRange<Duration>, _ unit: Double) -> Duration {
        range.lowerBound + (range.upperBound - range.lowerBound) * unit
    }

    /// True when answering needs a timer at all (the common benchmark case does not).
    public var hasLatency: Bool {
        latency.fixed > .zero || (latency.random.map { $0.upperBound > .zero } ?? false)
            || (latency.slow.map { $0.rate > 0 && $0.range.upperBound > .zero } ?? false)
    }

    /// True when ``apply(to:nowMilliseconds:sinceStart:)`` can change a verdict.
    public var injects: Bool { !injectedErrors.isEmpty || outages != nil }
}

/// What a connection does when a new stream arrives, given how many it has seen:
/// the GOAWAY and drop faults as a pure rule.
public struct MockAPNsConnectionPolicy: Sendable, Hashable {
    public var goAwayAfterStreams: Int?
    public var dropConnectionAfterStreams: Int?
    /// With both faults set: odd-numbered connections get the GOAWAY and even-numbered
    /// ones the drop, so one run meets both (otherwise the smaller limit always wins).
    public var alternate: Bool

    public enum Action: Sendable, Hashable {
        /// Handle the stream.
        case serve
        /// Handle the stream, and send GOAWAY naming it as the last one this connection will process.
        case serveThenGoAway
        /// Close the TCP connection now, without GOAWAY and without answering.
        case drop
    }

    public init(goAwayAfterStreams: Int?, dropConnectionAfterStreams: Int?, alternate: Bool = false) {
        self.goAwayAfterStreams = goAwayAfterStreams
        self.dropConnectionAfterStreams = dropConnectionAfterStreams
        self.alternate = alternate
    }

    /// - Parameters:
    ///   - streamNumber: 1 for the connection's first stream.
    ///   - connection: 1 for the server's first connection; matters only with ``alternate``.
    public func action(forStreamNumber streamNumber: Int, onConnection connection: Int = 1) -> Action {
        var goAway = goAwayAfterStreams, drop = dropConnectionAfterStreams
        if alternate, goAway != nil, drop != nil {
            if connection % 2 == 1 { drop = nil } else { goAway = nil }
        }
        if let drop, streamNumber > drop { return .drop }
        if let goAway, streamNumber == goAway { return .serveThenGoAway }
        return .serve
    }
}
