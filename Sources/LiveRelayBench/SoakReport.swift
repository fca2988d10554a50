import Foundation

/// The server's side of a soak, as plain values: read by whoever composed the
/// server (the dispatcher's counters, the APNs client's metrics, the mock's
/// counters, the process's memory), so this module needs none of them.
public struct SoakServerFigures: Sendable, Codable, Equatable {
    /// The dispatcher's totals over every app.
    public var enqueued = 0
    public var delivered = 0
    public var pruned = 0
    public var superseded = 0
    public var expired = 0
    public var failures: [String: Int] = [:]
    /// Requests handed to the APNs client, retries included.
    public var attempts = 0
    public var retries = 0
    /// What the dispatcher still held once the last call was answered and it was given time to finish.
    public var unfinished = 0
    public var inFlight = 0
    /// Apps suspended by the mass-pruning guard or a credential rejection.
    public var appSuspensions = 0
    /// Circuit breakers that opened, over every route.
    public var circuitOpenings = 0
    /// Answers the APNs client read, by HTTP status.
    public var apnsAnswers: [String: Int] = [:]
    /// Sends that got no answer, by reason (ConnectionLost, RefusedByGoAway...).
    public var transportErrors: [String: Int] = [:]
    public var mock = Mock()
    /// Each injected fault and how often it happened: a soak whose faults did not happen proves nothing.
    public var faults: [String: Int] = [:]
    /// The process's peak resident memory (VmHWM): server, mock and load generator together.
    public var peakRSSBytes: UInt64?

    public struct Mock: Sendable, Codable, Equatable {
        public var connections = 0
        public var streams = 0
        public var answers: [String: Int] = [:]
        public var goAways = 0
        public var drops = 0
        /// Pushes that arrived after their own `apns-expiration`.
        public var receivedAfterExpiration = 0
        public var mostMillisecondsPastExpiration: Int64 = 0

        public init() {}

        public var answered200: Int { answers["200"] ?? 0 }
    }

    public init() {}

    public var failed: Int { failures.values.reduce(0, +) }
}

/// A soak's figures and its verdict: the table it prints, the JSON a test
/// reads, and every violation of the soak's rules.
public struct SoakReport: Sendable, Codable {
    public var description: String
    public var targetPushes: Int
    public var calls: SoakCalls
    public var server: SoakServerFigures
    public var rssBoundBytes: UInt64
    /// How long after its `apns-expiration` a push may reach the mock: the time from
    /// the sender's last look at the clock (just before it writes the stream) to the
    /// mock reading it, one event-loop turn on each side of a loopback connection.
    public var expiryAllowanceMilliseconds: Int64
    /// Empty when every rule held.
    public var violations: [String]

    public init(
        description: String, targetPushes: Int, calls: SoakCalls, server: SoakServerFigures, rssBoundBytes: UInt64,
        expiryAllowanceMilliseconds: Int64 = 0
    ) {
        self.description = description
        self.targetPushes = targetPushes
        self.calls = calls
        self.server = server
        self.rssBoundBytes = rssBoundBytes
        self.expiryAllowanceMilliseconds = max(0, expiryAllowanceMilliseconds)
        self.violations = Self.violations(
            targetPushes: targetPushes, calls: calls, server: server, rssBoundBytes: rssBoundBytes,
            expiryAllowanceMilliseconds: self.expiryAllowanceMilliseconds)
    }

    /// The rules:
    /// 1. every call succeeded, and every Start, Update and End reply was final
    ///    with targeted = delivered + failed + pruned + superseded + expired;
    /// 2. at least `targetPushes` pushes were targeted;
    /// 3. the replies add up to the dispatcher's own totals, outcome by outcome
    ///    and failure reason by reason (no push counted twice or lost between them);
    /// 4. nothing is left queued, retrying or in flight at the end;
    /// 5. no push reached the mock later than its `apns-expiration` plus the allowance
    ///    (the sender does not write a push past its send-by time, and the transit
    ///    from that check to the mock is all the allowance covers);
    /// 6. every push counted delivered was answered 200 by the mock;
    /// 7. the peak RSS stayed under the bound;
    /// 8. every injected fault happened at least once.
    public static func violations(
        targetPushes: Int, calls: SoakCalls, server: SoakServerFigures, rssBoundBytes: UInt64, expiryAllowanceMilliseconds: Int64 = 0
    ) -> [String] {
        var out: [String] = []
        let p = calls.pushes
        if calls.errorCount > 0 {
            let list = calls.errors.sorted { $0.key < $1.key }.map { "\($0.key) x\($0.value)" }.joined(separator: ", ")
            out.append("\(calls.errorCount) calls failed: \(list)")
        }
        if calls.notAddingUp > 0 { out.append("\(calls.notAddingUp) replies were not final or did not add up") }
        if !p.accountedFor { out.append("the replies' totals do not add up: \(p.line)") }
        if p.targeted < UInt64(targetPushes) { out.append("only \(p.targeted) pushes targeted, fewer than \(targetPushes)") }
        let pairs: [(String, UInt64, Int)] = [
            ("targeted/enqueued", p.targeted, server.enqueued), ("delivered", p.delivered, server.delivered),
            ("failed", p.failed, server.failed), ("pruned", p.pruned, server.pruned),
            ("superseded", p.superseded, server.superseded), ("expired", p.expired, server.expired),
        ]
        for (name, replies, dispatcher) in pairs where replies != UInt64(max(0, dispatcher)) {
            out.append("\(name): the replies say \(replies), the dispatcher \(dispatcher)")
        }
        let reasons = Set(p.failures.keys).union(server.failures.keys)
        for reason in reasons.sorted() where p.failures[reason] ?? 0 != UInt64(server.failures[reason] ?? 0) {
            out.append("failed \(reason): the replies say \(p.failures[reason] ?? 0), the dispatcher \(server.failures[reason] ?? 0)")
        }
        if server.unfinished != 0 || server.inFlight != 0 {
            out.append("the dispatcher still holds \(server.unfinished) unfinished pushes (\(server.inFlight) in flight)")
        }
        if server.mock.receivedAfterExpiration > 0, server.mock.mostMillisecondsPastExpiration > expiryAllowanceMilliseconds {
            out.append(
                "\(server.mock.receivedAfterExpiration) pushes reached APNs after their apns-expiration, the latest "
                    + "\(server.mock.mostMillisecondsPastExpiration) ms after it (allowed: \(expiryAllowanceMilliseconds) ms)")
        }
        if server.mock.answered200 < server.delivered {
            out.append("the dispatcher counts \(server.delivered) delivered, the mock answered 200 only \(server.mock.answered200) times")
        }
        if let peak = server.peakRSSBytes {
            if peak > rssBoundBytes { out.append("peak RSS \(mebibytes(peak)) MiB is above the bound of \(mebibytes(rssBoundBytes)) MiB") }
        } else {
            out.append("no peak RSS reading (/proc/self/status)")
        }
        for (fault, count) in server.faults.sorted(by: { $0.key < $1.key }) where count <= 0 {
            out.append("the fault \"\(fault)\" never happened")
        }
        return out
    }

    public var passed: Bool { violations.isEmpty }

    /// Pushes targeted per second of the run.
    public var pushesPerSecond: Double { calls.seconds > 0 ? Double(calls.pushes.targeted) / calls.seconds : 0 }

    public func table() -> String {
        let p = calls.pushes, s = server
        func n(_ v: some BinaryInteger) -> String { formatCount(Double(v)) }
        func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
        func row(_ name: String, _ replies: String, _ dispatcher: String) -> String {
            "  " + pad(name, 12) + String(repeating: " ", count: max(0, 14 - replies.count)) + replies
                + String(repeating: " ", count: max(0, 14 - dispatcher.count)) + dispatcher
        }
        func list(_ counts: [String: Int]) -> String {
            counts.isEmpty ? "none" : counts.sorted { $0.key < $1.key }.map { "\($0.key) \(n($0.value))" }.joined(separator: ", ")
        }
        var lines: [String] = []
        lines.append("fault soak: \(description)")
        lines.append(
            "calls: \(n(calls.lifecycles)) lifecycles; \(n(calls.registrations)) RegisterToken, \(n(calls.starts)) StartActivity, "
                + "\(n(calls.updates)) UpdateActivity, \(n(calls.ends)) EndActivity; \(n(calls.errorCount)) failed, "
                + "\(n(calls.notAddingUp)) not adding up")
        lines.append(
            "duration \(String(format: "%.1f", calls.seconds)) s; \(n(p.targeted)) pushes targeted (\(formatCount(pushesPerSecond))/s), "
                + "\(n(p.delivered)) delivered (\(formatCount(calls.seconds > 0 ? Double(p.delivered) / calls.seconds : 0))/s)")
        lines.append(row("pushes", "replies", "dispatcher"))
        lines.append(row("targeted", n(p.targeted), n(s.enqueued)))
        lines.append(row("delivered", n(p.delivered), n(s.delivered)))
        lines.append(row("failed", n(p.failed), n(s.failed)))
        lines.append(row("pruned", n(p.pruned), n(s.pruned)))
        lines.append(row("superseded", n(p.superseded), n(s.superseded)))
        lines.append(row("expired", n(p.expired), n(s.expired)))
        lines.append(row("queued", n(p.queued), n(s.unfinished)))
        lines.append("failures by reason: \(list(p.failures.mapValues { Int($0) }))")
        lines.append("calls refused by the server's admission and sent again: \(list(calls.refusals))")
        lines.append(
            "sends to APNs \(n(s.attempts)), retries \(n(s.retries)), circuit-breaker openings \(n(s.circuitOpenings)), "
                + "app suspensions \(n(s.appSuspensions))")
        lines.append("APNs answers read by the client, by status: \(list(s.apnsAnswers))")
        lines.append("sends without an answer: \(list(s.transportErrors))")
        lines.append(
            "mock: \(n(s.mock.connections)) connections, \(n(s.mock.streams)) streams, \(n(s.mock.goAways)) GOAWAYs, "
                + "\(n(s.mock.drops)) dropped connections; answers \(list(s.mock.answers))")
        lines.append(
            "pushes received after their apns-expiration: \(n(s.mock.receivedAfterExpiration))"
                + (s.mock.receivedAfterExpiration > 0 ? ", the latest \(s.mock.mostMillisecondsPastExpiration) ms after it" : "")
                + " (allowed: \(expiryAllowanceMilliseconds) ms)")
        lines.append("faults that happened: \(list(s.faults))")
        lines.append(
            "peak RSS \(s.peakRSSBytes.map { "\(mebibytes($0)) MiB" } ?? "unknown") (bound \(mebibytes(rssBoundBytes)) MiB, "
                + "server, mock and load generator in one process)")
        if violations.isEmpty {
            lines.append("PASS: every call's account adds up, nothing is left queued, no push was sent after its expiry")
        } else {
            lines.append("FAIL: \(violations.count) violations")
            lines += violations.map { "  - " + $0 }
            lines += calls.samples.map { "  sample: " + $0 }
        }
        return lines.joined(separator: "\n")
    }

    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

func mebibytes(_ bytes: UInt64) -> Int { Int((Double(bytes) / 1_048_576).rounded()) }
