import LiveRelayBench
import LiveRelayClient
import LiveRelayMessages
import LiveRelayService
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// The fault soak's own logic: which replies prove their call's account, the
/// plan's determinism, every rule of the verdict, and the driver against
/// in-process services whose answers are known.
@Suite("Fault soak")
struct SoakTests {
    static let adding = DeliverySummary(
        targeted: 10, delivered: 4, failed: 2, failures: [FailureCount(reason: "A", count: 1), FailureCount(reason: "B", count: 1)],
        pruned: 1, superseded: 2, expired: 1, complete: true)

    @Test func aFinalReplyWhoseOutcomesAddUpProvesItsCall() {
        #expect(SoakCalls.problem(with: Self.adding) == nil)
        #expect(SoakCalls.problem(with: DeliverySummary(complete: true)) == nil, "a call that targeted nothing")
        var queued = Self.adding
        queued.queued = 1
        queued.delivered -= 1
        #expect(SoakCalls.problem(with: queued)?.contains("not final") == true)
        var incomplete = Self.adding
        incomplete.complete = false
        #expect(SoakCalls.problem(with: incomplete)?.contains("not final") == true)
        var lost = Self.adding
        lost.expired = 0
        #expect(SoakCalls.problem(with: lost)?.contains("targeted 10 != delivered 4") == true)
        var reasons = Self.adding
        reasons.failures = [FailureCount(reason: "A", count: 1)]
        #expect(SoakCalls.problem(with: reasons)?.contains("failures by reason add up to 1, not 2") == true)
    }

    @Test func thePlanIsAFunctionOfItsTagAndSeed() {
        let plan = SoakPlan(appIDs: ["a", "b"], targetPushes: 100_000, tokensPerActivity: 20...200, seed: 9, runTag: "0123abcd")
        let again = SoakPlan(appIDs: ["a", "b"], targetPushes: 100_000, tokensPerActivity: 20...200, seed: 9, runTag: "0123abcd")
        #expect((0..<50).map(plan.tokens) == (0..<50).map(again.tokens))
        #expect((0..<500).allSatisfy { (20...200).contains(plan.tokens($0)) })
        #expect(Set((0..<500).map(plan.tokens)).count > 50, "fan-outs vary")
        #expect(plan.plannedPushes(3) == 5 + 21 * plan.tokens(3))
        #expect(plan.app(3) == "b" && plan.activityID(3) == "soak-0123abcd-3")
        var tokens = Set<String>()
        for n in 0..<20 {
            for i in 0..<plan.tokens(n) {
                tokens.insert(plan.updateToken(n, i))
                if i < plan.startTokens { tokens.insert(plan.startToken(n, i)) }
            }
        }
        #expect(tokens.allSatisfy { $0.count == 64 && $0.allSatisfy(\.isHexDigit) && $0 == $0.lowercased() })
        #expect(tokens.count == (0..<20).reduce(0) { $0 + plan.tokens($1) + plan.startTokens }, "no token repeats")
        #expect(plan.lifecycleBound * plan.startTokens + plan.lifecycleBound * 21 * 20 >= 100_000)
    }

    @Test func theMockIsToldTheDeadTokensWithTimestampsBeforeAndAfterTheirRegistration() {
        let plan = SoakPlan(appIDs: ["a"], targetPushes: 200_000, unregisteredShare: 0.05, runTag: "feedface")
        let dead = plan.unregisteredTokens(nowMilliseconds: 1_000_000_000)
        let all = (0..<plan.lifecycleBound).reduce(0) { $0 + plan.tokens($1) }
        #expect(Double(dead.count) > 0.04 * Double(all) && Double(dead.count) < 0.06 * Double(all))
        #expect(Set(dead.values) == Set([1_000_000_000 - 3_600_000, 1_000_000_000 + 86_400_000]))
        let n = (0..<plan.lifecycleBound).first { n in (0..<plan.tokens(n)).contains { plan.isUnregistered(n, $0) } }!
        let i = (0..<plan.tokens(n)).first { plan.isUnregistered(n, $0) }!
        #expect(dead[plan.updateToken(n, i)] != nil)
        #expect(SoakPlan(appIDs: ["a"], targetPushes: 10, unregisteredShare: 0).unregisteredTokens(nowMilliseconds: 0).isEmpty)
    }

    static func cleanFigures(_ calls: SoakCalls) -> SoakServerFigures {
        var s = SoakServerFigures()
        let p = calls.pushes
        s.enqueued = Int(p.targeted)
        s.delivered = Int(p.delivered)
        s.pruned = Int(p.pruned)
        s.superseded = Int(p.superseded)
        s.expired = Int(p.expired)
        s.failures = p.failures.mapValues { Int($0) }
        s.mock.answers = ["200": Int(p.delivered) + 5]
        s.faults = ["GOAWAY": 3, "500": 1]
        s.peakRSSBytes = 100 << 20
        return s
    }

    static var cleanCalls: SoakCalls {
        var calls = SoakCalls()
        calls.pushes.calls = 2
        calls.pushes.targeted = 20
        calls.pushes.delivered = 8
        calls.pushes.failed = 4
        calls.pushes.failures = ["A": 2, "B": 2]
        calls.pushes.pruned = 2
        calls.pushes.superseded = 4
        calls.pushes.expired = 2
        return calls
    }

    @Test func everyRuleOfTheVerdictCanFail() {
        let calls = Self.cleanCalls
        let server = Self.cleanFigures(calls)
        func verdict(_ calls: SoakCalls = SoakTests.cleanCalls, _ change: (inout SoakServerFigures) -> Void = { _ in }) -> [String] {
            var s = server
            change(&s)
            return SoakReport(description: "t", targetPushes: 20, calls: calls, server: s, rssBoundBytes: 200 << 20).violations
        }
        #expect(verdict().isEmpty)
        var failing = calls
        failing.errors = ["UpdateActivity deadlineExceeded": 2]
        #expect(verdict(failing).first?.hasPrefix("2 calls failed") == true)
        var unproven = calls
        unproven.notAddingUp = 1
        #expect(verdict(unproven) == ["1 replies were not final or did not add up"])
        #expect(
            SoakReport(description: "t", targetPushes: 21, calls: calls, server: server, rssBoundBytes: 200 << 20).violations
                == ["only 20 pushes targeted, fewer than 21"])
        #expect(verdict { $0.expired += 1 } == ["expired: the replies say 2, the dispatcher 3"])
        #expect(
            verdict { $0.failures = ["A": 3, "B": 1] }
                == ["failed A: the replies say 2, the dispatcher 3", "failed B: the replies say 2, the dispatcher 1"])
        #expect(verdict { $0.unfinished = 1 }.first?.contains("still holds 1 unfinished") == true)
        #expect(verdict { $0.mock.receivedAfterExpiration = 2 }.isEmpty, "in time, as far as the mock can tell")
        let late = verdict {
            $0.mock.receivedAfterExpiration = 2
            $0.mock.mostMillisecondsPastExpiration = 1
        }
        #expect(late == ["2 pushes reached APNs after their apns-expiration, the latest 1 ms after it (allowed: 0 ms)"])
        var lenient = SoakServerFigures()
        lenient = server
        lenient.mock.receivedAfterExpiration = 2
        lenient.mock.mostMillisecondsPastExpiration = 40
        #expect(
            SoakReport(
                description: "t", targetPushes: 20, calls: calls, server: lenient, rssBoundBytes: 200 << 20,
                expiryAllowanceMilliseconds: 40
            ).violations.isEmpty)
        #expect(verdict { $0.mock.answers = ["200": 7] }.first?.contains("answered 200 only 7 times") == true)
        #expect(verdict { $0.peakRSSBytes = 300 << 20 } == ["peak RSS 300 MiB is above the bound of 200 MiB"])
        #expect(verdict { $0.peakRSSBytes = nil } == ["no peak RSS reading (/proc/self/status)"])
        #expect(verdict { $0.faults["drop"] = 0 } == ["the fault \"drop\" never happened"])
        let report = SoakReport(description: "t", targetPushes: 20, calls: calls, server: server, rssBoundBytes: 200 << 20)
        #expect(report.table().contains("PASS"))
        #expect(report.json().contains(#""violations":[]"#))
    }

    static func plan(target: Int) -> SoakPlan {
        SoakPlan(
            appIDs: ["bench.app"], targetPushes: target, activitiesInFlight: 3, tokensPerActivity: 3...3, startTokens: 2, updates: 4,
            callTimeoutSeconds: 10)
    }

    static func drive(_ plan: SoakPlan, against service: any LiveRelayService) async throws -> SoakCalls {
        let server = try await InProcessServer.start(service)
        var logger = Logger(label: "soak.tests")
        logger.logLevel = .critical
        let calls = await SoakDriver(
            plan: plan, client: server.clientConfiguration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: logger
        ).run()
        try await server.stop()
        return calls
    }

    @Test func theDriverRunsWholeLifecyclesUntilTheTargetIsReached() async throws {
        // DeliveringService answers every waiting Start, Update and End with 5 targeted = 3 + 1 + 1.
        let calls = try await Self.drive(Self.plan(target: 100), against: DeliveringService())
        #expect(calls.pushes.targeted >= 100)
        #expect(calls.pushes.targeted == 5 * UInt64(calls.starts + calls.updates + calls.ends))
        #expect(calls.lifecycles >= 3)
        #expect(calls.starts == calls.lifecycles && calls.ends == calls.lifecycles && calls.updates == 4 * calls.lifecycles)
        #expect(calls.registrations == 5 * calls.lifecycles)
        #expect(calls.errorCount == 0 && calls.notAddingUp == 0 && calls.pushes.accountedFor)
        #expect(calls.seconds > 0)
    }

    @Test func callsTheServerRefusesBeforeDoingAnythingAreSentAgainAfterTheHint() async throws {
        let service = RefusingService(registrations: 3, updates: 2)
        let calls = try await Self.drive(Self.plan(target: 1), against: service)
        #expect(calls.refusals == ["RegisterToken AppOverloaded": 3, "UpdateActivity QueueFull": 2])
        #expect(calls.errorCount == 0 && calls.notAddingUp == 0)
        #expect(calls.registrations == 5 * calls.lifecycles && calls.updates == 4 * calls.lifecycles)
        #expect(service.refused == 5)
    }

    @Test func theDriverCountsFailedCallsAndRepliesWithoutAnAccount() async throws {
        // FixedOutcomeService: Start NOT_FOUND, End FAILED_PRECONDITION, Update OK without a summary.
        // Nothing is ever targeted, so the run stops at the plan's bound on lifecycles, not never.
        let plan = Self.plan(target: 1)
        let calls = try await Self.drive(plan, against: FixedOutcomeService())
        #expect(calls.lifecycles == plan.lifecycleBound)
        #expect(calls.errors.count == 2 && calls.errorCount == 2 * calls.lifecycles)
        #expect(
            calls.errors.keys.contains { $0.hasPrefix("StartActivity ") } && calls.errors.keys.contains { $0.hasPrefix("EndActivity ") })
        #expect(calls.notAddingUp == 4 * calls.lifecycles, "each Update's reply has no final account")
        #expect(calls.samples.count == 10, "the first problems, not all")
        #expect(calls.pushes.targeted == 0)
    }
}

/// Refuses the first registrations and updates with RESOURCE_EXHAUSTED, as admission and
/// a full app queue do (nothing stored), then answers like ``DeliveringService``.
final class RefusingService: LiveRelayService, @unchecked Sendable {
    private let lock = NIOLock()
    private var registrationsLeft: Int
    private var updatesLeft: Int
    private var refusedCount = 0
    private let delivering = DeliveringService()

    init(registrations: Int, updates: Int) {
        registrationsLeft = registrations
        updatesLeft = updates
    }

    var refused: Int { lock.withLock { refusedCount } }

    private func refuse(_ left: inout Int) -> Bool {
        lock.withLock {
            guard left > 0 else { return false }
            left -= 1
            refusedCount += 1
            return true
        }
    }

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        if refuse(&registrationsLeft) {
            return context.fail(RPCError(.resourceExhausted, "busy", details: ErrorDetails(retryAfterMS: 1, reason: "AppOverloaded")))
        }
        return delivering.registerToken(request, context: context)
    }
    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        delivering.startActivity(request, context: context)
    }
    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        if refuse(&updatesLeft) {
            return context.fail(RPCError(.resourceExhausted, "full", details: ErrorDetails(retryAfterMS: 1, reason: "QueueFull")))
        }
        return delivering.updateActivity(request, context: context)
    }
    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        delivering.endActivity(request, context: context)
    }
    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> { delivering.ping(request, context: context) }
}
