import Foundation
import Histogram
import LiveRelayMessages

/// The broadcast channel scenario: what one UpdateActivity costs when it goes to
/// a broadcast channel, one POST to APNs however many devices are subscribed, next to the
/// same update fanned out to a large activity's update tokens, one POST per token. Against
/// a running server whose app pushes to a mock APNs that implements channels:
///
/// 1. CreateChannel: a no-storage channel of the app (no storage: the policy Apple gives the
///    higher budget, and the one a live score would use);
/// 2. a push-to-start token, and activity A started with the channel and waiting for
///    delivery, so the mock subscribes that device to the channel;
/// 3. `warmupCalls` then `broadcastCalls` sequential UpdateActivity calls to A, channel
///    only, waiting for delivery: each reply comes once APNs answered the broadcast POST;
/// 4. `fanoutTokens` update tokens of activity B, registered pipelined
///    (`registerConnections` × `registerDepth` in flight), then `fanoutCalls` sequential
///    UpdateActivity calls to B waiting for delivery: each reply comes once APNs answered
///    every one of the tokens' pushes;
/// 5. DeleteChannel, also after a failure, so repeated runs do not pile channels up at the mock.
///
/// Sequential calls, one at a time: the question is a single call's latency, not how many
/// the server carries at once (the other scenarios measure that).
public struct BroadcastScenario: Sendable, Equatable {
    public var appID = "dev.app"
    /// The channel's and the tokens' environment: the one the server's APNs endpoint plays.
    public var environment: Environment = .sandbox
    /// Measured UpdateActivity calls to the channel.
    public var broadcastCalls = 200
    /// Unmeasured channel calls first: the first ones open the APNs connection's streams
    /// and warm the server's paths, which a steady broadcaster would not see.
    public var warmupCalls = 5
    /// Update tokens of activity B, each one push per fan-out call. The app's queue must hold
    /// them all (the development app's holds 100,000).
    public var fanoutTokens = 100_000
    /// Measured UpdateActivity calls to activity B.
    public var fanoutCalls = 10
    public var registerConnections = 4
    /// RegisterToken calls in flight per connection while registering B's tokens. 4 × 32 is
    /// well below the share admission gives an app alone (half of 512 by default).
    public var registerDepth = 32
    /// Size of the content-state JSON of Start and Update.
    public var contentStateBytes = 200
    /// Per call: a 100,000-token fan-out waits for 100,000 APNs answers.
    public var timeoutSeconds = 120.0

    public init() {}

    /// Checks the knobs; the message names the flag.
    public func validate() throws(ScenarioError) {
        guard !appID.isEmpty else { throw ScenarioError("--app-id must not be empty") }
        guard environment == .sandbox || environment == .production else {
            throw ScenarioError("--environment must be sandbox or production")
        }
        guard (1...1_000_000).contains(broadcastCalls) else { throw ScenarioError("--broadcast-calls must be 1...1,000,000") }
        guard (0...10_000).contains(warmupCalls) else { throw ScenarioError("--warmup-calls must be 0...10,000") }
        guard (1...1_000_000).contains(fanoutTokens) else { throw ScenarioError("--tokens must be 1...1,000,000") }
        guard (1...10_000).contains(fanoutCalls) else { throw ScenarioError("--fanout-calls must be 1...10,000") }
        guard (1...64).contains(registerConnections) else { throw ScenarioError("--register-connections must be 1...64") }
        guard (1...1_024).contains(registerDepth) else { throw ScenarioError("--register-depth must be 1...1,024") }
        guard (ContentState.minimumBytes...4_000).contains(contentStateBytes) else {
            // A broadcast's whole payload, aps wrapper included, must stay within APNs's 5,120 bytes.
            throw ScenarioError(
                "--payload-bytes must be \(ContentState.minimumBytes)...4,000 (a broadcast's whole payload is at most 5,120 bytes)")
        }
        guard timeoutSeconds > 0, timeoutSeconds <= 3_600 else { throw ScenarioError("--timeout must be above 0 and at most 3600 s") }
    }

    /// One line for the report: what ran.
    public var description: String {
        "broadcast channel vs fan-out, app \(appID): \(broadcastCalls) UpdateActivity calls to one no-storage channel "
            + "(channel only, after \(warmupCalls) unmeasured), then \(fanoutCalls) to an activity with "
            + "\(formatCount(Double(fanoutTokens))) update tokens; each call waits for delivery and is sent after the "
            + "previous one's reply; content state \(contentStateBytes) bytes"
    }

    /// 64 lowercase hex digits, unique per (run, kind, index) and scattered over the key
    /// space like real tokens (as the other scenarios' tokens are).
    public static func token(runTag: String, kind: UInt8, index: Int) -> String {
        hex(scatter(UInt64(index)), digits: 16) + runTag + hex(UInt64(kind), digits: 2) + "b40c" + String(repeating: "c3", count: 17)
    }
}

/// What the broadcast scenario measured. Latencies in microseconds, from each call's send
/// to its reply (sequential calls: there is no schedule to be late against).
public struct BroadcastReport: Sendable, Codable {
    /// One series of sequential UpdateActivity calls.
    public struct Leg: Sendable, Codable, Equatable {
        public var calls: Int
        public var ok: Int
        public var errors: Int
        /// Of the OK calls.
        public var latencyUs: LatencySummary
        /// From the first call's send to the last reply.
        public var windowSeconds: Double
        /// OK calls per second of the window.
        public var callsPerSecond: Double
        /// What the OK calls' delivery summaries add up to (`deliveredPerSecond` over the window).
        public var pushes: PushAccount
        /// Pushes the priority budget sent at 5 instead of 10.
        public var downgraded: UInt64
        /// OK calls whose summary was not every targeted push delivered.
        public var incomplete: Int
        public var sampleErrors: [String]

        /// - Parameters:
        ///   - latenciesNanos: each OK call's send-to-reply time.
        ///   - summaries: their delivery summaries (nil: the reply had none).
        ///   - errors: the failed calls' messages.
        public init(latenciesNanos: [UInt64], summaries: [DeliverySummary?], errors: [String], windowNanos: UInt64) {
            var histogram = makeLatencyHistogram()
            for nanos in latenciesNanos { histogram.recordClamped(nanos) }
            var pushes = PushAccount()
            var downgraded: UInt64 = 0
            var incomplete = 0
            for summary in summaries {
                guard let summary else {
                    incomplete += 1
                    continue
                }
                pushes.add(summary)
                downgraded += UInt64(summary.downgraded)
                if !summary.complete || summary.delivered != summary.targeted || summary.targeted == 0 { incomplete += 1 }
            }
            let seconds = Double(windowNanos) / 1e9
            pushes.deliveredPerSecond = seconds > 0 ? Double(pushes.delivered) / seconds : 0
            self.calls = latenciesNanos.count + errors.count
            self.ok = latenciesNanos.count
            self.errors = errors.count
            self.latencyUs = LatencySummary(histogram)
            self.windowSeconds = seconds
            self.callsPerSecond = seconds > 0 ? Double(latenciesNanos.count) / seconds : 0
            self.pushes = pushes
            self.downgraded = downgraded
            self.incomplete = incomplete
            self.sampleErrors = Array(Set(errors).sorted().prefix(5))
        }

        /// Pushes each call targeted, on average (1 for a channel: one POST however many devices).
        public var pushesPerCall: Double { ok == 0 ? 0 : Double(pushes.targeted) / Double(ok) }
    }

    /// Registering activity B's update tokens.
    public struct Registration: Sendable, Codable, Equatable {
        public var tokens: Int
        public var seconds: Double
        public var connections: Int
        public var depth: Int
        /// Tokens per second of the registration.
        public var perSecond: Double

        public init(tokens: Int, seconds: Double, connections: Int, depth: Int) {
            self.tokens = tokens
            self.seconds = seconds
            self.connections = connections
            self.depth = depth
            perSecond = seconds > 0 ? Double(tokens) / seconds : 0
        }
    }

    public var description: String
    public var appID: String
    public var channelID: String
    /// Whether DeleteChannel succeeded at the end.
    public var channelDeleted: Bool
    public var broadcast: Leg
    public var registration: Registration
    public var fanout: Leg
    /// The fan-out's tokens per call, as asked.
    public var fanoutTokens: Int
    /// With a server PID: its resident memory after the fan-out, and its peak (VmHWM).
    public var serverRSSBytes: UInt64?
    public var serverPeakRSSBytes: UInt64?

    public init(
        description: String, appID: String, channelID: String, channelDeleted: Bool, broadcast: Leg, registration: Registration,
        fanout: Leg, fanoutTokens: Int, serverRSSBytes: UInt64? = nil, serverPeakRSSBytes: UInt64? = nil
    ) {
        self.description = description
        self.appID = appID
        self.channelID = channelID
        self.channelDeleted = channelDeleted
        self.broadcast = broadcast
        self.registration = registration
        self.fanout = fanout
        self.fanoutTokens = fanoutTokens
        self.serverRSSBytes = serverRSSBytes
        self.serverPeakRSSBytes = serverPeakRSSBytes
    }

    /// The fan-out's p50 over the broadcast's p50: what sending through the channel saves
    /// the caller per update.
    public var p50Ratio: Double { broadcast.latencyUs.p50 > 0 ? fanout.latencyUs.p50 / broadcast.latencyUs.p50 : .infinity }

    /// Whether every call succeeded and every push of every call was delivered.
    public var clean: Bool {
        broadcast.errors == 0 && fanout.errors == 0 && broadcast.incomplete == 0 && fanout.incomplete == 0
            && broadcast.pushes.accountedFor && fanout.pushes.accountedFor
    }

    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// The two legs side by side, then what is needed to read them.
    public func table() -> String {
        func ms(_ us: Double) -> String { fmt(us / 1000, 3) }
        var lines = [description, "channel \(channelID) of \(appID)\(channelDeleted ? ", deleted at the end" : ", NOT deleted")"]
        let header = ["UpdateActivity", "calls", "ok", "p50 ms", "p90 ms", "p99 ms", "max ms", "calls/s", "pushes/call", "pushes/s"]
        let rows = [("one broadcast POST", broadcast), ("\(formatCount(Double(fanoutTokens))) tokens", fanout)].map { name, leg in
            [
                name, "\(leg.calls)", "\(leg.ok)", ms(leg.latencyUs.p50), ms(leg.latencyUs.p90), ms(leg.latencyUs.p99),
                ms(leg.latencyUs.max), fmt(leg.callsPerSecond, 1), formatCount(leg.pushesPerCall),
                formatCount(leg.pushes.deliveredPerSecond),
            ]
        }
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func render(_ row: [String]) -> String {
            row.enumerated().map { i, cell in
                i == 0
                    ? cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[i] - cell.count) + cell
            }.joined(separator: "  ")
        }
        lines.append(render(header))
        for row in rows { lines.append(render(row)) }
        lines.append(
            "registration: \(formatCount(Double(registration.tokens))) update tokens in \(fmt(registration.seconds, 2)) s "
                + "(\(formatCount(registration.perSecond))/s, \(registration.connections) connections × \(registration.depth) in flight)")
        lines.append("fan-out p50 / broadcast p50: \(fmt(p50Ratio, 0))x")
        for (name, leg) in [("broadcast", broadcast), ("fan-out", fanout)] {
            lines.append("\(name) \(leg.pushes.line); downgraded \(leg.downgraded)")
            if leg.incomplete > 0 { lines.append("\(name): \(leg.incomplete) OK calls not fully delivered") }
            for e in leg.sampleErrors { lines.append("\(name) error: \(e)") }
        }
        if let rss = serverRSSBytes, let peak = serverPeakRSSBytes {
            lines.append("server memory after the fan-out: RSS \(rss / 1_048_576) MiB, peak \(peak / 1_048_576) MiB")
        }
        lines.append("latency: from each call's send to its reply; the calls go one at a time")
        return lines.joined(separator: "\n")
    }
}
