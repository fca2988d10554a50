import Foundation

/// A scenario problem, worded for the person who wrote the file or typed the flags:
/// where (file and field or flag), what is wrong, and what would be accepted.
public struct ScenarioError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A scenario as written: every field optional, so a file and flags can each say part of it
/// and flags win. `resolve()` applies the defaults and checks the whole.
public struct ScenarioSpec: Sendable, Equatable {
    public enum Mode: String, Sendable { case open, closed }

    public var name: String?
    public var mode: Mode?
    public var rate: Double?
    public var connections: Int?
    public var depth: Int?
    public var maxOutstanding: Int?
    public var mix: [MixEntry]?
    public var apps: Int?
    public var appID: String?
    public var activitiesPerApp: Int?
    public var tokensPerActivity: Int?
    public var contentStateBytes: Int?
    public var durationSeconds: Double?
    public var requests: Int?
    public var warmupSeconds: Double?
    public var timeoutSeconds: Double?
    public var waitForDelivery: Bool?

    public init() {}

    /// The keys a scenario file may use (snake case, like the rest of LiveRelay's JSON).
    public static let fileKeys = [
        "name", "mode", "rate", "connections", "depth", "max_outstanding", "mix", "apps", "app_id",
        "activities_per_app", "tokens_per_activity", "content_state_bytes", "duration_seconds", "requests",
        "warmup_seconds", "timeout_seconds", "wait_for_delivery",
    ]

    /// Parses a scenario file. Unknown keys are errors: a misspelt "duraton" silently
    /// running the default 10 s would make a benchmark measure something else than asked.
    public init(json data: Data, source: String) throws(ScenarioError) {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw ScenarioError("\(source): not valid JSON (\((error as NSError).localizedDescription))")
        }
        guard let dict = object as? [String: Any] else {
            throw ScenarioError("\(source): expected a JSON object at the top level")
        }
        for key in dict.keys.sorted() where !Self.fileKeys.contains(key) {
            throw ScenarioError("\(source): unknown key \"\(key)\"; known keys: \(Self.fileKeys.joined(separator: ", "))")
        }
        func field(_ key: String) -> String { "\(source): \"\(key)\"" }
        func string(_ key: String) throws(ScenarioError) -> String? {
            guard let value = dict[key] else { return nil }
            guard let s = value as? String else { throw ScenarioError("\(field(key)) must be a string") }
            return s
        }
        func number(_ key: String) throws(ScenarioError) -> Double? {
            guard let value = dict[key] else { return nil }
            guard let n = value as? NSNumber, !isJSONBoolean(value) else {
                throw ScenarioError("\(field(key)) must be a number, got \(Self.describe(value))")
            }
            return n.doubleValue
        }
        func integer(_ key: String) throws(ScenarioError) -> Int? {
            guard let d = try number(key) else { return nil }
            guard d == d.rounded(), abs(d) < 1e15 else { throw ScenarioError("\(field(key)) must be a whole number, got \(d)") }
            return Int(d)
        }
        name = try string("name")
        if let m = try string("mode") {
            guard let parsed = Mode(rawValue: m) else {
                throw ScenarioError("\(field("mode")) must be \"open\" or \"closed\", got \"\(m)\"")
            }
            mode = parsed
        }
        rate = try number("rate")
        connections = try integer("connections")
        depth = try integer("depth")
        maxOutstanding = try integer("max_outstanding")
        if let raw = dict["mix"] {
            guard let weights = raw as? [String: Any] else {
                throw ScenarioError("\(field("mix")) must be an object of RPC name to weight, e.g. {\"UpdateActivity\": 4, \"Ping\": 1}")
            }
            var entries: [MixEntry] = []
            for (key, value) in weights.sorted(by: { $0.key < $1.key }) {
                guard let rpc = BenchRPC(name: key) else {
                    throw ScenarioError(
                        "\(field("mix")): unknown RPC \"\(key)\"; expected one of \(BenchRPC.allCases.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                guard let n = value as? NSNumber, !isJSONBoolean(value), n.doubleValue == n.doubleValue.rounded() else {
                    throw ScenarioError(
                        "\(field("mix")): the weight of \(rpc.rawValue) must be a whole number, got \(Self.describe(value))")
                }
                entries.append(MixEntry(rpc, n.intValue))
            }
            mix = entries.sorted { $0.rpc.index < $1.rpc.index }
        }
        apps = try integer("apps")
        appID = try string("app_id")
        activitiesPerApp = try integer("activities_per_app")
        tokensPerActivity = try integer("tokens_per_activity")
        contentStateBytes = try integer("content_state_bytes")
        durationSeconds = try number("duration_seconds")
        requests = try integer("requests")
        warmupSeconds = try number("warmup_seconds")
        timeoutSeconds = try number("timeout_seconds")
        if let value = dict["wait_for_delivery"] {
            guard isJSONBoolean(value), let flag = value as? Bool else {
                throw ScenarioError("\(field("wait_for_delivery")) must be true or false, got \(Self.describe(value))")
            }
            waitForDelivery = flag
        }
    }

    private static func describe(_ value: Any) -> String {
        if isJSONBoolean(value) { return "a boolean" }
        if let s = value as? String { return "the string \"\(s)\"" }
        if value is NSNull { return "null" }
        if value is [Any] { return "an array" }
        if value is [String: Any] { return "an object" }
        return "\(value)"
    }

    /// Parses `--mix` text: `update=4,register=1,ping` (a name alone weighs 1).
    public static func parseMix(_ text: String) throws(ScenarioError) -> [MixEntry] {
        var entries: [MixEntry] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: true) {
            let pieces = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let rpc = BenchRPC(name: pieces[0]) else {
                throw ScenarioError(
                    "--mix: unknown RPC \"\(pieces[0])\"; expected one of \(BenchRPC.allCases.map(\.rawValue).joined(separator: ", ")) (or register, start, update, end, ping)"
                )
            }
            var weight = 1
            if pieces.count == 2 {
                guard let w = Int(pieces[1]) else {
                    throw ScenarioError("--mix: the weight of \(rpc.rawValue) must be a whole number, got \"\(pieces[1])\"")
                }
                weight = w
            }
            if entries.contains(where: { $0.rpc == rpc }) { throw ScenarioError("--mix: \(rpc.rawValue) appears twice") }
            entries.append(MixEntry(rpc, weight))
        }
        if entries.isEmpty { throw ScenarioError("--mix: empty; e.g. --mix update=4,register=1") }
        return entries.sorted { $0.rpc.index < $1.rpc.index }
    }

    /// `other`'s fields replace these where set (flags over a file).
    public func overridden(by other: ScenarioSpec) -> ScenarioSpec {
        var s = self
        s.name = other.name ?? s.name
        s.mode = other.mode ?? s.mode
        s.rate = other.rate ?? s.rate
        s.connections = other.connections ?? s.connections
        s.depth = other.depth ?? s.depth
        s.maxOutstanding = other.maxOutstanding ?? s.maxOutstanding
        s.mix = other.mix ?? s.mix
        s.apps = other.apps ?? s.apps
        s.appID = other.appID ?? s.appID
        s.activitiesPerApp = other.activitiesPerApp ?? s.activitiesPerApp
        s.tokensPerActivity = other.tokensPerActivity ?? s.tokensPerActivity
        s.contentStateBytes = other.contentStateBytes ?? s.contentStateBytes
        // Duration and request count exclude each other: whichever the override sets wins.
        if other.durationSeconds != nil || other.requests != nil {
            s.durationSeconds = other.durationSeconds
            s.requests = other.requests
        }
        s.warmupSeconds = other.warmupSeconds ?? s.warmupSeconds
        s.timeoutSeconds = other.timeoutSeconds ?? s.timeoutSeconds
        s.waitForDelivery = other.waitForDelivery ?? s.waitForDelivery
        return s
    }

    /// Applies defaults and checks every field; the message names the field and the accepted range.
    public func resolve() throws(ScenarioError) -> Scenario {
        var s = Scenario()
        s.name = name ?? s.name
        let mode = self.mode ?? (rate != nil ? .open : .closed)
        let connections = self.connections ?? 4
        guard connections >= 1, connections <= 1024 else { throw ScenarioError("connections must be 1...1024, got \(connections)") }
        switch mode {
        case .open:
            guard let rate else { throw ScenarioError("open-loop mode needs a rate (requests per second): \"rate\" in the file or --rate") }
            guard rate > 0, rate <= 5_000_000, rate.isFinite else {
                throw ScenarioError("rate must be > 0 and at most 5,000,000 requests/s, got \(rate)")
            }
            if depth != nil {
                throw ScenarioError("depth applies to closed-loop mode only; open-loop mode bounds calls in flight with max_outstanding")
            }
            let maxOutstanding = self.maxOutstanding ?? 10_000
            guard maxOutstanding >= 1 else { throw ScenarioError("max_outstanding must be at least 1, got \(maxOutstanding)") }
            s.shape = .open(rate: rate, connections: connections, maxOutstanding: maxOutstanding)
        case .closed:
            if rate != nil {
                throw ScenarioError(
                    "rate applies to open-loop mode only (closed loop sends as fast as replies come back); drop it or use mode open")
            }
            if maxOutstanding != nil {
                throw ScenarioError("max_outstanding applies to open-loop mode only; closed loop has connections x depth in flight")
            }
            let depth = self.depth ?? 32
            guard depth >= 1, depth <= 4096 else { throw ScenarioError("depth must be 1...4096, got \(depth)") }
            s.shape = .closed(connections: connections, depth: depth)
        }
        if let mix {
            guard !mix.isEmpty else { throw ScenarioError("mix is empty: give at least one RPC a positive weight") }
            for entry in mix where entry.weight < 0 || entry.weight > 1_000_000 {
                throw ScenarioError("mix: the weight of \(entry.rpc.rawValue) must be 0...1,000,000, got \(entry.weight)")
            }
            guard mix.contains(where: { $0.weight > 0 }) else {
                throw ScenarioError("mix: every weight is 0; give at least one RPC a positive weight")
            }
            s.mix = mix
        }
        s.apps = apps ?? s.apps
        guard s.apps >= 1, s.apps <= 10_000 else { throw ScenarioError("apps must be 1...10,000, got \(s.apps)") }
        s.appID = appID ?? s.appID
        guard !s.appID.isEmpty, s.appID.utf8.count <= 100,
            s.appID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "_" || $0 == "-") })
        else { throw ScenarioError("app_id must be 1-100 characters of A-Z, a-z, 0-9, '.', '_', '-', got \"\(s.appID)\"") }
        s.activitiesPerApp = activitiesPerApp ?? s.activitiesPerApp
        guard s.activitiesPerApp >= 1, s.activitiesPerApp <= 1_000_000 else {
            throw ScenarioError("activities_per_app must be 1...1,000,000, got \(s.activitiesPerApp)")
        }
        s.tokensPerActivity = tokensPerActivity ?? s.tokensPerActivity
        guard s.tokensPerActivity >= 0, s.tokensPerActivity <= 1_000_000 else {
            throw ScenarioError("tokens_per_activity must be 0...1,000,000, got \(s.tokensPerActivity)")
        }
        if s.tokensPerActivity == 0, s.weight(of: .updateActivity) + s.weight(of: .endActivity) > 0 {
            throw ScenarioError(
                "tokens_per_activity 0 leaves no activity to update or end: the setup phase creates activities by registering their update tokens"
            )
        }
        guard s.apps * s.activitiesPerApp * max(1, s.tokensPerActivity) <= 5_000_000 else {
            throw ScenarioError("apps x activities_per_app x tokens_per_activity is above 5,000,000 setup registrations")
        }
        s.contentStateBytes = contentStateBytes ?? s.contentStateBytes
        guard s.contentStateBytes >= ContentState.minimumBytes, s.contentStateBytes <= 4096 else {
            throw ScenarioError(
                "content_state_bytes must be \(ContentState.minimumBytes)...4096 (the protocol's limit for a JSON field), got \(s.contentStateBytes)"
            )
        }
        switch (durationSeconds, requests) {
        case (.some, .some):
            throw ScenarioError("give either a duration or a request count, not both")
        case let (.some(d), nil):
            guard d > 0, d <= 86_400 else { throw ScenarioError("duration_seconds must be > 0 and at most 86,400, got \(d)") }
            s.stop = .duration(seconds: d)
        case let (nil, .some(n)):
            guard n >= 1 else { throw ScenarioError("requests must be at least 1, got \(n)") }
            s.stop = .requests(n)
        case (nil, nil):
            break
        }
        s.warmupSeconds = warmupSeconds ?? s.warmupSeconds
        guard s.warmupSeconds >= 0, s.warmupSeconds <= 3600 else {
            throw ScenarioError("warmup_seconds must be 0...3600, got \(s.warmupSeconds)")
        }
        s.timeoutSeconds = timeoutSeconds ?? s.timeoutSeconds
        guard s.timeoutSeconds > 0, s.timeoutSeconds <= 600 else {
            throw ScenarioError("timeout_seconds must be > 0 and at most 600, got \(s.timeoutSeconds)")
        }
        s.waitForDelivery = waitForDelivery ?? s.waitForDelivery
        return s
    }
}

/// Whether a JSONSerialization value was `true`/`false`: Foundation bridges booleans to
/// NSNumber too (and `1 is Bool` holds), so only the boxed type tells them apart.
private func isJSONBoolean(_ value: Any) -> Bool {
    guard let n = value as? NSNumber else { return false }
    return String(cString: n.objCType) == "c"
}
