import LiveRelayBench
import LiveRelayMessages
import LiveRelayService
import Logging
import NIOCore
import Testing

/// Serves every app but one, whose measured calls it refuses RESOURCE_EXHAUSTED with a
/// hint, as admission does to a flooding app (the setup's own registration goes through).
struct RefusingOneAppService: LiveRelayService {
    let refused: String

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        if request.appID == refused, request.attributesType == "BenchRegistered" {
            return context.fail(
                RPCError(.resourceExhausted, "over its share", details: ErrorDetails(retryAfterMS: 50, reason: "AppOverloaded")))
        }
        return context.eventLoop.makeSucceededFuture(RegisterTokenReply(result: .created))
    }
    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        context.fail(RPCError(.unimplemented, "not here"))
    }
    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        context.fail(RPCError(.unimplemented, "not here"))
    }
    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        context.fail(RPCError(.unimplemented, "not here"))
    }
    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        context.eventLoop.makeSucceededFuture(PingReply())
    }
}

@Suite struct OverloadTests {
    /// The harness's accounting, not the server's behaviour: two rounds, each app's calls
    /// counted on its own side, refusals counted and timed, the ratio the median of the rounds'.
    @Test func eachSideIsAccountedForAndRefusalsAreTimed() async throws {
        let server = try await InProcessServer.start(RefusingOneAppService(refused: "noisy.app"))
        var scenario = OverloadScenario()
        scenario.capacity = 400
        scenario.floodFactor = 2
        scenario.quietRate = 200
        scenario.rounds = 2
        scenario.durationSeconds = 0.5
        scenario.warmupSeconds = 0.1
        var logger = Logger(label: "bench.tests.client")
        logger.logLevel = .critical
        let result: Result<OverloadReport, any Error>
        do {
            result = .success(
                try await OverloadRun(scenario: scenario, client: server.clientConfiguration, logger: logger, serverPID: nil).run())
        } catch {
            result = .failure(error)
        }
        try await server.stop()
        let report = try result.get()

        #expect(report.rounds.count == 2)
        #expect(!report.capacityMeasured && report.capacity == 400)
        for round in report.rounds {
            #expect(round.noisyFlood.askedRate == 800)
            #expect(round.noisyFlood.sent == 400, "0.5 s at 800/s")
            #expect(round.noisyFlood.statuses == ["RESOURCE_EXHAUSTED": 400])
            #expect(round.noisyFlood.refusalRate == 1)
            #expect(round.noisyFlood.refusalLatencyUs != nil)
            #expect(round.quietAlone.statuses == ["OK": 100] && round.quietFlood.statuses == ["OK": 100])
            #expect(round.quietFlood.refusalLatencyUs == nil)
            #expect(round.quietP99Ratio == round.quietFlood.latencyUs.p99 / round.quietAlone.latencyUs.p99)
        }
        let ratios = report.rounds.map(\.quietP99Ratio)
        #expect(report.quietP99Ratio == (ratios[0] + ratios[1]) / 2, "the median of two is their mean")
        #expect(report.noisyRefusalRate == 1)
        #expect(report.goalMet == (report.quietP99Ratio <= 1.5))
        #expect(report.serverRSSBeforeFloodBytes == nil, "no server pid, no memory figures")
    }
}
