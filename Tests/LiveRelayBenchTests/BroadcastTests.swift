import Foundation
import LiveRelayBench
import LiveRelayMessages
import Testing

/// The broadcast scenario's pure parts: its knobs, the statistics of a leg of sequential
/// calls, and the report's table and JSON (the run itself needs a server and a mock APNs
/// with channels: `scripts/bench.sh broadcast`).
@Suite("Broadcast scenario (no sockets)")
struct BroadcastTests {
    @Test func theDefaultsAreTheIssuesFigures() throws {
        let s = BroadcastScenario()
        try s.validate()
        #expect(s.broadcastCalls == 200 && s.fanoutTokens == 100_000 && s.fanoutCalls == 10)
        #expect(s.timeoutSeconds >= 120, "a 100k fan-out must fit in one call's timeout")
        #expect(s.registerConnections * s.registerDepth <= 256, "within admission's share for an app alone")
    }

    @Test func aBadKnobIsRefusedByItsFlagsName() {
        let cases: [(String, (inout BroadcastScenario) -> Void)] = [
            ("--broadcast-calls", { $0.broadcastCalls = 0 }),
            ("--warmup-calls", { $0.warmupCalls = -1 }),
            ("--tokens", { $0.fanoutTokens = 0 }),
            ("--tokens", { $0.fanoutTokens = 1_000_001 }),
            ("--fanout-calls", { $0.fanoutCalls = 0 }),
            ("--register-connections", { $0.registerConnections = 0 }),
            ("--register-depth", { $0.registerDepth = 5_000 }),
            ("--payload-bytes", { $0.contentStateBytes = 10 }),
            ("--payload-bytes", { $0.contentStateBytes = 6_000 }),
            ("--timeout", { $0.timeoutSeconds = 0 }),
            ("--timeout", { $0.timeoutSeconds = .nan }),
            ("--app-id", { $0.appID = "" }),
            ("--environment", { $0.environment = .unspecified }),
        ]
        for (flag, change) in cases {
            var s = BroadcastScenario()
            change(&s)
            do {
                try s.validate()
                Issue.record("\(flag): accepted")
            } catch {
                #expect(error.description.contains(flag), "\(flag): \(error.description)")
            }
        }
    }

    @Test func tokensAreDistinctHexOfAPNsLength() {
        let tokens = (0..<1_000).map { BroadcastScenario.token(runTag: "0123abcd", kind: 2, index: $0) }
        #expect(Set(tokens).count == tokens.count)
        #expect(tokens.allSatisfy { $0.count == 64 && $0.allSatisfy(\.isHexDigit) && $0 == $0.lowercased() })
        #expect(BroadcastScenario.token(runTag: "0123abcd", kind: 1, index: 0) != tokens[0])
        #expect(BroadcastScenario.token(runTag: "99999999", kind: 2, index: 0) != tokens[0])
    }

    @Test func aLegsPercentilesRatesAndPushesAddUp() {
        // 1...100 ms, shuffled: the order of the calls must not matter.
        let latencies = (1...100).map { UInt64($0) * 1_000_000 }.shuffled()
        var summaries: [DeliverySummary?] = Array(
            repeating: DeliverySummary(targeted: 1, delivered: 1, complete: true), count: 97)
        summaries.append(DeliverySummary(targeted: 1, delivered: 1, complete: true, downgraded: 1))
        summaries.append(DeliverySummary(targeted: 1, failed: 1, failures: [FailureCount(reason: "Timeout", count: 1)], complete: true))
        summaries.append(nil)
        let leg = BroadcastReport.Leg(
            latenciesNanos: latencies, summaries: summaries, errors: ["UNAVAILABLE: gone", "UNAVAILABLE: gone", "DEADLINE_EXCEEDED"],
            windowNanos: 2_000_000_000)
        #expect(leg.calls == 103 && leg.ok == 100 && leg.errors == 3)
        #expect(leg.sampleErrors == ["DEADLINE_EXCEEDED", "UNAVAILABLE: gone"])
        // HdrHistogram at 3 significant digits: within 0.1%.
        #expect(abs(leg.latencyUs.p50 - 50_000) <= 50)
        #expect(abs(leg.latencyUs.p90 - 90_000) <= 90)
        #expect(abs(leg.latencyUs.p99 - 99_000) <= 99)
        #expect(abs(leg.latencyUs.max - 100_000) <= 100)
        #expect(leg.windowSeconds == 2)
        #expect(leg.callsPerSecond == 50)
        #expect(leg.pushes.calls == 99 && leg.pushes.targeted == 99 && leg.pushes.delivered == 98 && leg.pushes.failed == 1)
        #expect(leg.pushes.accountedFor)
        #expect(leg.pushes.deliveredPerSecond == 49)
        #expect(leg.downgraded == 1)
        #expect(leg.incomplete == 2, "the failed push and the reply without a summary")
        #expect(leg.pushesPerCall == 0.99)
    }

    @Test func anEmptyLegReportsZerosNotNaN() {
        let leg = BroadcastReport.Leg(latenciesNanos: [], summaries: [], errors: ["x"], windowNanos: 0)
        #expect(leg.calls == 1 && leg.ok == 0 && leg.latencyUs.p50 == 0 && leg.callsPerSecond == 0 && leg.pushesPerCall == 0)
        #expect(leg.pushes.deliveredPerSecond == 0)
    }

    static func sampleReport() -> BroadcastReport {
        let broadcast = BroadcastReport.Leg(
            latenciesNanos: Array(repeating: 2_000_000, count: 200),
            summaries: Array(repeating: DeliverySummary(targeted: 1, delivered: 1, complete: true), count: 200), errors: [],
            windowNanos: 500_000_000)
        let fanout = BroadcastReport.Leg(
            latenciesNanos: Array(repeating: 2_000_000_000, count: 10),
            summaries: Array(repeating: DeliverySummary(targeted: 100_000, delivered: 100_000, complete: true), count: 10),
            errors: [], windowNanos: 20_000_000_000)
        return BroadcastReport(
            description: BroadcastScenario().description, appID: "dev.app", channelID: "Y2hhbm5lbA==", channelDeleted: true,
            broadcast: broadcast, registration: .init(tokens: 100_000, seconds: 4, connections: 4, depth: 32), fanout: fanout,
            fanoutTokens: 100_000)
    }

    @Test func theTableShowsBothLegsSideBySide() {
        let report = Self.sampleReport()
        #expect(report.clean)
        #expect(abs(report.p50Ratio - 1_000) < 2)
        let table = report.table()
        let lines = table.split(separator: "\n").map(String.init)
        let header = lines.first { $0.hasPrefix("UpdateActivity") } ?? ""
        #expect(header.contains("p50 ms") && header.contains("max ms") && header.contains("pushes/s"))
        let one = lines.first { $0.hasPrefix("one broadcast POST") } ?? ""
        let many = lines.first { $0.hasPrefix("100,000 tokens") } ?? ""
        let oneCells = one.split(separator: " ").map(String.init)
        let manyCells = many.split(separator: " ").map(String.init)
        // name (3 words), calls, ok, 4 latencies, calls/s, pushes/call, pushes/s.
        #expect(oneCells.count == 12 && oneCells[3] == "200" && oneCells[4] == "200", "\(one)")
        #expect(Array(oneCells.suffix(3)) == ["400.0", "1", "400"], "\(one)")
        #expect(manyCells.count == 11 && manyCells[2] == "10", "\(many)")
        #expect(Array(manyCells.suffix(3)) == ["0.5", "100,000", "50,000"], "\(many)")
        #expect(table.contains("registration: 100,000 update tokens in 4.00 s (25,000/s, 4 connections × 32 in flight)"))
        #expect(table.contains("deleted at the end"))
        #expect(table.contains("fan-out p50 / broadcast p50: "))
    }

    @Test func theJSONUsesSnakeCaseKeysAndCarriesBothLegs() throws {
        let data = Data(Self.sampleReport().json().utf8)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        // JSONSerialization's numbers: NSNumber on every platform, whatever Swift type they would bridge to.
        func number(_ value: Any?) -> Double? { (value as? NSNumber)?.doubleValue }
        #expect(number(object["fanout_tokens"]) == 100_000)
        #expect(object["channel_deleted"] as? Bool == true)
        let broadcast = try #require(object["broadcast"] as? [String: Any])
        let latency = try #require(broadcast["latency_us"] as? [String: Any])
        #expect(abs((number(latency["p50"]) ?? 0) - 2_000) <= 2, "within HdrHistogram's 0.1%")
        let registration = try #require(object["registration"] as? [String: Any])
        #expect(number(registration["per_second"]) == 25_000)
        let fanout = try #require(object["fanout"] as? [String: Any])
        #expect(number((fanout["pushes"] as? [String: Any])?["delivered_per_second"]) == 50_000)
    }

    @Test func aFailedCallOrAnUndeliveredPushMakesTheRunUnclean() {
        var report = Self.sampleReport()
        report.fanout = BroadcastReport.Leg(
            latenciesNanos: [1_000_000], summaries: [DeliverySummary(targeted: 100_000, delivered: 99_999, complete: true)], errors: [],
            windowNanos: 1_000_000)
        #expect(!report.clean)
        #expect(report.table().contains("fan-out: 1 OK calls not fully delivered"))
    }
}
