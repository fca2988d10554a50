import Foundation

/// The committed reference for the CI regression gate (Benchmarks/bench-baseline.json).
///
/// Absolute throughput says more about the machine (and whoever else is using it) than
/// about the code, so each scenario is stored as a ratio to the null service measured in the
/// same run on the same machine; the gate compares ratios. The null figure is kept for
/// information only.
public struct GateBaseline: Codable, Sendable, Equatable {
    public struct Entry: Codable, Sendable, Equatable {
        /// OK replies per second when the baseline was recorded (information only).
        public var throughput: Double
        /// Throughput divided by the null service's, same run: what the gate compares.
        public var ratioToNull: Double

        public init(throughput: Double, ratioToNull: Double) {
            self.throughput = throughput
            self.ratioToNull = ratioToNull
        }
    }

    public var note: String
    /// A ratio this much below the baseline's (0.30 = 30%) fails the gate.
    public var maxDrop: Double
    public var nullThroughput: Double
    public var scenarios: [String: Entry]

    public init(note: String, maxDrop: Double = 0.30, nullThroughput: Double, scenarios: [String: Entry]) {
        self.note = note
        self.maxDrop = maxDrop
        self.nullThroughput = nullThroughput
        self.scenarios = scenarios
    }

    public static func load(path: String) throws -> GateBaseline {
        guard let data = FileManager.default.contents(atPath: path) else { throw BenchError("cannot read the baseline \(path)") }
        do {
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            return try decoder.decode(GateBaseline.self, from: data)
        } catch {
            throw BenchError("\(path): not a bench baseline: \(error)")
        }
    }

    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self) + "\n"
    }
}

/// One scenario's verdict.
public struct GateResult: Sendable, Equatable, Codable {
    public var scenario: String
    public var baselineRatio: Double
    public var measuredRatio: Double
    /// measured / baseline − 1 (−0.35 = 35% lower than the baseline).
    public var change: Double
    public var passed: Bool
}

/// The gate's arithmetic, apart from any measurement so it can be tested exactly.
public enum Gate {
    /// The median of per-round ratios: rounds alternate null and scenario runs, so each
    /// ratio compares two windows a few seconds apart, and the median drops a round that a
    /// neighbour's build happened to disturb.
    public static func ratio(scenario: [Double], null: [Double]) -> Double {
        let ratios = zip(scenario, null).compactMap { s, n in n > 0 ? s / n : nil }.sorted()
        guard !ratios.isEmpty else { return 0 }
        let mid = ratios.count / 2
        return ratios.count % 2 == 1 ? ratios[mid] : (ratios[mid - 1] + ratios[mid]) / 2
    }

    /// Fails a scenario only when its ratio dropped by `baseline.maxDrop` or more; a scenario
    /// missing from the baseline is an error (the baseline must be re-recorded, not skipped).
    public static func evaluate(baseline: GateBaseline, measuredRatios: [String: Double]) throws -> [GateResult] {
        try measuredRatios.keys.sorted().map { name in
            guard let entry = baseline.scenarios[name] else {
                throw BenchError("the baseline has no scenario \"\(name)\"; re-record it with `liverelay bench gate --write-baseline`")
            }
            let measured = measuredRatios[name]!
            let change = entry.ratioToNull > 0 ? measured / entry.ratioToNull - 1 : 0
            // A small epsilon so that exactly a 30% drop fails despite floating-point rounding.
            let passed = change > -baseline.maxDrop + 1e-9
            return GateResult(scenario: name, baselineRatio: entry.ratioToNull, measuredRatio: measured, change: change, passed: passed)
        }
    }

    /// The gate's fixed scenarios: short, closed loop (throughput is what is compared), the same
    /// shape against both servers. Changing them invalidates the baseline.
    public static func scenarios(seconds: Double) -> (null: Scenario, realistic: Scenario) {
        var null = Scenario()
        null.name = "null"
        null.shape = .closed(connections: 4, depth: 32)
        null.mix = [MixEntry(.registerToken, 1)]
        null.stop = .duration(seconds: seconds)
        null.warmupSeconds = 1
        null.timeoutSeconds = 10
        var realistic = null
        realistic.name = "realistic"
        realistic.mix = [
            MixEntry(.registerToken, 2), MixEntry(.startActivity, 1), MixEntry(.updateActivity, 5),
            MixEntry(.endActivity, 1), MixEntry(.ping, 1),
        ]
        realistic.activitiesPerApp = 50
        realistic.tokensPerActivity = 2
        realistic.contentStateBytes = 200
        return (null, realistic)
    }
}
