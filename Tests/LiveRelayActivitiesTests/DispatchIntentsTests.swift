import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// Durable dispatch intents between the service, the dispatcher and the
/// store: what one "process" accepted and did not finish, the next one sends.
@Suite struct DispatchIntentsTests {
    let harness = DispatcherHarness()
    let callLoop = MultiThreadedEventLoopGroup.singleton.any()
    let store = InMemoryActivityStore()
    let logger = Logger(label: "intents-test")

    func intents(_ owner: String, takeOver: Bool = true, limit: Int = 100) -> DispatchIntents {
        DispatchIntents(
            configuration: DispatchIntents.Configuration(
                lease: IntentLease(owner: owner), takeOverAtStart: takeOver, claimLimit: limit),
            store: store, clock: harness.wall, logger: logger, on: callLoop)
    }

    func context() -> CallContext {
        CallContext(
            principal: Principal(keyID: "k", apps: .all, allowedMethods: Set(LiveRelayMethod.allCases)),
            eventLoop: callLoop, deadline: nil, requestID: 1)
    }

    func claimable() async throws -> ClaimedIntents {
        try await store.apply(
            ClaimIntents(lease: IntentLease(owner: "observer"), evenIfLeased: true), now: harness.wall.now(), on: callLoop
        ).get()
    }

    @Test func whatAProcessLeftUnsentTheNextOneSendsWithTheSameTimestamp() async throws {
        // Process 1: APNs never answers; its dispatcher dies with the pushes in flight.
        let silent = FakeTransport(eventLoop: harness.loop)
        let first = intents("process-1")
        let d1 = harness.dispatcher(
            [("app", 1_000, silent)], pruner: StoreTokenPruner(store: store, clock: harness.wall), ledger: first)
        let service = ActivityService(
            store: store, clock: harness.wall, logger: logger, sink: d1, intents: IntentLease(owner: "process-1"))
        try await service.startActivity(
            StartActivityRequest(
                appID: "app", activityID: "game", attributesType: "Score", attributesJSON: "{}", contentStateJSON: #"{"s":0}"#,
                targets: Targets(allDevices: true)),
            context: context()
        ).get()
        for n in 1...3 {
            try await service.registerToken(
                RegisterTokenRequest(
                    appID: "app", kind: .update, token: hex(n), environment: .production, activityID: "game", deviceID: "d\(n)"),
                context: context()
            ).get()
        }
        harness.wall.advance(by: .seconds(1))
        let reply = try await service.updateActivity(
            UpdateActivityRequest(appID: "app", activityID: "game", contentStateJSON: #"{"s":1}"#), context: context()
        ).get()
        #expect(reply.summary?.queued == 3)
        await harness.drive { silent.waitingCount == 3 }
        #expect(try await claimable().batches.map(\.timestamp) == [reply.timestamp])

        // Process 2 takes over at start and delivers; the intent is then gone.
        let answering = FakeTransport(eventLoop: harness.loop) { _, _ in .success(APNsResponse(status: 200)) }
        let second = intents("process-2")
        let d2 = harness.dispatcher(
            [("app", 1_000, answering)], pruner: StoreTokenPruner(store: store, clock: harness.wall), ledger: second)
        second.attach(d2)
        #expect(try await second.claimUntilClear(evenIfLeased: true) == 1)
        await harness.drive { answering.requests.count == 3 && d2.unfinishedCount == 0 }
        #expect(Set(answering.requests.map(\.deviceToken)) == [hex(1), hex(2), hex(3)])
        #expect(answering.requests.allSatisfy { $0.payload.text.contains(#""timestamp":\#(reply.timestamp)"#) })
        await second.flush()
        #expect(try await claimable().isEmpty)

        // The second dispatcher first: tearing the first down stops the shared loop.
        let stopped = d2.shutdown(gracePeriod: .zero)
        await harness.loop.advanceTime(by: .seconds(1))
        try await stopped.get()
        try await harness.tearDown(d1, [silent])
    }

    @Test func aReplayReportsTheAccountOfItsSettledIntent() async throws {
        // Holds every push until the test answers them.
        let answering = FakeTransport(eventLoop: harness.loop)
        let ledger = intents("process-1")
        let d = harness.dispatcher(
            [("app", 1_000, answering)], pruner: StoreTokenPruner(store: store, clock: harness.wall), ledger: ledger)
        let service = ActivityService(
            store: store, clock: harness.wall, logger: logger, sink: d, intents: IntentLease(owner: "process-1"))
        _ = try await service.startActivity(
            StartActivityRequest(
                appID: "app", activityID: "game", attributesType: "Score", attributesJSON: "{}", contentStateJSON: #"{"s":0}"#,
                targets: Targets(allDevices: true)),
            context: context()
        ).get()
        for n in 1...3 {
            _ = try await service.registerToken(
                RegisterTokenRequest(
                    appID: "app", kind: .update, token: hex(n), environment: .production, activityID: "game", deviceID: "d\(n)"),
                context: context()
            ).get()
        }
        harness.wall.advance(by: .seconds(1))
        let request = UpdateActivityRequest(appID: "app", activityID: "game", contentStateJSON: #"{"s":1}"#, idempotencyKey: "u1")
        let reply = try await service.updateActivity(request, context: context()).get()
        #expect(reply.summary?.queued == 3)

        // In flight: the replay says what was planned, and sends nothing again.
        await harness.drive { answering.waitingCount == 3 }
        let early = try await service.updateActivity(request, context: context()).get()
        #expect(early.replayed && early.timestamp == reply.timestamp)
        #expect(early.summary?.queued == 3 && early.summary?.complete == false)

        answering.answerAll(.success(APNsResponse(status: 200)))
        await harness.drive { d.unfinishedCount == 0 }
        await ledger.flush()
        #expect(try await claimable().isEmpty)
        let late = try await service.updateActivity(request, context: context()).get()
        #expect(late.replayed && late.timestamp == reply.timestamp)
        #expect(late.summary?.targeted == 3)
        #expect(late.summary?.delivered == 3)
        #expect(late.summary?.queued == 0 && late.summary?.failed == 0)
        #expect(late.summary?.complete == true)
        #expect(answering.requests.count == 3)
        try await harness.tearDown(d, [answering])
    }

    @Test func aTakeoverClaimsPageAfterPageUntilNothingIsLeft() async throws {
        let service = ActivityService(
            store: store, clock: harness.wall, logger: logger, sink: RecordingPushSink(), intents: IntentLease(owner: "gone"))
        for game in 0..<5 { _ = try await startAndUpdate(service, game: game) }
        let recorder = RecordingPushSink()
        let taker = intents("taker", limit: 2)
        taker.attach(recorder)
        #expect(try await taker.claimUntilClear(evenIfLeased: true) == 5)
        #expect(recorder.batches.map(\.activityID).sorted() == (0..<5).map { "game-\($0)" })
        #expect(recorder.batches.allSatisfy { $0.durable && $0.targets.count == 1 })
        // Leased to the taker now: nobody else may claim them until the lease runs out.
        let other = intents("other", limit: 2)
        other.attach(recorder)
        #expect(try await other.claimUntilClear() == 0)
        harness.wall.advance(by: .seconds(31))
        #expect(try await other.claimUntilClear() == 5)
    }

    /// Starts game-N with one update token and sends it an update through `service`.
    func startAndUpdate(_ service: ActivityService, game: Int) async throws -> UpdateActivityReply {
        try await service.startActivity(
            StartActivityRequest(
                appID: "app", activityID: "game-\(game)", attributesType: "Score", attributesJSON: "{}",
                contentStateJSON: #"{"s":0}"#, targets: Targets(allDevices: true)),
            context: context()
        ).get()
        try await service.registerToken(
            RegisterTokenRequest(
                appID: "app", kind: .update, token: hex(game), environment: .production, activityID: "game-\(game)", deviceID: "d"),
            context: context()
        ).get()
        return try await service.updateActivity(
            UpdateActivityRequest(appID: "app", activityID: "game-\(game)", contentStateJSON: #"{"s":1}"#), context: context()
        ).get()
    }

    /// What passes through the intents to the sink is held until it settles: renewed, and not
    /// claimed again by the same node. A row the node leased without handing it over (its call's
    /// COMMIT got no answer, yet landed) is not renewed: once its lease runs out the node claims
    /// it itself and sends it.
    @Test func onlyWhatTheSinkHoldsIsRenewedAndTheNodeClaimsItsOwnLapsedRows() async throws {
        let recorder = RecordingPushSink()
        let node = intents("node-1", takeOver: false)
        node.attach(recorder)
        let through = ActivityService(
            store: store, clock: harness.wall, logger: logger, sink: node, intents: IntentLease(owner: "node-1"))
        let held = try await startAndUpdate(through, game: 1)
        // The same node's call whose outcome it never learned: the row is there, nothing was handed over.
        let unknown = ActivityService(
            store: store, clock: harness.wall, logger: logger, sink: RecordingPushSink(), intents: IntentLease(owner: "node-1"))
        let landed = try await startAndUpdate(unknown, game: 2)
        #expect(node.heldIntents.map(\.activityID).sorted() == ["game-1"], "only the batches it was handed")
        #expect(recorder.batches.map(\.timestamp) == [held.timestamp])

        harness.wall.advance(by: .seconds(20))
        await node.renew()
        harness.wall.advance(by: .seconds(11))
        #expect(try await node.claimUntilClear() == 1, "the lapsed row, and not the renewed one")
        #expect(recorder.batches.map(\.timestamp) == [held.timestamp, landed.timestamp])
        #expect(recorder.batches.last?.activityID == "game-2")
        #expect(node.heldIntents.map(\.activityID).sorted() == ["game-1", "game-2"])
        #expect(try await node.claimUntilClear() == 0)
    }

    /// A batch the sink holds whose lease lapsed anyway (renewals failing for a whole lease) is
    /// claimed again to renew it, but not handed to the sink a second time.
    @Test func aHeldBatchWhoseLeaseLapsedIsNotHandedOverTwice() async throws {
        let recorder = RecordingPushSink()
        let node = intents("node-1", takeOver: false)
        node.attach(recorder)
        let service = ActivityService(
            store: store, clock: harness.wall, logger: logger, sink: node, intents: IntentLease(owner: "node-1"))
        _ = try await startAndUpdate(service, game: 1)
        harness.wall.advance(by: .seconds(31))
        #expect(try await node.claimUntilClear() == 0)
        #expect(recorder.batches.count == 1)
        #expect(try await claimable().batches.isEmpty == false, "still recorded, leased again")
    }

    /// A node that cannot send an app's pushes (its APNs key is a file or variable only some
    /// nodes have) leaves their intents: a call is answered with its pushes queued, nothing
    /// reaches its dispatcher, nothing is settled failed, and a node that can claims them once
    /// the lease runs out.
    @Test func aNodeThatCannotServeAnAppLeavesItsIntentsForOneThatCan() async throws {
        let keyless = RecordingPushSink()
        let node1 = intents("node-1", takeOver: false)
        node1.attach(keyless)
        node1.serveOnly { $0 != "app" }
        let service = ActivityService(
            store: store, clock: harness.wall, logger: logger, sink: node1, intents: IntentLease(owner: "node-1"))
        let reply = try await startAndUpdate(service, game: 1)
        #expect(reply.summary?.queued == 1 && reply.summary?.failed == 0)
        #expect(keyless.batches.isEmpty && node1.heldIntents.isEmpty)

        harness.wall.advance(by: .seconds(31))
        #expect(try await node1.claimUntilClear() == 0, "claimed back and left again, not failed")
        #expect(keyless.batches.isEmpty)

        let withKey = RecordingPushSink()
        let node2 = intents("node-2", takeOver: false)
        node2.attach(withKey)
        harness.wall.advance(by: .seconds(31))
        #expect(try await node2.claimUntilClear() == 1, "the update's intent (the start reached no token)")
        #expect(withKey.batches.map(\.timestamp) == [reply.timestamp])
    }

    /// A claim that takes long (a large backlog, a slow store) does not hold back the renewals:
    /// while one claim waits, the held intents' leases are renewed on time.
    @Test(.timeLimit(.minutes(1)))
    func aLongClaimDoesNotHoldBackTheRenewals() async throws {
        let gated = GatedClaimStore(inner: store)
        let node = DispatchIntents(
            configuration: DispatchIntents.Configuration(
                lease: IntentLease(owner: "node-1", duration: .milliseconds(300)), takeOverAtStart: false,
                claimInterval: .milliseconds(10)),
            store: gated, clock: harness.wall, logger: logger, on: callLoop)
        node.attach(RecordingPushSink())
        let service = ActivityService(
            store: store, clock: harness.wall, logger: logger, sink: node, intents: IntentLease(owner: "node-1"))
        _ = try await startAndUpdate(service, game: 1)
        #expect(node.heldIntents.count == 1)
        gated.holdClaims()
        let running = Task { try await node.run() }
        defer { running.cancel() }
        // The claim loop is stuck in its first claim; at a third of the 300 ms lease the renewals come.
        while gated.waitingClaims == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let deadline = ContinuousClock.now + .seconds(20)
        while gated.renewals < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(gated.renewals >= 3, "renewals waited behind the claim")
        #expect(gated.waitingClaims == 1, "the claim was still held meanwhile")
        gated.releaseClaims()
    }
}

/// The memory store, whose claims wait while held (a claim over a long backlog), counting renewals.
final class GatedClaimStore: MemoryReadsStore, @unchecked Sendable {
    let inner: InMemoryActivityStore
    var reads: InMemoryActivityStore { inner }
    private let state = NIOLockedValueBox((held: false, waiting: [EventLoopPromise<Void>](), renewals: 0))

    init(inner: InMemoryActivityStore) { self.inner = inner }

    func holdClaims() { state.withLockedValue { $0.held = true } }
    func releaseClaims() {
        let waiting = state.withLockedValue { state in
            state.held = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for promise in waiting { promise.succeed() }
    }
    var waitingClaims: Int { state.withLockedValue { $0.waiting.count } }
    var renewals: Int { state.withLockedValue { $0.renewals } }

    func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        if mutation is RenewIntents { state.withLockedValue { $0.renewals += 1 } }
        if mutation is ClaimIntents {
            let gate: EventLoopPromise<Void>? = state.withLockedValue { state in
                guard state.held else { return nil }
                let promise = eventLoop.makePromise(of: Void.self)
                state.waiting.append(promise)
                return promise
            }
            if let gate { return gate.futureResult.flatMap { self.inner.apply(mutation, now: now, on: eventLoop) } }
        }
        return inner.apply(mutation, now: now, on: eventLoop)
    }

}
