import LiveRelayAPNs
import LiveRelayPushOutlet
import NIOCore

/// One step of taking a call's targets (``DispatchScheduler/beginEnqueue(_:waitForDelivery:sendBy:replyBy:now:)``).
public struct EnqueueStep: Sendable {
    public var call: CallID
    /// What to answer the caller with now. A call that does not wait is
    /// answered by its first step, with its account then: every push not yet
    /// final counts as queued, taken into a lane or not. A waiting call is
    /// answered here only when every push is final within the step, else
    /// later in ``DispatchActions/replies``.
    public var immediate: EnqueueResult?
    /// Targets are left: ``DispatchScheduler/continueEnqueue(_:now:)`` takes the next slice.
    public var more: Bool
    public var actions: DispatchActions
}

extension DispatchScheduler {
    /// A fan-out taken a slice at a time: what is left of it. The rest (its
    /// activity, timestamp and push numbers) is its ``Call``, which lives while
    /// targets are untaken: their pushes count as unfinished.
    struct Taking {
        var targets: [PushTarget]
        var next = 0
        let app: Int
    }

    /// Takes every target of `batch` in one step: ``beginEnqueue(_:waitForDelivery:sendBy:replyBy:now:)``
    /// with no slice limit. Returns the result to answer with now (always for a
    /// call that does not wait; for a waiting call only when every push is
    /// already final), else the call's answer comes later in ``DispatchActions/replies``.
    public mutating func enqueue(
        _ batch: PushBatch, waitForDelivery: Bool, sendBy: NIODeadline?, replyBy: NIODeadline?, now: NIODeadline
    ) -> (call: CallID, immediate: EnqueueResult?, actions: DispatchActions) {
        let step = begin(batch, waitForDelivery: waitForDelivery, sendBy: sendBy, replyBy: replyBy, now: now, slice: .max)
        return (step.call, step.immediate, step.actions)
    }

    /// Registers the call and takes the first ``DispatcherConfiguration/enqueueSlice``
    /// of its targets; ``continueEnqueue(_:now:)`` takes the rest, one slice per step.
    ///
    /// Why slices: taking a target costs about half a microsecond (its lane
    /// found or made, its push recorded), and the dispatcher holds its lock for
    /// a step. A 100,000-token fan-out taken whole held it for 40–70 ms (a
    /// million-token one ten times that), so every other app's calls and every
    /// APNs answer waited that long, and the fan-out's own first push left, and
    /// its caller was answered, only after its last target was taken.
    ///
    /// Between slices the rest of the system goes on. The call's untaken
    /// pushes count as queued and unfinished, so neither the call's account
    /// nor a drain can end before they are taken; a call that does not wait
    /// is answered after its first slice with that account. A newer call of
    /// the same activity enqueued between slices takes the lanes first: the
    /// older call's later pushes to those tokens are then superseded, as two
    /// racing calls' always were.
    ///
    /// - Parameters:
    ///   - sendBy: pushes not sent by then expire, and are not retried past it
    ///     (the batch's expiry, or a waiting call's deadline less the reply
    ///     margin, whichever is first); the app's
    ///     ``DispatchApp/maxPushLifetime`` from `now` caps it further.
    ///   - replyBy: when a waiting call is answered even if pushes are still in
    ///     flight (its deadline; the dispatcher fails such a call with
    ///     ``DeliveryDeadlineExceeded``).
    public mutating func beginEnqueue(
        _ batch: PushBatch, waitForDelivery: Bool, sendBy: NIODeadline?, replyBy: NIODeadline?, now: NIODeadline
    ) -> EnqueueStep {
        begin(
            batch, waitForDelivery: waitForDelivery, sendBy: sendBy, replyBy: replyBy, now: now,
            slice: configuration.enqueueSlice)
    }

    /// Takes the next slice of a call that ``beginEnqueue(_:waitForDelivery:sendBy:replyBy:now:)``
    /// left with ``EnqueueStep/more``; nothing for a call with nothing left to take.
    public mutating func continueEnqueue(_ call: CallID, now: NIODeadline) -> EnqueueStep {
        var actions = DispatchActions()
        guard let taking = self.taking.removeValue(forKey: call.raw) else {
            return EnqueueStep(call: call, immediate: nil, more: false, actions: actions)
        }
        // A call that does not wait was answered by its first step: only a waiting one's reply comes here.
        let (reply, more) = takeSlice(taking, call: call.raw, slice: configuration.enqueueSlice, now: now, &actions)
        return EnqueueStep(call: call, immediate: reply, more: more, actions: actions)
    }

    /// Calls whose targets are not all taken yet.
    public var callsBeingTaken: Int { taking.count }

    private mutating func begin(
        _ batch: PushBatch, waitForDelivery: Bool, sendBy: NIODeadline?, replyBy: NIODeadline?, now: NIODeadline,
        slice: Int
    ) -> EnqueueStep {
        var actions = DispatchActions()
        let callID = nextCall
        nextCall += 1
        let n = batch.targets.count
        guard let a = appIndex[batch.appID], n > 0 else {
            let result = n == 0 ? EnqueueResult() : EnqueueResult(failures: [DispatchFailure.appNotConfigured: n])
            if n > 0 {
                // Final at once, and counted like every other final push: in the app's account and the metrics.
                if unrouted[batch.appID] != nil || unrouted.count < Self.maxUnroutedApps { unrouted[batch.appID, default: 0] += n }
                actions.outcomes.append(
                    OutcomeCount(appID: batch.appID, outcome: .failed(reason: DispatchFailure.appNotConfigured), count: n, app: -1))
            }
            if batch.durable {
                let failed = batch.targets.map { FailedPush(target: $0.token, reason: DispatchFailure.appNotConfigured) }
                actions.settled.append(
                    SettledBatch(
                        appID: batch.appID, activityID: batch.activityID, timestamp: batch.timestamp, account: result,
                        failedPushes: failed, idempotencyKey: batch.idempotencyKey))
            }
            return EnqueueStep(call: CallID(raw: callID), immediate: result, more: false, actions: actions)
        }
        let first = nextPush
        nextPush += UInt64(n)
        let lifetimeEnd = apps[a].maxPushLifetime.map { now + $0 }
        let sendBy = [sendBy, lifetimeEnd].compactMap { $0 }.min()
        var call = Call(
            fixed: Call.Fixed(
                activityID: batch.activityID, timestamp: batch.timestamp, payload: batch.payload,
                headers: batch.headers, first: first, count: n,
                apnsCall: APNsCallID(instance: configuration.apnsIDInstance, call: callID),
                sendBy: sendBy, waits: waitForDelivery, durable: batch.durable, idempotencyKey: batch.idempotencyKey))
        call.account.result.queued = n
        calls[callID] = call
        apps[a].counters.enqueued += n
        apps[a].counters.unfinished += n
        unfinished += n
        let (reply, more) = takeSlice(Taking(targets: batch.targets, app: a), call: callID, slice: slice, now: now, &actions)
        // A call that finished in its first slice has no timers to keep.
        if calls[callID] != nil {
            if let sendBy { callTimers.push(sendBy, .sendBy(callID)) }
            if waitForDelivery, let replyBy { callTimers.push(replyBy, .replyBy(callID)) }
        }
        // A call that does not wait is answered now, with its account so far.
        let immediate = waitForDelivery ? reply : calls[callID]?.account.result ?? finishedWhileEnqueuing ?? EnqueueResult()
        return EnqueueStep(call: CallID(raw: callID), immediate: immediate, more: more, actions: actions)
    }

    /// Takes up to `slice` of the call's targets, then fills the send slots;
    /// keeps the rest in ``taking`` for the next step. Returns a waiting call's
    /// reply if its last push became final in this step, and whether targets are left.
    private mutating func takeSlice(
        _ taking: Taking, call callID: UInt64, slice: Int, now: NIODeadline, _ actions: inout DispatchActions
    ) -> (reply: EnqueueResult?, more: Bool) {
        var taking = taking
        let a = taking.app
        // There while targets are untaken (their pushes are unfinished).
        let call = calls[callID]!.fixed
        let start = taking.next
        let end = taking.targets.count - start > slice ? start + slice : taking.targets.count
        taking.next = end
        enqueuing = callID
        finishedWhileEnqueuing = nil
        defer { enqueuing = nil }
        // Asked again per slice: a shutdown between slices refuses the rest.
        let refusal = refusal(app: a, now: now)
        if start == 0, refusal == nil { apps[a].lanes.reserve(forBatchOf: taking.targets.count) }
        for i in start..<end {
            if let refusal {
                settle(call: callID, app: a, .failed(reason: refusal), target: taking.targets[i].token, &actions)
            } else {
                take(
                    call.first + UInt64(i), target: taking.targets[i], call: callID, activity: call.activityID,
                    timestamp: call.timestamp, app: a, now: now, &actions)
            }
        }
        let more = end < taking.targets.count
        if more { self.taking[callID] = taking }
        // The sends this pump can make, made room for at once: grown by doubling, the
        // array of a fan-out's first sends was copied about ten times over.
        actions.sends.reserveCapacity(min(end - start, max(0, configuration.maxInFlight - inFlight)))
        pump(now: now, &actions)
        checkDrained(&actions)

        let id = CallID(raw: callID)
        guard !more, let index = actions.replies.firstIndex(where: { $0.call == id }) else { return (nil, more) }
        return (actions.replies.remove(at: index).result, more)
    }

    /// Why the app's pushes cannot be taken now, if they cannot. (An app whose credentials are held
    /// takes them: they wait with the others, within the app's queue capacity.)
    private func refusal(app a: Int, now: NIODeadline) -> String? {
        if phase != .running { return DispatchFailure.shuttingDown }
        return nil
    }

    /// One target into its token's lane: superseded if a newer push of the
    /// activity was taken for the token, superseding the older one queued or retrying.
    private mutating func take(
        _ id: UInt64, target: PushTarget, call: UInt64, activity: String, timestamp: Int64, app a: Int, now: NIODeadline,
        _ actions: inout DispatchActions
    ) {
        let slot = apps[a].lanes.slot(for: target.token)
        var lane = apps[a].lanes.take(slot)
        lane.lastTaken = now
        if nextSweep == nil { nextSweep = now + configuration.laneRetention }
        // Put back at each exit, not in a `defer`: the deferred put copied the lane
        // and destroyed both (two outlined value operations per push).
        let newest = lane.newest[activity]
        if let newest, timestamp <= newest {
            apps[a].lanes.put(consume lane, at: slot)
            settle(call: call, app: a, .superseded, &actions)
            return
        }
        lane.newest[activity] = timestamp
        // Only a lane that took a push of this activity before can hold one to supersede.
        // A push-to-start token starting one new activity after another skips the scan,
        // which was quadratic in the lane's backlog (every start copied each waiting push's call).
        if newest != nil {
            lane.pending.removeAll { old in
                guard let push = pushes[old] else { return true }
                guard calls[push.call]?.activityID == activity else { return false }
                finish(old, .superseded, &actions)
                return true
            }
            if let busy = lane.busy, let push = pushes[busy], push.state == .backingOff,
                calls[push.call]?.activityID == activity
            {
                finish(busy, .superseded, &actions)
                lane.busy = nil
            }
        }
        pushes.insert(
            Push(call: call, app: a, lane: slot, environment: target.environment, channelPolicy: target.channelPolicy), for: id)
        lane.pending.append(id)
        makeReady(&lane, slot: slot, app: a, front: false)
        apps[a].lanes.put(consume lane, at: slot)
    }
}
