import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayPushOutlet
import NIOCore

extension DispatchScheduler {
    // MARK: Answers

    /// Applies what came back for a send, per the APNs response table
    /// (``APNsDisposition``) or the transport error's ``APNsTransportError/isRetryable``.
    public mutating func answered(_ pushID: PushID, _ answer: DispatchAnswer, now: NIODeadline) -> DispatchActions {
        var actions = DispatchActions()
        let id = pushID.raw
        guard let push = pushes[id], push.state == .inFlight else { return actions }
        let a = push.app
        inFlight -= 1
        routeInFlight[push.route] -= 1
        apps[a].counters.inFlight -= 1
        var lane = apps[a].lanes.removeValue(forKey: push.token) ?? Lane()
        if lane.busy == id { lane.busy = nil }
        var credentials: CredentialError?

        switch answer {
        case let .response(response):
            let reason = response.reason ?? DispatchFailure.status(response.status)
            switch response.disposition {
            case .delivered:
                finish(id, .delivered, &actions)
            case .pruneToken:
                finish(id, .pruned, &actions)
                actions.prunes.append(
                    PrunedToken(
                        appID: apps[a].id, token: push.token, reason: reason,
                        invalidSince: response.timestampMilliseconds.map { UnixTime(milliseconds: $0) }))
                // The token is dead for every push queued to it, not only this one.
                for other in lane.pending { finish(other, .pruned, &actions) }
                lane.pending.removeAll()
            case .failRequest:
                finish(id, .failed(reason: reason), &actions)
            case .credentialsRejected:
                finish(id, .failed(reason: reason), &actions)
                let error = CredentialError(
                    status: response.status, reason: reason, at: now,
                    suspendedUntil: now + configuration.credentialsCooldown)
                apps[a].credentialError = error
                apps[a].counters.credentialRejections += 1
                credentials = error
                actions.credentialRejections.append((apps[a].id, error))
            case .refreshProviderTokenAndRetry:
                // The transport has told its token source; the next stream carries a new JWT.
                retry(id, &lane, delay: .zero, reason: reason, now: now, &actions)
            case .retryWithBackoff, .retryWithoutNewProviderToken:
                retry(id, &lane, delay: backoff(after: push.attempts), reason: reason, now: now, &actions)
            }
        case let .transportError(error):
            let reason = error.reason
            if error.isRetryable {
                retry(id, &lane, delay: backoff(after: push.attempts), reason: reason, now: now, &actions)
            } else {
                finish(id, .failed(reason: reason), &actions)
            }
        }
        makeReady(&lane, token: push.token, app: a, front: false)
        apps[a].lanes[push.token] = lane
        if let credentials { failUnsent(app: a, .failed(reason: credentials.reason), &actions) }
        pump(now: now, &actions)
        checkDrained(&actions)
        return actions
    }

    /// Retries a push unless that would break a rule: out of attempts (fails
    /// with the last reason), overtaken by a newer push of its activity
    /// (superseded), due after its send-by time (expired), or draining past
    /// the grace period (fails `ShuttingDown`).
    private mutating func retry(
        _ id: UInt64, _ lane: inout Lane, delay: TimeAmount, reason: String, now: NIODeadline,
        _ actions: inout DispatchActions
    ) {
        guard let push = pushes[id], let call = calls[push.call] else { return }
        let due = now + delay
        if phase == .finishing {
            finish(id, .failed(reason: DispatchFailure.shuttingDown), &actions)
        } else if case let .draining(until) = phase, due >= until {
            finish(id, .failed(reason: DispatchFailure.shuttingDown), &actions)
        } else if push.attempts >= configuration.retry.maxAttempts {
            finish(id, .failed(reason: reason), &actions)
        } else if let newest = lane.newest[call.activityID], call.timestamp < newest {
            finish(id, .superseded, &actions)
        } else if let sendBy = call.sendBy, due >= sendBy {
            finish(id, .expired, &actions)
        } else {
            apps[push.app].counters.retries += 1
            actions.retries[apps[push.app].id, default: 0] += 1
            if delay == .zero {
                pushes[id]!.state = .queued
                lane.pending.insert(id, at: 0)
            } else {
                pushes[id]!.state = .backingOff
                lane.busy = id
                retryTimers.push(due, id)
            }
        }
    }

    private mutating func backoff(after attempts: Int) -> TimeAmount {
        configuration.retry.backoff.delay(after: attempts, random: random.unit())
    }

    // MARK: Time

    /// Runs what is due at `now`: retries whose back-off is over go to the
    /// front of their app's ready queue (they have waited already); calls
    /// past their send-by time expire what they have not sent; waiting calls
    /// at their reply time are answered with what they have; draining past
    /// its grace period fails what is left unsent.
    public mutating func tick(now: NIODeadline) -> DispatchActions {
        var actions = DispatchActions()
        while let id = retryTimers.popDue(now) {
            guard let push = pushes[id], push.state == .backingOff,
                var lane = apps[push.app].lanes.removeValue(forKey: push.token)
            else { continue }
            if lane.busy == id {
                lane.busy = nil
                pushes[id]!.state = .queued
                lane.pending.insert(id, at: 0)
                makeReady(&lane, token: push.token, app: push.app, front: true)
            }
            apps[push.app].lanes[push.token] = lane
        }
        while let timer = callTimers.popDue(now) {
            switch timer {
            case let .sendBy(callID):
                guard let call = calls[callID] else { continue }
                for id in call.first..<(call.first + UInt64(call.count)) { expireUnsent(id, &actions) }
            case let .replyBy(callID):
                guard let call = calls[callID], call.waits, !call.replied else { continue }
                calls[callID]!.replied = true
                actions.replies.append((CallID(raw: callID), call.account.result))
            }
        }
        if let sweep = nextSweep, sweep <= now { forgetIdleLanes(now: now) }
        if case let .draining(until) = phase, until <= now {
            phase = .finishing
            for a in apps.indices { failUnsent(app: a, .failed(reason: DispatchFailure.shuttingDown), &actions) }
        }
        pump(now: now, &actions)
        checkDrained(&actions)
        return actions
    }

    /// Drops the lanes idle for ``DispatcherConfiguration/laneRetention``; looks
    /// again a retention later while any lane is left (one pass over the lanes
    /// per retention, not per push).
    private mutating func forgetIdleLanes(now: NIODeadline) {
        let retention = configuration.laneRetention
        var remaining = 0
        for a in apps.indices {
            apps[a].lanes = apps[a].lanes.filter { !$0.value.isIdle || now - $0.value.lastTaken < retention }
            remaining += apps[a].lanes.count
        }
        nextSweep = remaining > 0 ? now + retention : nil
    }

    /// Expires a push that is queued or waiting to retry; one in flight was sent in time.
    private mutating func expireUnsent(_ id: UInt64, _ actions: inout DispatchActions) {
        guard let push = pushes[id], push.state != .inFlight else { return }
        if push.state == .backingOff, var lane = apps[push.app].lanes.removeValue(forKey: push.token) {
            if lane.busy == id { lane.busy = nil }
            finish(id, .expired, &actions)
            makeReady(&lane, token: push.token, app: push.app, front: false)
            apps[push.app].lanes[push.token] = lane
        } else {
            // A queued push stays in its lane as a stale id, skipped when the lane comes up.
            finish(id, .expired, &actions)
        }
    }

    /// Ends every push of the app that is not in flight with `outcome`.
    mutating func failUnsent(app a: Int, _ outcome: PushOutcome, _ actions: inout DispatchActions) {
        for token in Array(apps[a].lanes.keys) {
            guard var lane = apps[a].lanes.removeValue(forKey: token) else { continue }
            for id in lane.pending { finish(id, outcome, &actions) }
            lane.pending.removeAll()
            if let busy = lane.busy, pushes[busy]?.state == .backingOff {
                finish(busy, outcome, &actions)
                lane.busy = nil
            }
            apps[a].lanes[token] = lane
        }
    }

    // MARK: Shutdown

    /// Stops admitting; keeps sending until nothing is left or `drainUntil`,
    /// then fails what is unsent with `ShuttingDown`. In-flight pushes keep
    /// their answers (a retryable one past the grace period fails too).
    /// ``DispatchActions/shutdownComplete`` comes once nothing is unfinished.
    public mutating func beginShutdown(now: NIODeadline, drainUntil: NIODeadline) -> DispatchActions {
        guard phase == .running else { return DispatchActions() }
        phase = .draining(until: drainUntil)
        return tick(now: now)
    }

    private mutating func checkDrained(_ actions: inout DispatchActions) {
        switch phase {
        case .draining, .finishing: break
        case .running, .stopped: return
        }
        guard unfinished == 0 else { return }
        phase = .stopped
        actions.shutdownComplete = true
    }
}
