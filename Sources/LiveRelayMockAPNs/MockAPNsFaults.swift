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
    private var random: MockAPNsRandom

    public init(injectedErrors: [MockAPNsInjectedError], latency: MockAPNsLatency, seed: UInt64) {
        self.injectedErrors = injectedErrors
        self.latency = latency
        self.random = MockAPNsRandom(seed: seed)
    }

    /// Applies injection to a verdict: only a 200 can be replaced (a request
    /// APNs would refuse stays refused). Draws one number per 200 even when no
    /// error is configured to fire, so the sequence depends only on the count of 200s.
    public mutating func apply(to verdict: MockAPNsVerdict) -> MockAPNsVerdict {
        guard verdict.status == 200, !injectedErrors.isEmpty else { return verdict }
        let draw = random.nextUnit()
        var cumulative = 0.0
        for error in injectedErrors {
            cumulative += error.rate
            if draw < cumulative {
                var injected = verdict
                injected.response = APNsResponse(
                    status: error.status, reason: error.reason,
                    apnsID: verdict.response.apnsID)
                return injected
            }
        }
        return verdict
    }

    /// The delay before the next answer.
    public mutating func nextDelay() -> Duration {
        guard let range = latency.random else { return latency.fixed }
        let span = range.upperBound - range.lowerBound
        return latency.fixed + range.lowerBound + span * random.nextUnit()
    }

    /// True when answering needs a timer at all (the common benchmark case does not).
    public var hasLatency: Bool { latency.fixed > .zero || (latency.random.map { $0.upperBound > .zero } ?? false) }
}

/// What a connection does when a new stream arrives, given how many it has seen:
/// the GOAWAY and drop faults as a pure rule.
public struct MockAPNsConnectionPolicy: Sendable, Hashable {
    public var goAwayAfterStreams: Int?
    public var dropConnectionAfterStreams: Int?

    public enum Action: Sendable, Hashable {
        /// Handle the stream.
        case serve
        /// Handle the stream, and send GOAWAY naming it as the last one this connection will process.
        case serveThenGoAway
        /// Close the TCP connection now, without GOAWAY and without answering.
        case drop
    }

    public init(goAwayAfterStreams: Int?, dropConnectionAfterStreams: Int?) {
        self.goAwayAfterStreams = goAwayAfterStreams
        self.dropConnectionAfterStreams = dropConnectionAfterStreams
    }

    /// - Parameter streamNumber: 1 for the connection's first stream.
    public func action(forStreamNumber streamNumber: Int) -> Action {
        if let drop = dropConnectionAfterStreams, streamNumber > drop { return .drop }
        if let goAway = goAwayAfterStreams, streamNumber == goAway { return .serveThenGoAway }
        return .serve
    }
}
