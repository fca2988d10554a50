import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayPushOutlet
import LiveRelayStore
import Testing

let order1 = ActivityKey(appID: app.id, activityID: "order-1")

@Suite struct StartActivityRulesTests {
    @Test func startCreatesAStartingActivityAndOnePushPerToken() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        _ = try state.apply(RegisterToken(pushToStart(hex(2), device: "device-2", environment: .sandbox)), now: t0)
        let call = try #require(try state.apply(StartActivity(start(), app: app), now: t0 + .milliseconds(1500)).accepted)

        #expect(call.reply.timestamp == t0.seconds + 1)
        #expect(call.reply.state == .starting)
        #expect(call.reply.targeted == 2 && call.reply.unresolved.isEmpty)
        #expect(call.batch.event == .start)
        #expect(
            Set(call.batch.targets) == [
                PushTarget(token: hex(1), environment: .production),
                PushTarget(token: hex(2), environment: .sandbox),
            ])
        #expect(call.batch.headers.topic == "com.example.app.push-type.liveactivity")
        #expect(call.batch.headers.expiration == (t0 + .milliseconds(1500) + .hours(8)).seconds)
        // The dispatcher's send-by time is the header's second, never half a second past it.
        #expect(call.batch.expiresAt == UnixTime(seconds: call.batch.headers.expiration))
        #expect(call.batch.payload.text.contains(#""input-push-token":1"#))
        let activity = try #require(state.activity(order1))
        #expect(activity.state == .starting)
        #expect(activity.lastTimestamp == t0.seconds + 1)
        #expect(activity.lastContentState == #"{"status":"placed"}"#)
        #expect(activity.expiresAt == t0 + .milliseconds(1500) + .hours(8))
    }

    @Test func theSameKeyReplaysTheFirstReplyAndSendsNothing() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        let first = try #require(try state.apply(StartActivity(start(key: "k1"), app: app), now: t0).accepted)
        _ = try state.apply(RegisterToken(pushToStart(hex(2), device: "device-2")), now: t0)

        var retry = start(key: "k1")
        retry.waitForDelivery = true  // waiting or not, it is the same request
        let plan = try StartActivity(retry, app: app).plan(state, now: t0 + .seconds(30))
        #expect(plan.writes.isEmpty)
        #expect(plan.outcome.replayed == first.reply)
    }

    @Test func anotherKeyOrNoKeyIsAlreadyExists() throws {
        var state = InMemoryState()
        _ = try state.apply(StartActivity(start(key: "k1"), app: app), now: t0)
        #expect(refusal(&state, StartActivity(start(key: "k2"), app: app), now: t0) == .activityAlreadyExists(order1))
        #expect(refusal(&state, StartActivity(start(), app: app), now: t0) == .activityAlreadyExists(order1))
        #expect(DomainError.activityAlreadyExists(order1).code == .alreadyExists)
    }

    @Test func theSameKeyWithAnotherRequestIsRefused() throws {
        var state = InMemoryState()
        _ = try state.apply(StartActivity(start(key: "k1"), app: app), now: t0)
        let error = refusal(&state, StartActivity(start(key: "k1", content: #"{"status":"other"}"#), app: app), now: t0)
        #expect(error == .idempotencyKeyReused(key: "k1", order1, firstUsedFor: .start))
        #expect(error?.code == .failedPrecondition)
    }

    @Test func aTooLargePayloadStoresNothing() throws {
        var state = InMemoryState()
        let big = #"{"p":""# + String(repeating: "x", count: 4000) + #""}"#
        let error = refusal(&state, StartActivity(start(key: "k1", content: big), app: app), now: t0)
        guard case let .payloadTooLarge(size, limit)? = error else { Issue.record("got \(String(describing: error))"); return }
        #expect(size > 4096 && limit == 4096)
        #expect(state.activity(order1) == nil)
        // The caller can retry with a smaller payload under the same key.
        #expect(try state.apply(StartActivity(start(key: "k1"), app: app), now: t0).accepted != nil)
    }

    @Test func aStartWithNoTokensStillStartsAndSaysWhy() throws {
        var state = InMemoryState()
        let call = try #require(try state.apply(StartActivity(start(), app: app), now: t0).accepted)
        #expect(call.reply.targeted == 0)
        #expect(
            call.reply.unresolved == [
                UnresolvedStartTarget(
                    kind: .allDevices, value: "", reason: "no push-to-start token registered for attributes type DeliveryAttributes")
            ])
    }

    /// The record the stores keep with an idempotency key reads back as it was written, escapes included.
    @Test func theStoredReplyRoundTripsThroughItsTargetsJSON() throws {
        let reply = StoredReply(
            timestamp: 1_700_000_000, state: .starting, targeted: 3,
            unresolved: [
                UnresolvedStartTarget(kind: .pushToStartToken, value: hex(9), reason: "no push-to-start token registered"),
                UnresolvedStartTarget(kind: .externalUserID, value: "a \"quoted\"\\ user\n", reason: "ünïcode ✓"),
                UnresolvedStartTarget(kind: .allDevices, value: "", reason: "none"),
            ])
        let again = StoredReply(timestamp: reply.timestamp, state: reply.state, targetsJSON: reply.targetsJSON)
        #expect(again == reply)
        #expect(StoredReply(timestamp: 1, state: .active, targetsJSON: #"{"targeted":1,"unresolved":[["nope","x","y"]]}"#) == nil)
        #expect(StoredReply(timestamp: 1, state: .active, targetsJSON: "not json") == nil)
    }

    /// A settled call's account reads back as it was written, failure reasons escaped; anything else is a corrupt row.
    @Test func theFinalAccountRoundTripsThroughItsJSON() throws {
        let account = EnqueueResult(
            delivered: 7, pruned: 1, superseded: 2, expired: 3, failures: ["Unregistered": 0, "a \"quoted\"\\ reason ✓": 4])
        #expect(StoredReply.account(json: StoredReply.accountJSON(account)) == account)
        #expect(StoredReply.account(json: StoredReply.accountJSON(EnqueueResult())) == EnqueueResult())
        #expect(StoredReply.account(json: #"{"delivered":1,"pruned":0,"superseded":0,"expired":0}"#) == nil)
        #expect(StoredReply.account(json: #"{"delivered":-1,"pruned":0,"superseded":0,"expired":0,"failures":{}}"#) == nil)
        #expect(StoredReply.account(json: #"{"delivered":1,"pruned":0,"superseded":0,"expired":0,"failures":{"x":"1"}}"#) == nil)
        #expect(StoredReply.account(json: "not json") == nil)
    }

    /// Settling writes the call's account on its record (found by timestamp), and a replay returns it.
    @Test func aSettledCallReplaysItsAccount() throws {
        var state = InMemoryState()
        _ = try state.apply(RegisterToken(pushToStart(hex(1))), now: t0)
        let lease = IntentLease(owner: "node")
        let call = try #require(try state.apply(StartActivity(start(key: "k1"), app: app, intents: lease), now: t0).accepted)
        let account = EnqueueResult(delivered: 1)
        try state.apply(SettleIntents([SettledIntent(key: IntentKey(call.batch), account: account)]), now: t0)
        #expect(state.intentCount == 0)
        let replayed = try state.apply(StartActivity(start(key: "k1"), app: app, intents: lease), now: t0 + .seconds(1)).replayed
        #expect(replayed?.account == account)
        #expect(replayed?.targeted == 1)
    }

    /// JSON and the other syntax are checked once, when the request is
    /// decoded, outside the store's writer: such a request never reaches the rule.
    @Test func invalidRequestsAreRefusedOnceWhenDecoded() {
        var request = start()
        request.attributesJSON = "[1]"
        #expect(decodingRefusal(request) == "attributes_json")
    }
}

@Suite struct ChangeActivityRulesTests {
    /// An active activity with one update token, started at t0.
    func activeState() throws -> InMemoryState {
        var state = InMemoryState()
        _ = try state.apply(StartActivity(start(), app: app), now: t0)
        _ = try state.apply(RegisterToken(updateToken(hex(7))), now: t0)
        return state
    }

    @Test func anUnknownActivityIsNotFound() {
        var state = InMemoryState()
        #expect(refusal(&state, ChangeActivity(update(), app: app), now: t0) == .activityNotFound(order1))
        #expect(refusal(&state, ChangeActivity(endRequest(), app: app), now: t0) == .activityNotFound(order1))
        #expect(DomainError.activityNotFound(order1).code == .notFound)
    }

    @Test func updateSendsToTheActivitysUpdateTokens() throws {
        var state = try activeState()
        let call = try #require(try state.apply(ChangeActivity(update(), app: app), now: t0 + .seconds(10)).accepted)
        #expect(call.batch.event == .update)
        #expect(call.batch.targets == [PushTarget(token: hex(7), environment: .sandbox)])
        #expect(call.batch.payload.text == #"{"aps":{"timestamp":1700000010,"event":"update","content-state":{"status":"cooking"}}}"#)
        #expect(call.reply.targeted == 1 && call.reply.unresolved.isEmpty)
        #expect(state.activity(order1)?.lastContentState == #"{"status":"cooking"}"#)
    }

    @Test func twoUpdatesInTheSameSecondKeepTheirOrder() throws {
        var state = try activeState()
        // The start stamped t0; both updates happen within that same second.
        let a = try #require(try state.apply(ChangeActivity(update(), app: app), now: t0 + .milliseconds(100)).accepted)
        let b = try #require(try state.apply(ChangeActivity(update(), app: app), now: t0 + .milliseconds(200)).accepted)
        #expect(a.reply.timestamp == t0.seconds + 1)
        #expect(b.reply.timestamp == t0.seconds + 2)
        // A clock that steps back still never repeats a timestamp.
        let c = try #require(try state.apply(ChangeActivity(update(), app: app), now: t0 - .seconds(60)).accepted)
        #expect(c.reply.timestamp == t0.seconds + 3)
        #expect(state.activity(order1)?.lastTimestamp == t0.seconds + 3)
    }

    @Test func endActivityTrueIsAnEnd() throws {
        var state = try activeState()
        let call = try #require(try state.apply(ChangeActivity(update(end: true), app: app), now: t0 + .seconds(5)).accepted)
        #expect(call.batch.event == .end)
        #expect(call.reply.state == .ended)
        #expect(call.batch.payload.text.contains(#""event":"end""#))
        #expect(state.activity(order1)?.state == .ended)
        #expect(state.activity(order1)?.endedAt == t0 + .seconds(5))
    }

    @Test func endDeletesTheUpdateTokensAndDismissesAfterFourHours() throws {
        var state = try activeState()
        let call = try #require(try state.apply(ChangeActivity(endRequest(), app: app), now: t0 + .seconds(5)).accepted)
        #expect(call.batch.targets.map(\.token) == [hex(7)])
        #expect(state.updateTokens(of: order1).isEmpty)
        #expect(state.activity(order1)?.dismissAt == t0 + .seconds(5) + .hours(4))
        #expect(call.batch.headers.expiration == (t0 + .seconds(5) + .hours(4)).seconds)
    }

    @Test func anEndWithoutContentStateRepeatsTheLastOne() throws {
        var state = try activeState()
        _ = try state.apply(ChangeActivity(update(content: #"{"status":"delivered"}"#), app: app), now: t0 + .seconds(1))
        let call = try #require(
            try state.apply(ChangeActivity(endRequest(dismissal: t0.seconds + 60), app: app), now: t0 + .seconds(2)).accepted)
        #expect(
            call.batch.payload.text
                == #"{"aps":{"timestamp":1700000002,"event":"end","content-state":{"status":"delivered"},"dismissal-date":1700000060}}"#)
    }

    @Test func anEndWithAPastDismissalDateIsDismissedAtOnce() throws {
        var state = try activeState()
        let call = try #require(try state.apply(ChangeActivity(endRequest(dismissal: 0), app: app), now: t0 + .seconds(2)).accepted)
        #expect(call.reply.state == .dismissed)
    }

    @Test func anEndedActivityCannotBeUpdatedOrEndedAgain() throws {
        var state = try activeState()
        _ = try state.apply(ChangeActivity(endRequest(), app: app), now: t0 + .seconds(1))
        let error = refusal(&state, ChangeActivity(update(), app: app), now: t0 + .seconds(2))
        #expect(error == .activityFinished(order1, state: .ended))
        #expect(error?.code == .failedPrecondition)
        #expect(refusal(&state, ChangeActivity(endRequest(), app: app), now: t0 + .seconds(2)) == .activityFinished(order1, state: .ended))
    }

    @Test func anActivityPastEightHoursIsExpiredEvenBeforeTheSweep() throws {
        var state = try activeState()
        #expect(try state.apply(ChangeActivity(update(), app: app), now: t0 + .hours(8) - .seconds(1)).accepted != nil)
        let error = refusal(&state, ChangeActivity(update(), app: app), now: t0 + .hours(8))
        #expect(error == .activityFinished(order1, state: .expired))
        #expect(error?.reason == "ActivityExpired")
    }

    @Test func aRetriedEndReplaysInsteadOfFailing() throws {
        var state = try activeState()
        let first = try #require(try state.apply(ChangeActivity(endRequest(key: "e1"), app: app), now: t0 + .seconds(1)).accepted)
        let replay = try ChangeActivity(endRequest(key: "e1"), app: app).plan(state, now: t0 + .seconds(9))
        #expect(replay.outcome.replayed == first.reply)
        #expect(replay.writes.isEmpty)
    }

    @Test func aKeyReusedForADifferentUpdateIsRefused() throws {
        var state = try activeState()
        _ = try state.apply(ChangeActivity(update(key: "u1"), app: app), now: t0 + .seconds(1))
        #expect(
            refusal(&state, ChangeActivity(update(content: #"{"x":1}"#, key: "u1"), app: app), now: t0 + .seconds(2))
                == .idempotencyKeyReused(key: "u1", order1, firstUsedFor: .update))
        #expect(
            refusal(&state, ChangeActivity(endRequest(key: "u1"), app: app), now: t0 + .seconds(2))
                == .idempotencyKeyReused(key: "u1", order1, firstUsedFor: .update))
    }

    @Test func aTooLargeUpdateChangesNothing() throws {
        var state = try activeState()
        let before = state.activity(order1)
        let big = #"{"p":""# + String(repeating: "x", count: 4070) + #""}"#
        guard case .payloadTooLarge? = refusal(&state, ChangeActivity(update(content: big, key: "u1"), app: app), now: t0 + .seconds(3))
        else { Issue.record("expected payloadTooLarge"); return }
        #expect(state.activity(order1) == before)
        #expect(state.idempotencyRecord(order1, key: "u1") == nil)
    }

    @Test func expiredUpdateTokensAreNotTargeted() throws {
        var state = try activeState()
        _ = try state.apply(RegisterToken(updateToken(hex(8), device: "device-2", expiresAt: t0.seconds + 10)), now: t0)
        let call = try #require(try state.apply(ChangeActivity(update(), app: app), now: t0 + .seconds(10)).accepted)
        #expect(call.batch.targets.map(\.token) == [hex(7)])
    }
}
