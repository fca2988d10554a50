import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import LiveRelayWire
import Logging
import NIOCore
import Testing

@Suite struct RegisterTokenServiceTests {
    @Test func registerRotateRemove() async throws {
        let h = Harness()
        #expect(try await h.register(pushToStart(hex(1))).result == .created)
        #expect(try await h.register(pushToStart(hex(1))).result == .unchanged)
        #expect(try await h.register(pushToStart(hex(2))) == RegisterTokenReply(result: .rotated, replacedToken: hex(1)))
        var remove = pushToStart(hex(2))
        remove.remove = true
        #expect(try await h.register(remove).result == .removed)
        #expect(try await h.register(remove).result == .notFound)
    }

    /// Syntax is refused when the server decodes a request (RPCTests); what a
    /// rule refuses (here an expiry already past) comes back the same way.
    @Test func aBadFieldIsInvalidArgumentNamingIt() async throws {
        let h = Harness()
        var request = pushToStart(hex(1))
        request.expiresAt = t0.seconds - 1
        let error = await rpcError(h.service.registerToken(request, context: h.context()))
        #expect(error?.status == .invalidArgument)
        #expect(error?.details.fieldViolations.first?.field == "expires_at")
        #expect(h.store.snapshot.tokenCount == 0)
    }
}

@Suite struct PermissionTests {
    @Test func everyActivityRPCChecksTheApp() async throws {
        let h = Harness()
        let other = h.context(apps: .only(["com.other.app"]))
        let errors = [
            await rpcError(h.service.registerToken(pushToStart(hex(1)), context: other)),
            await rpcError(h.service.startActivity(startRequest(), context: other)),
            await rpcError(h.service.updateActivity(updateRequest(), context: other)),
            await rpcError(h.service.endActivity(endRequest(), context: other)),
        ]
        for error in errors {
            #expect(error?.status == .permissionDenied)
            #expect(error?.message.contains(appID) == true)
        }
        #expect(h.store.snapshot.tokenCount == 0 && h.store.snapshot.activityCount == 0)
    }

    @Test func anUnknownAppIsNotFoundAndAKnownOnesBundleMakesTheTopic() async throws {
        let h = Harness(apps: AppDirectory(apps: [App(id: "shop", bundleID: "com.shop.ios")]))
        let error = await rpcError(h.service.registerToken(pushToStart(hex(1)), context: h.context(apps: .all)))
        #expect(error?.status == .notFound)
        #expect(error?.details.reason == "UnknownApp")

        let shop = h.context(apps: .only(["shop"]))
        _ = try await h.service.registerToken(pushToStart(hex(1), app: "shop"), context: shop).get()
        _ = try await h.service.startActivity(startRequest(app: "shop"), context: shop).get()
        #expect(h.recorder.batches.first?.headers.topic == "com.shop.ios.push-type.liveactivity")
    }

    @Test func appsReconfiguredWhileServingTakeEffectOnTheNextCall() async throws {
        let h = Harness(apps: AppDirectory(apps: [App(id: "shop", bundleID: "com.shop.ios")]))
        let all = h.context(apps: .all)
        #expect(await rpcError(h.service.registerToken(pushToStart(hex(1), app: "cafe"), context: all))?.status == .notFound)
        h.service.reconfigure(apps: AppDirectory(apps: [App(id: "cafe", bundleID: "com.cafe.ios")]))
        _ = try await h.service.registerToken(pushToStart(hex(1), app: "cafe"), context: all).get()
        _ = try await h.service.startActivity(startRequest(app: "cafe"), context: all).get()
        #expect(h.recorder.batches.last?.headers.topic == "com.cafe.ios.push-type.liveactivity")
        #expect(await rpcError(h.service.registerToken(pushToStart(hex(2), app: "shop"), context: all))?.status == .notFound)
    }
}

@Suite struct StartActivityServiceTests {
    @Test func aStartQueuesOnePushPerTokenAndReportsTheUnresolved() async throws {
        let h = Harness()
        try await h.register(pushToStart(hex(1), user: "user-a"))
        let reply = try await h.start(
            startRequest(
                targets: Targets(
                    pushToStartTokens: [hex(1), hex(9)],
                    externalUserIDs: ["user-a", "ghost"])))
        #expect(reply.activityID == "order-1")
        #expect(reply.timestamp == t0.seconds)
        #expect(reply.state == .starting)
        #expect(reply.replayed == false)
        let summary = try #require(reply.summary)
        #expect(summary.targeted == 1)
        #expect(summary.queued == 1)
        #expect(summary.complete == false)
        #expect(summary.unresolved.map(\.value) == [hex(9), "ghost"])

        let batch = try #require(h.recorder.batches.first)
        #expect(batch.targets == [PushTarget(token: hex(1), environment: .production)])
        #expect(
            batch.payload.text
                == #"{"aps":{"timestamp":1700000000,"event":"start","content-state":{"status":"placed"},"attributes-type":"DeliveryAttributes","attributes":{"orderID":"A1"},"input-push-token":1}}"#
        )
        #expect(batch.headers.topic == "com.example.app.push-type.liveactivity")
        #expect(batch.headers.priority == 10)
    }

    @Test func aRetryWithTheSameKeyReplaysAndQueuesNothingMore() async throws {
        let h = Harness()
        try await h.register(pushToStart(hex(1)))
        let first = try await h.start(startRequest(key: "k1"))
        h.clock.advance(by: .seconds(7))
        let again = try await h.start(startRequest(key: "k1"))
        #expect(again.replayed)
        #expect(again.timestamp == first.timestamp)
        #expect(again.summary == first.summary)
        #expect(h.recorder.batches.count == 1)
    }

    /// Without durable intents nothing reports a call's end: its replay keeps
    /// the plan. A call that reached no token has nothing in flight, so its
    /// replay is complete, like its first reply.
    @Test func aReplayWithoutAnAccountReportsThePlan() async throws {
        let h = Harness()
        try await h.register(pushToStart(hex(1)))
        let first = try await h.start(startRequest(key: "k1"))
        let again = try await h.start(startRequest(key: "k1"))
        #expect(again.summary?.queued == 1 && again.summary?.complete == false)
        #expect(first.summary == again.summary)
        let nobody = try await h.start(startRequest("order-2", targets: Targets(externalUserIDs: ["nobody"]), key: "k2"))
        let nobodyAgain = try await h.start(startRequest("order-2", targets: Targets(externalUserIDs: ["nobody"]), key: "k2"))
        #expect(nobodyAgain.replayed)
        #expect(nobodyAgain.summary?.targeted == 0 && nobodyAgain.summary?.complete == true)
        #expect(nobodyAgain.summary == nobody.summary)
    }

    @Test func anotherKeyIsAlreadyExists() async throws {
        let h = Harness()
        try await h.start(startRequest(key: "k1"))
        let error = await rpcError(h.service.startActivity(startRequest(key: "k2"), context: h.context()))
        #expect(error?.status == .alreadyExists)
        #expect(error?.details.reason == "ActivityAlreadyExists")
        let reused = await rpcError(h.service.startActivity(startRequest(key: "k1", content: #"{"x":1}"#), context: h.context()))
        #expect(reused?.status == .failedPrecondition)
        #expect(reused?.details.reason == "IdempotencyKeyReused")
    }

    @Test func aTooLargePayloadIsInvalidArgumentNamingTheSizeAndNothingIsQueued() async throws {
        let h = Harness()
        try await h.register(pushToStart(hex(1)))
        let content = #"{"p":""# + String(repeating: "x", count: 4000) + #""}"#
        let error = await rpcError(h.service.startActivity(startRequest(content: content), context: h.context()))
        let size =
            #"{"aps":{"timestamp":1700000000,"event":"start","content-state":,"attributes-type":"DeliveryAttributes","attributes":{"orderID":"A1"},"input-push-token":1}}"#
            .utf8.count + content.utf8.count
        #expect(error?.status == .invalidArgument)
        let digits = String(size)
        #expect(digits.count == 4)
        #expect(error?.message == "payload is \(digits.prefix(1)),\(digits.dropFirst()) bytes; APNs allows 4,096")
        #expect(error?.details.reason == "PayloadTooLarge")
        #expect(h.recorder.batches.isEmpty)
        #expect(h.store.snapshot.activityCount == 0)
    }

    @Test func theRecorderDeliversNothingSoAWaitingCallStaysIncomplete() async throws {
        let h = Harness()
        let none = try await h.start(startRequest("a", wait: true))
        #expect(none.summary?.complete == true)  // nothing to deliver: the account is final
        try await h.register(pushToStart(hex(1)))
        let one = try await h.start(startRequest("b", wait: true))
        #expect(one.summary?.complete == false)
        #expect(one.summary?.queued == 1)
        #expect(one.summary?.delivered == 0)
    }
}

@Suite struct UpdateAndEndServiceTests {
    func started() async throws -> Harness {
        let h = Harness()
        try await h.start(startRequest())
        try await h.register(updateToken(hex(5)))
        return h
    }

    @Test func anUnknownActivityIsNotFound() async throws {
        let h = Harness()
        #expect(await rpcError(h.service.updateActivity(updateRequest(), context: h.context()))?.status == .notFound)
        #expect(await rpcError(h.service.endActivity(endRequest(), context: h.context()))?.status == .notFound)
    }

    @Test func updatesInTheSameSecondKeepTheirOrder() async throws {
        let h = try await started()
        let a = try await h.update(updateRequest(content: #"{"n":1}"#))
        let b = try await h.update(updateRequest(content: #"{"n":2}"#))
        #expect(a.timestamp == t0.seconds + 1)
        #expect(b.timestamp == t0.seconds + 2)
        #expect(a.state == .active)
        #expect(a.summary?.targeted == 1 && a.summary?.queued == 1)
        // The start found no push-to-start token, so only the updates were queued, in order.
        #expect(h.recorder.batches.map(\.timestamp) == [t0.seconds + 1, t0.seconds + 2])
    }

    @Test func endActivityTrueEndsAndThenUpdatesFail() async throws {
        let h = try await started()
        let ended = try await h.update(updateRequest(end: true))
        #expect(ended.state == .ended)
        #expect(h.recorder.batches.last?.event == .end)
        let error = await rpcError(h.service.updateActivity(updateRequest(), context: h.context()))
        #expect(error?.status == .failedPrecondition)
        #expect(error?.details.reason == "ActivityEnded")
        #expect(await rpcError(h.service.endActivity(endRequest(), context: h.context()))?.status == .failedPrecondition)
    }

    @Test func aRetriedEndReplays() async throws {
        let h = try await started()
        let first = try await h.end(endRequest(key: "e"))
        let again = try await h.end(endRequest(key: "e"))
        #expect(again.replayed && !first.replayed)
        #expect(again.timestamp == first.timestamp)
        #expect(again.state == .ended)
    }

    /// A backlog bigger than one pass's limit clears in one turn of the sweeper, not one pass per interval.
    @Test func theSweeperRepeatsWhileAPassFindsWork() async throws {
        let h = Harness()
        // Ten activities, each known from one update token, past their 8 hours and the retention after.
        for i in 0..<10 { try await h.register(updateToken(hex(i), activity: "order-\(i)", device: "d\(i)")) }
        h.clock.advance(by: .hours(8 + 24 + 1))  // ActivityLifetime.maxActive, .retention, and an hour
        let sweeper = ActivitySweeper(service: h.service, limit: 2, on: h.loop)
        let passes = try await sweeper.sweepUntilClear()
        #expect(passes >= 10, "five passes of two expire them, five more purge them")
        #expect(h.store.snapshot.activityCount == 0)
        #expect(h.store.snapshot.tokenCount == 0)
        #expect(try await sweeper.sweepUntilClear() == 0)
    }

    /// A pass of the memory store's takes at most its own limit (a tenth of the SQL stores'):
    /// each pass holds the lock every call waits for.
    @Test func aSweepPassTakesAtMostTheStoresLimit() async throws {
        let h = Harness()
        #expect(h.store.sweepLimit == 1_000)
        for i in 0..<1_001 {
            var request = pushToStart(hex(i), device: "d\(i)")
            request.expiresAt = t0.seconds + 60
            try await h.register(request)
        }
        h.clock.advance(by: .minutes(2))
        let first = try await h.service.sweep(on: h.loop).get()
        #expect(first.deletedTokens.count == 1_000)
        let second = try await h.service.sweep(on: h.loop).get()
        #expect(second.deletedTokens.count == 1)
        #expect(h.store.snapshot.tokenCount == 0)
    }

    @Test func afterEightHoursTheSweepExpiresTheActivity() async throws {
        let h = try await started()
        h.clock.advance(by: .hours(8))
        let report = try await h.service.sweep(on: h.loop).get()
        #expect(report.expired == [ActivityKey(appID: appID, activityID: "order-1")])
        #expect(h.store.snapshot.token(TokenKey(appID: appID, hex: hex(5))) == nil)
        let error = await rpcError(h.service.updateActivity(updateRequest(), context: h.context()))
        #expect(error?.status == .failedPrecondition)
        #expect(error?.details.reason == "ActivityExpired")
    }
}

@Suite struct HousekeepingTests {
    @Test func pingEchoesWithTheServerClockAndVersion() async throws {
        let h = Harness()
        let reply = try await h.service.ping(PingRequest(payload: [1, 2, 0, 255]), context: h.context()).get()
        #expect(reply == PingReply(payload: [1, 2, 0, 255], serverTimeMS: t0.milliseconds, serverVersion: "1.0"))
    }

    @Test func theStorePrunerRemovesADeadTokenUnlessRegisteredSince() async throws {
        let h = Harness()
        try await h.register(pushToStart(hex(1)))
        let pruner = StoreTokenPruner(store: h.store, clock: h.clock)
        let key = TokenKey(appID: appID, hex: hex(1))
        guard case .reregistered = try await pruner.prune(key, reason: "Unregistered", invalidSince: t0 - .seconds(1), on: h.loop).get()
        else { Issue.record("expected reregistered"); return }
        #expect(h.store.snapshot.tokenCount == 1)
        try await pruner.prune(PrunedToken(appID: appID, token: hex(1), reason: "DeviceTokenNotForTopic"), on: h.loop).get()
        #expect(h.store.snapshot.tokenCount == 0)
    }

    @Test func noNewWorkAfterTheDeadlineOrACancel() async throws {
        let h = Harness()
        let late = h.context(deadline: .now() - .seconds(1))
        #expect(await rpcError(h.service.registerToken(pushToStart(hex(1)), context: late))?.status == .deadlineExceeded)
        let cancelled = h.context()
        cancelled.cancellation.cancel()
        #expect(await rpcError(h.service.startActivity(startRequest(), context: cancelled))?.status == .cancelled)
        #expect(h.store.snapshot.tokenCount == 0 && h.store.snapshot.activityCount == 0)
    }

    @Test func aClosedStoreIsUnavailable() async throws {
        let h = Harness()
        try await h.store.close()
        let error = await rpcError(h.service.registerToken(pushToStart(hex(1)), context: h.context()))
        #expect(error?.status == .unavailable)
    }

    /// UNAVAILABLE otherwise promises that nothing happened: the reason is what tells a
    /// client it may not resend the call blindly, and the message says so to a person.
    @Test func aCommitOfUnknownOutcomeIsUnavailableWithItsReason() async throws {
        let store = UnknownOutcomeStore(.outcomeUnknown("COMMIT timed out after 10 seconds"))
        let service = ActivityService(store: store, clock: ManualClock(t0), logger: Logger(label: "test"), sink: RecordingPushSink())
        let context = Harness().context()
        let errors = [
            await rpcError(service.registerToken(pushToStart(hex(1)), context: context)),
            await rpcError(service.startActivity(startRequest(), context: context)),
        ]
        for error in errors {
            #expect(error?.status == .unavailable)
            #expect(error?.details.reason == ErrorDetails.outcomeUnknownReason)
            #expect(error?.details.reason == "OutcomeUnknown")
            #expect(error?.message.contains("may or may not have taken effect") == true, "\(String(describing: error))")
            #expect(error?.message.contains("COMMIT timed out") == false, "the store's own words stay in the log")
        }
    }

    /// A store that did not answer in time before committing (a statement waiting on a lock, a
    /// lost connection): UNAVAILABLE with a retry time, so that a client sends it again; never INTERNAL.
    @Test func aStoreThatDidNotAnswerInTimeIsUnavailableNeverInternal() async throws {
        let store = UnknownOutcomeStore(.unavailable("timed out after 2.0 seconds running INSERT INTO activities"))
        let service = ActivityService(store: store, clock: ManualClock(t0), logger: Logger(label: "test"), sink: RecordingPushSink())
        let error = await rpcError(service.startActivity(startRequest(), context: Harness().context()))
        #expect(error?.status == .unavailable)
        #expect(error?.details.reason == "StoreUnavailable")
        #expect((error?.details.retryAfterMS ?? 0) > 0)
        #expect(error?.message.contains("INSERT") == false, "the store's own words stay in the log")
    }
}

/// A store whose every commit fails with `error` (by default: ends without an answer).
final class UnknownOutcomeStore: MemoryReadsStore {
    let reads = InMemoryActivityStore()
    let error: ActivityStoreError

    init(_ error: ActivityStoreError = .outcomeUnknown("COMMIT timed out after 10 seconds")) { self.error = error }

    func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        eventLoop.makeFailedFuture(error)
    }

}

@Suite struct PushSinkTests {
    func batch(_ timestamp: Int64, targets: Int = 2) throws -> PushBatch {
        PushBatch(
            appID: appID, activityID: "order-1", event: .update, timestamp: timestamp,
            payload: try APNsPayloadBuilder.update(timestamp: timestamp, content: LiveActivityContent()),
            headers: APNsHeaders(bundleID: appID, expiration: 0),
            targets: (0..<targets).map { PushTarget(token: hex($0), environment: .sandbox) })
    }

    @Test func anOlderBatchArrivingLateIsSupersededNotSentAfterTheNewer() async throws {
        let sink = RecordingPushSink()
        let loop = Harness().loop
        #expect(try await sink.enqueue(batch(11), on: loop).get() == EnqueueResult(queued: 2))
        #expect(try await sink.enqueue(batch(10), on: loop).get() == EnqueueResult(superseded: 2))
        #expect(sink.batches.map(\.timestamp) == [11])
        #expect(sink.recordedPushCount == 2)
    }

    @Test func theRecorderKeepsOnlyTheNewestBatches() async throws {
        let sink = RecordingPushSink(capacity: 3)
        let loop = Harness().loop
        for t in 1...10 { _ = try await sink.enqueue(batch(Int64(t), targets: 1), on: loop).get() }
        #expect(sink.batches.map(\.timestamp) == [8, 9, 10])
        #expect(sink.recordedPushCount == 10)
    }

    /// A sink that refuses some pushes, as a full dispatch queue would.
    struct PartialSink: PushSink {
        func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
            eventLoop.makeSucceededFuture(EnqueueResult(queued: 1, superseded: 1, failures: ["QueueFull": 2, "Another": 1]))
        }
    }

    @Test func theSummaryReportsWhatTheSinkDid() async throws {
        let h = Harness(sink: PartialSink())
        for i in 0..<5 { try await h.register(pushToStart(hex(i), device: "d\(i)")) }
        let summary = try #require(try await h.start(startRequest()).summary)
        #expect(summary.targeted == 5)
        #expect(summary.queued == 1)
        #expect(summary.superseded == 1)
        #expect(summary.failed == 3)
        #expect(summary.failures == [FailureCount(reason: "Another", count: 1), FailureCount(reason: "QueueFull", count: 2)])
    }

    /// A sink with a full queue for one app that records the options it is given.
    final class AdmittingSink: PushSink, @unchecked Sendable {
        let full: String
        var options: [EnqueueOptions] = []
        init(full: String) { self.full = full }

        func admit(appID: String) -> PushAdmission {
            appID == full ? .queueFull(unfinished: 12, capacity: 10, retryAfterMS: 500) : .admitted
        }

        func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
            enqueue(batch, options: EnqueueOptions(), on: eventLoop)
        }

        func enqueue(_ batch: PushBatch, options: EnqueueOptions, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
            self.options.append(options)
            return eventLoop.makeSucceededFuture(
                EnqueueResult(
                    delivered: 1, pruned: 1, expired: 1,
                    failures: ["BadTopic": 1]))
        }
    }

    @Test func aFullQueueRefusesTheCallBeforeTheStoreWriteAndOnlyForThatApp() async throws {
        let sink = AdmittingSink(full: appID)
        let h = Harness(sink: sink)
        let error = await rpcError(h.service.startActivity(startRequest(), context: h.context()))
        #expect(error?.status == .resourceExhausted)
        #expect(error?.details.reason == "QueueFull")
        #expect(error?.details.retryAfterMS == 500)
        #expect(h.store.snapshot.activityCount == 0, "nothing stored for a refused call")
        #expect(sink.options.isEmpty)
        let other = try await h.service.startActivity(startRequest(app: "other.app"), context: h.context(apps: .all)).get()
        #expect(other.summary?.complete == true)
    }

    @Test func waitForDeliveryAndTheDeadlineReachTheSinkAndTheAccountIsReported() async throws {
        let sink = AdmittingSink(full: "nobody")
        let h = Harness(sink: sink)
        for i in 0..<4 { try await h.register(pushToStart(hex(i), device: "d\(i)")) }
        let deadline = NIODeadline.now() + .seconds(30)
        let reply = try await h.service.startActivity(startRequest(wait: true), context: h.context(deadline: deadline)).get()
        #expect(sink.options == [EnqueueOptions(waitForDelivery: true, deadline: deadline, requestID: 1)])
        let summary = try #require(reply.summary)
        #expect(summary.delivered == 1)
        #expect(summary.pruned == 1)
        #expect(summary.expired == 1)
        #expect(summary.failed == 1)
        #expect(summary.queued == 0)
        #expect(summary.complete)
    }

    /// A sink whose waiting call reached its deadline with pushes in flight.
    struct DeadlineSink: PushSink {
        func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
            eventLoop.makeFailedFuture(DeliveryDeadlineExceeded(account: EnqueueResult(queued: 2, delivered: 1, expired: 1)))
        }
    }

    /// docs/PROTOCOL.md section 6: a waiting call whose deadline passes is
    /// DEADLINE_EXCEEDED, never OK with `complete = false`; the state change stays.
    @Test func aWaitingCallPastItsDeadlineIsDeadlineExceededAndItsStateChangeStays() async throws {
        let h = Harness(sink: DeadlineSink())
        for i in 0..<4 { try await h.register(pushToStart(hex(i), device: "d\(i)")) }
        let error = await rpcError(
            h.service.startActivity(
                startRequest(wait: true),
                context: h.context(deadline: .now() + .seconds(30))))
        #expect(error?.status == .deadlineExceeded)
        #expect(error?.details.reason == "DeliveryIncomplete")
        #expect(
            error?.message.hasPrefix(
                "deadline passed with 2 of 4 pushes not final (delivered 1, failed 0, pruned 0, superseded 0, expired 1)") == true,
            "\(String(describing: error))")
        #expect(h.store.snapshot.activityCount == 1, "the call took effect: a resend with its idempotency key replays it")
    }
}
