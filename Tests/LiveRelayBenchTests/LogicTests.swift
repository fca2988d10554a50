import Foundation
import Histogram
import LiveRelayBench
import LiveRelayMessages
import NIOCore
import Testing

@Suite("Scheduling, payloads and summaries (no sockets)")
struct LogicTests {
    @Test func mixKeepsEveryPrefixWithinOneOfItsShare() {
        let entries = [MixEntry(.registerToken, 2), MixEntry(.updateActivity, 5), MixEntry(.ping, 3), MixEntry(.endActivity, 0)]
        var mix = WeightedMix(entries)
        var counts = [BenchRPC: Int]()
        for n in 1...1000 {
            counts[mix.next(), default: 0] += 1
            for entry in entries {
                let expected = Double(n) * Double(entry.weight) / 10
                #expect(abs(Double(counts[entry.rpc] ?? 0) - expected) < 1.0001, "after \(n) picks, \(entry.rpc)")
            }
        }
        #expect(counts[.endActivity] == nil)
        #expect(counts[.updateActivity] == 500)
    }

    @Test func scheduleTimesComeFromTheIndexAndDueCountsAgree() {
        let s = ArrivalSchedule(startNanos: 1_000_000_000, rate: 3000)
        #expect(s.intendedNanos(0) == 1_000_000_000)
        #expect(s.intendedNanos(3000) == 2_000_000_000)
        #expect(s.intendedNanos(1) == 1_000_333_333)
        #expect(s.dueCount(by: 999_999_999) == 0)
        for i in [0, 1, 2, 999, 1000, 2999, 12_345] {
            #expect(s.dueCount(by: s.intendedNanos(i)) == i + 1)
            #expect(s.dueCount(by: s.intendedNanos(i) - 1) == i)
        }
        #expect(s.count(forSeconds: 2.5) == 7500)
    }

    @Test(arguments: [32, 33, 100, 200, 1000, 4096])
    func contentStateHasTheExactSizeAndValidates(bytes: Int) throws {
        for sequence in [0, 7, 123_456_789_012] {
            let json = ContentState.json(bytes: bytes, sequence: sequence)
            #expect(json.utf8.count == bytes)
            #expect(try JSONSerialization.jsonObject(with: Data(json.utf8)) is [String: Any])
            try UpdateActivityRequest(appID: "a", activityID: "x", contentStateJSON: json).validate()
        }
    }

    /// The server decodes and validates every request; a generator sending invalid ones would
    /// measure INVALID_ARGUMENT replies instead of the scenario.
    @Test func everyGeneratedRequestDecodesAndValidates() throws {
        var scenario = Scenario()
        scenario.apps = 2
        scenario.activitiesPerApp = 3
        scenario.tokensPerActivity = 2
        scenario.mix = BenchRPC.allCases.map { MixEntry($0, 1) }
        scenario.contentStateBytes = 300
        let workload = Workload(scenario: scenario, runTag: "0badcafe", endReserve: 4)
        #expect(workload.setupCount == 2 + 2 * 3 * 2 + 4)
        var tokens = Set<String>()
        for i in 0..<workload.setupCount {
            let request = try RegisterTokenRequest(serializedBytes: workload.setupRequest(i))
            tokens.insert(request.token)
        }
        #expect(tokens.count == workload.setupCount, "every setup token is distinct")
        for _ in 0..<3 {
            _ = try RegisterTokenRequest(serializedBytes: workload.request(.registerToken).payload)
            let start = workload.request(.startActivity)
            let decoded = try StartActivityRequest(serializedBytes: start.payload)
            #expect(decoded.activityID == start.started?.activityID)
            _ = try UpdateActivityRequest(serializedBytes: workload.request(.updateActivity).payload)
            _ = try PingRequest(serializedBytes: workload.request(.ping).payload)
        }
        // Four from the reserve, then nothing left: the fifth End targets a missing activity.
        for _ in 0..<5 { _ = try EndActivityRequest(serializedBytes: workload.request(.endActivity).payload) }
        #expect(workload.endsWithoutTarget == 1)
        workload.started((app: 0, activityID: "b0badcafe-s0"))
        let end = try EndActivityRequest(serializedBytes: workload.request(.endActivity).payload)
        #expect(end.activityID == "b0badcafe-s0")
        #expect(workload.endsWithoutTarget == 1)
    }

    @Test func summaryPercentilesAreInMicroseconds() {
        var h = makeLatencyHistogram()
        for ms in 1...1000 { h.record(UInt64(ms) * 1_000_000) }
        let s = LatencySummary(h)
        #expect(abs(s.p50 - 500_000) <= 500)
        #expect(abs(s.p99 - 990_000) <= 1_000)
        #expect(abs(s.max - 1_000_000) <= 1_000)
        #expect(abs(s.mean - 500_500) <= 500)
        #expect(LatencySummary(makeLatencyHistogram()).p99 == 0)
    }

    @Test func gateFailsOnlyOnADropOfThirtyPercentOrMore() throws {
        let baseline = GateBaseline(
            note: "t", nullThroughput: 100_000, scenarios: ["realistic": .init(throughput: 20_000, ratioToNull: 0.2)])
        func verdict(_ ratio: Double) throws -> GateResult {
            try Gate.evaluate(baseline: baseline, measuredRatios: ["realistic": ratio])[0]
        }
        #expect(try verdict(0.2).passed)
        #expect(try verdict(0.5).passed)
        #expect(try verdict(0.1401).passed)
        #expect(try verdict(0.14).passed == false)
        #expect(try verdict(0.1).passed == false)
        #expect(abs(try verdict(0.1).change + 0.5) < 1e-12)
        #expect(throws: BenchError.self) { try Gate.evaluate(baseline: baseline, measuredRatios: ["other": 1]) }
    }

    @Test func gateRatioIsTheMedianOfRounds() {
        #expect(Gate.ratio(scenario: [10, 30, 20], null: [100, 100, 100]) == 0.2)
        #expect(Gate.ratio(scenario: [10, 40], null: [100, 100]) == 0.25)
        // A round whose null run was disturbed (ratio 0.9) does not move the median.
        #expect(Gate.ratio(scenario: [20, 18, 21], null: [100, 20, 105]) == 0.2)
        #expect(Gate.ratio(scenario: [], null: []) == 0)
    }

    @Test func baselineFileRoundTripsInSnakeCase() throws {
        let baseline = GateBaseline(note: "n", nullThroughput: 1, scenarios: ["realistic": .init(throughput: 2, ratioToNull: 0.5)])
        let text = baseline.json()
        #expect(text.contains("\"ratio_to_null\""))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("baseline-\(UUID()).json").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try GateBaseline.load(path: path) == baseline)
    }

    @Test func committedBaselineLoads() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let baseline = try GateBaseline.load(path: root.appendingPathComponent("Benchmarks/bench-baseline.json").path)
        #expect(baseline.maxDrop == 0.30)
        #expect((baseline.scenarios["realistic"]?.ratioToNull ?? 0) > 0)
    }
}
