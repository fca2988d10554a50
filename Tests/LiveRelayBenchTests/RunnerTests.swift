import LiveRelayBench
import LiveRelayService
import Testing

/// The harness against a real server in this process. Tolerances are wide on purpose: the
/// machine may be busy with other builds, so the tests check what the harness controls
/// (its schedule, its accounting), not how fast this machine happens to be.
@Suite("Load generation against an in-process server", .serialized)
struct RunnerTests {
    /// A scenario whose calls may take two minutes: on a machine running the whole suite a
    /// call has waited over 10 s (the default) for its reply, and a call given up on would
    /// fail an exact count that has nothing to do with this machine's speed.
    static func scenario() -> Scenario {
        var s = Scenario()
        s.timeoutSeconds = 120
        return s
    }

    @Test func openLoopSendsAtTheAskedRate() async throws {
        var s = Self.scenario()
        s.name = "rate"
        s.shape = .open(rate: 2000, connections: 2, maxOutstanding: 10_000)
        s.mix = [MixEntry(.ping, 1)]
        s.stop = .requests(6000)
        s.warmupSeconds = 0.5
        let report = try await InProcessServer.run(s, against: NullLiveRelayService())
        #expect(report.sent == 6000)
        #expect(report.ok == 6000)
        #expect(report.unsent == 0)
        // Measured from the send timestamps over 3 s: 5% is 150 ms of slack at the ends.
        #expect(abs(report.achievedRate / 2000 - 1) < 0.05, "achieved \(report.achievedRate)/s")
        #expect(abs(report.windowSeconds - 3) < 1e-9)
        #expect(report.countsAddUp)
    }

    /// A one-second stall must show up in p99 when latency starts at the intended send time,
    /// and must be nearly invisible in the send-to-reply time, because the outstanding bound
    /// (20) holds back the ~1000 requests due during the stall: exactly the requests a
    /// closed-loop generator would never have sent.
    @Test func aStallShowsUpInOpenLoopP99AndNotInTheUncorrectedMeasure() async throws {
        var s = Self.scenario()
        s.name = "stall"
        s.shape = .open(rate: 1000, connections: 1, maxOutstanding: 20)
        s.mix = [MixEntry(.ping, 1)]
        s.stop = .requests(3000)
        s.warmupSeconds = 0
        let report = try await InProcessServer.run(s, against: StallingService(stallAt: 1000, stallSeconds: 1))
        #expect(report.ok == 3000)
        #expect(report.countsAddUp)
        // Corrected: about a third of the requests waited 0-1 s, so p99 is near 1 s.
        #expect(report.latencyUs.p99 >= 500_000, "corrected p99 \(report.latencyUs.p99) µs")
        #expect(report.latencyUs.max >= 900_000, "corrected max \(report.latencyUs.max) µs")
        // Uncorrected: only the ~20 calls in flight during the stall saw it (0.7% of 3000), so
        // its p90 is an ordinary reply time, while about 1,000 corrected latencies include part
        // of the stall. Compared at p90 with each other, not with a fixed bound, because on a
        // busy machine ordinary reply times can reach hundreds of ms; and not at p99 (the 30th
        // slowest of 3,000): one pause of a loaded machine delays the 20 calls then in flight
        // in both measures, and with the stall's 20 that reaches the uncorrected p99 (seen in CI:
        // 0.82 s uncorrected against 1.36 s corrected).
        #expect(report.serviceTimeUs.max >= 900_000, "the held calls themselves waited the whole stall")
        #expect(
            report.latencyUs.p90 > 2 * report.serviceTimeUs.p90,
            "corrected p90 \(report.latencyUs.p90) µs, uncorrected p90 \(report.serviceTimeUs.p90) µs")
        // The requests due during the stall could not be sent on time, and are counted.
        #expect(report.late >= 500, "late \(report.late)")
    }

    @Test func openLoopCountsAddUpPerStatus() async throws {
        var s = Self.scenario()
        s.name = "statuses"
        s.shape = .open(rate: 3000, connections: 2, maxOutstanding: 1000)
        s.mix = [
            MixEntry(.registerToken, 1), MixEntry(.startActivity, 2), MixEntry(.updateActivity, 3),
            MixEntry(.endActivity, 1), MixEntry(.ping, 3),
        ]
        s.activitiesPerApp = 5
        s.tokensPerActivity = 2
        s.stop = .requests(2000)
        s.warmupSeconds = 0
        let service = FixedOutcomeService()
        let report = try await InProcessServer.run(s, against: service, endReserve: 10)
        #expect(report.countsAddUp)
        #expect(report.sent == 2000)
        #expect(report.completed == 2000)
        func line(_ rpc: BenchRPC) -> RPCReport { report.rpcs.first { $0.rpc == rpc.rawValue }! }
        // The mix is deterministic: 2000 calls in weights 1:2:3:1:3 exactly.
        #expect(line(.registerToken).statuses == ["OK": 200])
        #expect(line(.startActivity).statuses == ["NOT_FOUND": 400])
        #expect(line(.updateActivity).statuses == ["OK": 600])
        #expect(line(.endActivity).statuses == ["FAILED_PRECONDITION": 200])
        #expect(line(.ping).statuses == ["OK": 600])
        #expect(report.errors == 600)
        // No call lost or duplicated on the way: the server saw exactly what was sent
        // (plus the setup's registrations and one Ping per connection to open it).
        #expect(service.count("StartActivity") == 400)
        #expect(service.count("EndActivity") == 200)
        #expect(service.count("RegisterToken") == 200 + 1 + 5 * 2 + 10)
        #expect(service.count("Ping") == 600 + 2)
    }

    @Test func closedLoopStopsAtTheRequestCountAndAccountsForEveryCall() async throws {
        var s = Self.scenario()
        s.name = "closed"
        s.shape = .closed(connections: 2, depth: 8)
        s.mix = [MixEntry(.updateActivity, 1), MixEntry(.endActivity, 1)]
        s.activitiesPerApp = 3
        s.stop = .requests(1500)
        s.warmupSeconds = 0.2
        let report = try await InProcessServer.run(s, against: FixedOutcomeService(), endReserve: 0)
        #expect(report.sent == 1500)
        #expect(report.countsAddUp)
        let update = report.rpcs.first { $0.rpc == "UpdateActivity" }!
        let end = report.rpcs.first { $0.rpc == "EndActivity" }!
        #expect(update.sent + end.sent == 1500)
        #expect(abs(Int(update.sent) - Int(end.sent)) <= 2 * 16, "the mix holds within the callers in flight")
        #expect(end.statuses["FAILED_PRECONDITION"] == end.sent)
        #expect(report.throughput > 0)
    }

    /// With wait-for-delivery the requests ask for it and the report adds up the measured
    /// calls' summaries; without it, no request asks and the pushes are reported as queued.
    @Test(arguments: [true, false])
    func deliverySummariesAddUpToThePushAccount(wait: Bool) async throws {
        var s = Self.scenario()
        s.name = "delivery"
        s.shape = .closed(connections: 1, depth: 4)
        s.mix = [MixEntry(.startActivity, 1), MixEntry(.updateActivity, 2), MixEntry(.ping, 1)]
        s.activitiesPerApp = 2
        s.stop = .requests(400)
        s.warmupSeconds = 0
        s.waitForDelivery = wait
        let service = DeliveringService()
        let report = try await InProcessServer.run(s, against: service, endReserve: 0)
        #expect(report.countsAddUp)
        let pushes = try #require(report.pushes)
        let summaryCalls = report.rpcs.filter { $0.rpc != "Ping" }.reduce(0) { $0 + $1.ok }
        #expect(pushes.calls == summaryCalls)
        #expect(pushes.targeted == 5 * summaryCalls)
        #expect(pushes.accountedFor)
        if wait {
            #expect(service.callsThatWaited == Int(summaryCalls))
            #expect(pushes.delivered == 3 * summaryCalls)
            #expect(pushes.failures == ["BadTopic": summaryCalls])
            #expect(pushes.pruned == summaryCalls)
            #expect(pushes.queued == 0)
            #expect(abs(pushes.deliveredPerSecond - Double(pushes.delivered) / report.windowSeconds) < 1e-6)
        } else {
            #expect(service.callsThatWaited == 0)
            #expect(pushes.delivered == 0)
            #expect(pushes.queued == 5 * summaryCalls)
        }
    }

    @Test func closedLoopDurationRunStopsByItself() async throws {
        var s = Self.scenario()
        s.name = "duration"
        s.shape = .closed(connections: 1, depth: 4)
        s.mix = [MixEntry(.ping, 1)]
        s.stop = .duration(seconds: 1)
        // No warm-up: the callers then start inside the window, so each has sent a measured
        // call however slow a loaded machine is. With one, a warm-up call still unanswered
        // when the second ends left the window without a send (a CI flake; the warm-up of a
        // closed loop is covered by the request-bounded run above).
        s.warmupSeconds = 0
        let report = try await InProcessServer.run(s, against: NullLiveRelayService())
        #expect(report.windowSeconds >= 1 && report.windowSeconds < 5)
        #expect(report.sent >= 4, "every caller's first call is a measured one")
        #expect(report.countsAddUp)
        #expect(report.errors == 0)
    }
}
