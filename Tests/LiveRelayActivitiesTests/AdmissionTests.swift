import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import Logging
import MetricsTestKit
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import LiveRelayActivities

/// The admission rules as a value, on a clock the test moves.
@Suite struct AdmissionControllerTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    func admitted(_ result: Result<AdmissionTicket, AdmissionRefusal>) throws -> AdmissionTicket {
        switch result {
        case let .success(ticket): return ticket
        case let .failure(refusal): throw TestFailure("refused: \(refusal)")
        }
    }

    func refusal(_ result: Result<AdmissionTicket, AdmissionRefusal>) throws -> AdmissionRefusal {
        switch result {
        case let .success(ticket): throw TestFailure("admitted: \(ticket)")
        case let .failure(refusal): return refusal
        }
    }

    @Test func anAppAloneMayUseHalfTheBoundAndIsRefusedBeyondIt() throws {
        var c = AdmissionController(limits: AdmissionLimits(maxInFlightPerApp: 2, maxInFlight: 8, retryAfter: .milliseconds(50)))
        var noisy: [AdmissionTicket] = []
        for _ in 0..<4 { noisy.append(try admitted(c.admit(appID: "noisy", deadline: nil, now: start))) }
        let refused = try refusal(c.admit(appID: "noisy", deadline: nil, now: start))
        #expect(refused.reason == .appOverloaded)
        #expect(refused.inFlight == 4 && refused.limit == 4)
        #expect(refused.retryAfterMS == 50, "no estimate yet: the configured hint")
        #expect(c.inFlight(appID: "noisy") == 4, "a refusal takes no slot")

        c.finish(noisy.removeFirst(), now: start + .milliseconds(10))
        _ = try admitted(c.admit(appID: "noisy", deadline: nil, now: start + .milliseconds(10)))
        #expect(c.inFlight(appID: "noisy") == 4)
    }

    /// Once another app is busy, each gets the small per-app share; the first one's calls
    /// beyond it are refused until enough of them are answered, while the newcomer is admitted at once.
    @Test func anotherBusyAppShrinksTheShareAndIsAdmittedAtOnce() throws {
        var c = AdmissionController(limits: AdmissionLimits(maxInFlightPerApp: 2, maxInFlight: 8))
        var noisy: [AdmissionTicket] = []
        for _ in 0..<4 { noisy.append(try admitted(c.admit(appID: "noisy", deadline: nil, now: start))) }
        #expect(c.share(of: "quiet") == 2)
        let quiet = try admitted(c.admit(appID: "quiet", deadline: nil, now: start))
        let second = try admitted(c.admit(appID: "quiet", deadline: nil, now: start))
        #expect(try refusal(c.admit(appID: "quiet", deadline: nil, now: start)).limit == 2)
        #expect(c.busyApps == 2 && c.inFlight == 6)

        let over = try refusal(c.admit(appID: "noisy", deadline: nil, now: start))
        #expect(over.reason == .appOverloaded && over.inFlight == 4 && over.limit == 2)
        for ticket in noisy.prefix(3) { c.finish(ticket, now: start) }
        _ = try admitted(c.admit(appID: "noisy", deadline: nil, now: start))
        #expect(try refusal(c.admit(appID: "noisy", deadline: nil, now: start)).limit == 2)

        // The quiet app stays busy while a call of its is in flight, however long ago it asked...
        c.finish(quiet, now: start)
        #expect(c.share(of: "noisy") == 2, "quiet still has a call in flight")
        let later = start + .seconds(3)
        _ = try refusal(c.admit(appID: "noisy", deadline: nil, now: later))
        #expect(c.busyApps == 2)
        // ...and once that call is answered too, the next sweep forgets it: noisy is alone again.
        c.finish(second, now: later)
        _ = try admitted(c.admit(appID: "noisy", deadline: nil, now: later + .seconds(1)))
        #expect(c.busyApps == 1)
    }

    @Test func anIdleAppIsForgottenAfterTheBusyWindow() throws {
        var c = AdmissionController(limits: AdmissionLimits(maxInFlightPerApp: 2, maxInFlight: 8, busyWindow: .seconds(1)))
        let quiet = try admitted(c.admit(appID: "quiet", deadline: nil, now: start))
        c.finish(quiet, now: start + .milliseconds(5))
        for _ in 0..<2 { _ = try admitted(c.admit(appID: "noisy", deadline: nil, now: start + .milliseconds(10))) }
        #expect(try refusal(c.admit(appID: "noisy", deadline: nil, now: start + .milliseconds(500))).limit == 2)
        // A window and a half after quiet's call, the sweep has forgotten it: noisy is alone again.
        _ = try admitted(c.admit(appID: "noisy", deadline: nil, now: start + .milliseconds(1_600)))
        #expect(c.busyApps == 1)
        #expect(c.share(of: "noisy") == 4)
    }

    /// n busy apps share the global bound n + 1 ways, so one share is always free for an
    /// app that has not asked yet.
    @Test func manyBusyAppsShareTheBoundAndLeaveRoomForANewcomer() throws {
        var c = AdmissionController(limits: AdmissionLimits(maxInFlightPerApp: 100, maxInFlight: 12))
        for app in ["a", "b", "c"] {
            for _ in 0..<3 { _ = try admitted(c.admit(appID: app, deadline: nil, now: start)) }
        }
        #expect(c.share(of: "a") == 3, "12 / (3 + 1)")
        #expect(try refusal(c.admit(appID: "a", deadline: nil, now: start)).limit == 3)
        #expect(c.share(of: "d") == 2, "12 / (4 + 1)")
        for _ in 0..<2 { _ = try admitted(c.admit(appID: "d", deadline: nil, now: start)) }
        #expect(c.inFlight == 11)
    }

    @Test func pastTheGlobalBoundEveryAppIsRefusedServerOverloaded() throws {
        var c = AdmissionController(limits: AdmissionLimits(maxInFlightPerApp: 10, maxInFlight: 3))
        // With more busy apps than the bound, a share is still one call: the bound decides.
        for app in ["a", "b", "c"] { _ = try admitted(c.admit(appID: app, deadline: nil, now: start)) }
        let refused = try refusal(c.admit(appID: "d", deadline: nil, now: start))
        #expect(refused.reason == .serverOverloaded)
        #expect(refused.inFlight == 3 && refused.limit == 3)
    }

    @Test func aDeadlineShorterThanTheEstimateIsRefusedWhileCallsAreInFlight() throws {
        var c = AdmissionController(limits: AdmissionLimits(maxInFlightPerApp: 10, maxInFlight: 100, smoothing: 0.5))
        #expect(c.estimate == nil)
        let first = try admitted(c.admit(appID: "a", deadline: start + .milliseconds(1), now: start))
        c.finish(first, now: start + .milliseconds(100))
        #expect(c.estimate == .milliseconds(100))

        var now = start + .seconds(1)
        // Nothing in flight: nothing to wait behind, the call gets its chance.
        let idle = try admitted(c.admit(appID: "a", deadline: now + .milliseconds(10), now: now))
        let refused = try refusal(c.admit(appID: "b", deadline: now + .milliseconds(50), now: now))
        #expect(refused.reason == .deadlineUnreachable)
        #expect(refused.remaining == .milliseconds(50))
        #expect(refused.estimate == .milliseconds(100))
        #expect(refused.retryAfterMS == 100, "the hint is the service time when longer than the configured one")
        _ = try admitted(c.admit(appID: "b", deadline: now + .milliseconds(150), now: now))
        _ = try admitted(c.admit(appID: "b", deadline: nil, now: now))

        now = now + .milliseconds(20)
        c.finish(idle, now: now)
        #expect(c.estimate == .milliseconds(60), "100 + 0.5 × (1020 − 1000 ... a 20 ms sample − 100)")
        _ = try admitted(c.admit(appID: "c", deadline: now + .milliseconds(61), now: now))
        #expect(try refusal(c.admit(appID: "c", deadline: now + .milliseconds(59), now: now)).reason == .deadlineUnreachable)
    }

    @Test func theHintFollowsTheServiceTimeUpToACap() throws {
        var c = AdmissionController(
            limits: AdmissionLimits(maxInFlightPerApp: 1, maxInFlight: 2, retryAfter: .milliseconds(50), smoothing: 1))
        let slow = try admitted(c.admit(appID: "a", deadline: nil, now: start))
        c.finish(slow, now: start + .milliseconds(400) + .nanoseconds(1))
        _ = try admitted(c.admit(appID: "a", deadline: nil, now: start))
        #expect(try refusal(c.admit(appID: "a", deadline: nil, now: start)).retryAfterMS == 401, "rounded up")

        var d = AdmissionController(limits: AdmissionLimits(maxInFlightPerApp: 1, maxInFlight: 2, smoothing: 1))
        let stalled = try admitted(d.admit(appID: "a", deadline: nil, now: start))
        d.finish(stalled, now: start + .seconds(600))
        _ = try admitted(d.admit(appID: "a", deadline: nil, now: start))
        #expect(try refusal(d.admit(appID: "a", deadline: nil, now: start)).retryAfterMS == 30_000)
    }

    @Test func disabledAdmitsEverythingAndStillCounts() throws {
        var c = AdmissionController(limits: AdmissionLimits(enabled: false, maxInFlightPerApp: 1, maxInFlight: 1))
        let first = try admitted(c.admit(appID: "a", deadline: nil, now: start))
        c.finish(first, now: start + .seconds(1))
        for _ in 0..<5 { _ = try admitted(c.admit(appID: "a", deadline: start + .milliseconds(1), now: start)) }
        #expect(c.inFlight == 5 && c.inFlight(appID: "a") == 5)
    }
}

/// The gate as the service uses it: every refusal is counted by app and reason, and
/// its answer quotes the figures of that refusal, also when the last one is reused.
@Suite struct AdmissionGateTests {
    func error(_ result: Result<AdmissionTicket, RPCError>) throws -> RPCError {
        switch result {
        case let .success(ticket): throw TestFailure("admitted: \(ticket)")
        case let .failure(error): return error
        }
    }

    @Test func everyRefusalIsCountedAndQuotesItsOwnFigures() throws {
        let uptime = ManualUptime()
        let metrics = TestMetrics()
        let gate = AdmissionGate(
            limits: AdmissionLimits(maxInFlightPerApp: 1, maxInFlight: 4), uptime: { uptime.read() }, metricsFactory: metrics)
        func refused(_ app: String, reason: String) throws -> Int64 {
            try metrics.expectCounter("liverelay_admission_refused_total", [("app", app), ("reason", reason)]).totalValue
        }
        for _ in 0..<2 { _ = try gate.admit(appID: "noisy", deadline: nil).get() }
        let alone = try (0..<5).map { _ in try error(gate.admit(appID: "noisy", deadline: nil)) }
        #expect(try refused("noisy", reason: "AppOverloaded") == 5)
        #expect(alone.allSatisfy { $0.status == .resourceExhausted && $0.message == alone[0].message })
        #expect(alone[0].message.contains("has 2 calls in progress, its limit is 2 now"), "\(alone[0].message)")
        #expect(alone[0].details.reason == "AppOverloaded" && alone[0].details.retryAfterMS == 50)

        // Another busy app shrinks the share: the next refusal quotes the new limit.
        _ = try gate.admit(appID: "quiet", deadline: nil).get()
        let shared = try error(gate.admit(appID: "noisy", deadline: nil))
        #expect(shared.message.contains("has 2 calls in progress, its limit is 1 now"), "\(shared.message)")
        #expect(try refused("noisy", reason: "AppOverloaded") == 6)
        let quiet = try error(gate.admit(appID: "quiet", deadline: nil))
        #expect(quiet.message.contains("app \"quiet\" has 1 calls in progress, its limit is 1 now"), "\(quiet.message)")
        #expect(try refused("quiet", reason: "AppOverloaded") == 1)
        #expect(gate.recentRefusalCount == 2)

        // A deadline refusal quotes the time each call had left.
        let ticket = try gate.admit(appID: "late", deadline: nil).get()
        uptime.advance(.milliseconds(40))
        gate.finish(ticket)
        let short = try error(gate.admit(appID: "late", deadline: uptime.read() + .milliseconds(3)))
        let shorter = try error(gate.admit(appID: "late", deadline: uptime.read() + .milliseconds(2)))
        #expect(short.status == .unavailable && short.message.contains("leaves 3 ms"), "\(short.message)")
        #expect(shorter.message.contains("leaves 2 ms"), "\(shorter.message)")
        #expect(try refused("late", reason: "DeadlineUnreachable") == 2)
    }
}

/// A store that holds every write until the test releases it, then applies it to a
/// real in-memory store: calls stay "in flight" exactly as long as the test says.
final class HeldStore: MemoryReadsStore, @unchecked Sendable {
    let inner = InMemoryActivityStore()
    var reads: InMemoryActivityStore { inner }
    private let lock = NIOLock()
    private var held: [@Sendable () -> Void] = []

    var heldCount: Int { lock.withLock { held.count } }

    func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        let promise = eventLoop.makePromise(of: M.Outcome.self)
        let inner = self.inner
        lock.withLock { held.append { inner.apply(mutation, now: now, on: eventLoop).cascade(to: promise) } }
        return promise.futureResult
    }

    /// Applies every held write; their callers' futures complete.
    func release() {
        let writes = lock.withLock {
            defer { held.removeAll() }
            return held
        }
        for write in writes { write() }
    }

}

/// A monotonic clock the test moves, far ahead of the real one so that deadlines made
/// from it are still in the future for the service's own "already past" check.
final class ManualUptime: @unchecked Sendable {
    private let lock = NIOLock()
    private var now = NIODeadline.now() + .hours(1)
    func read() -> NIODeadline { lock.withLock { now } }
    func advance(_ amount: TimeAmount) { lock.withLock { now = now + amount } }
}

/// Admission behind the real service: one app over its limit is refused at once, with
/// a hint, while another app's calls are admitted and answered.
@Suite struct AdmissionServiceTests {
    let loop = Harness().loop
    let uptime = ManualUptime()

    func service(_ store: HeldStore, limits: AdmissionLimits) -> ActivityService {
        let uptime = self.uptime
        return ActivityService(
            store: store, clock: ManualClock(t0), logger: Logger(label: "test"), sink: RecordingPushSink(),
            admission: AdmissionGate(limits: limits, uptime: { uptime.read() }))
    }

    func context(deadline: NIODeadline? = nil) -> CallContext {
        CallContext(
            principal: Principal(keyID: "k", apps: .all, allowedMethods: Set(LiveRelayMethod.allCases)),
            eventLoop: loop, deadline: deadline, requestID: 1)
    }

    @Test func theNoisyAppIsRefusedWithAHintWhileTheQuietAppIsServed() async throws {
        let store = HeldStore()
        let s = service(store, limits: AdmissionLimits(maxInFlightPerApp: 2, maxInFlight: 6, retryAfter: .milliseconds(75)))
        let noisy = (0..<3).map { s.registerToken(pushToStart(hex($0), device: "n\($0)", app: "noisy"), context: context()) }
        let refused = try #require(await rpcError(s.registerToken(pushToStart(hex(9), device: "n9", app: "noisy"), context: context())))
        #expect(refused.status == .resourceExhausted)
        #expect(refused.details.reason == "AppOverloaded")
        #expect(refused.details.retryAfterMS == 75)
        #expect(refused.message.contains("noisy") && refused.message.contains("3"), "\(refused.message)")
        // Activity calls count against the same limit, before the store write.
        let start = await rpcError(s.startActivity(startRequest(app: "noisy"), context: context()))
        #expect(start?.status == .resourceExhausted && start?.details.reason == "AppOverloaded")
        #expect(store.heldCount == 3, "the refused calls never reached the store")

        // The quiet app is admitted at once, although the noisy one has its whole share in flight...
        let quiet = s.registerToken(pushToStart(hex(1), device: "q1", app: "quiet"), context: context())
        #expect(store.heldCount == 4)
        // ...and now that two apps are busy, the noisy one's share is the per-app limit.
        let shared = await rpcError(s.registerToken(pushToStart(hex(8), device: "n8", app: "noisy"), context: context()))
        #expect(shared?.status == .resourceExhausted && shared?.message.contains("its limit is 2") == true, "\(String(describing: shared))")
        store.release()
        #expect(try await quiet.get().result == .created)
        for call in noisy { #expect(try await call.get().result == .created) }

        // Answered calls free their slots.
        let again = s.registerToken(pushToStart(hex(9), device: "n9", app: "noisy"), context: context())
        store.release()
        #expect(try await again.get().result == .created)
    }

    @Test func aCallThatCannotMeetItsDeadlineIsUnavailableAtOnce() async throws {
        let store = HeldStore()
        let s = service(store, limits: AdmissionLimits(smoothing: 1))
        let first = s.registerToken(pushToStart(hex(1), device: "d1", app: "a"), context: context())
        uptime.advance(.milliseconds(200))
        store.release()
        _ = try await first.get()

        let queued = s.registerToken(pushToStart(hex(2), device: "d2", app: "a"), context: context())
        let hurried = try #require(
            await rpcError(
                s.registerToken(pushToStart(hex(3), device: "d3", app: "b"), context: context(deadline: uptime.read() + .milliseconds(100)))
            ))
        #expect(hurried.status == .unavailable)
        #expect(hurried.details.reason == "DeadlineUnreachable")
        #expect(hurried.details.retryAfterMS == 200)
        #expect(hurried.message.contains("not processed"))
        let patient = s.registerToken(
            pushToStart(hex(4), device: "d4", app: "b"), context: context(deadline: uptime.read() + .milliseconds(300)))
        #expect(store.heldCount == 2)
        store.release()
        _ = try await queued.get()
        #expect(try await patient.get().result == .created)
        #expect(store.inner.snapshot.tokenCount == 3)
    }
}
