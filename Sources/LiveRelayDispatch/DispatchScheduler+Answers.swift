import LiveRelayAPNs
import LiveRelayBackoff
import LiveRelayPushOutlet
import NIOCore

extension DispatchScheduler {
    // MARK: Answers

    /// Applies what came back for a send, per the APNs response table
    /// (``APNsDisposition``) or the transport error's ``APNsTransportError/isRetryable``;
    /// tells the route's circuit breaker what the answer says about the route,
    /// and the app's mass-pruning guard what it says about the app's tokens.
    public mutating func answered(_ pushID: PushID, _ answer: DispatchAnswer, now: NIODeadline) -> DispatchActions {
        answered(CollectionOfOne((pushID, answer)), now: now)
    }

    /// Applies answers that came together (one read of a connection) as one step:
    /// one pump and one set of actions for all of them.
    public mutating func answered(
        _ answers: some Sequence<(PushID, DispatchAnswer)>, now: NIODeadline
    ) -> DispatchActions {
        var actions = DispatchActions()
        for (push, answer) in answers { apply(push, answer, now: now, &actions) }
        pump(now: now, &actions)
        checkDrained(&actions)
        return actions
    }

    private mutating func apply(_ pushID: PushID, _ answer: DispatchAnswer, now: NIODeadline, _ actions: inout DispatchActions) {
        let id = pushID.raw
        guard let push = pushes[id], push.state == .inFlight else { return }
        let a = push.app
        inFlight -= 1
        routeInFlight[push.route] -= 1
        apps[a].counters.inFlight -= 1
        var lane = apps[a].lanes.take(push.lane)
        if lane.busy == id { lane.busy = nil }
        var credentials: CredentialError?
        let routeOutcome: CircuitBreaker.Outcome

        switch answer {
        case let .response(response):
            // APNs answered: the route works, unless the answer is a 5xx (a 429
            // is about one token's rate, not the endpoint's health).
            routeOutcome = (500..<600).contains(response.status) ? .failure : .success
            // Made only for an answer that is not a delivery: formatting "HTTP200" for each
            // delivered push was work for nothing.
            var reason: String { response.reason ?? DispatchFailure.status(response.status) }
            // A channel is never pruned: an answer that would declare a token dead
            // (APNs sends none for a channel) fails the send instead.
            var disposition = response.disposition
            if push.channelPolicy != nil, disposition == .pruneToken { disposition = .failRequest }
            if push.refreshedAtOnce, disposition != .refreshProviderTokenAndRetry { pushes[id]?.refreshedAtOnce = false }
            switch disposition {
            case .delivered:
                credentials = judge(.accepted, prune: nil, app: a, now: now, &actions)
                finish(id, .delivered, &actions)
            case .pruneToken:
                let dead = PrunedToken(
                    appID: apps[a].id, token: apps[a].lanes.token(at: push.lane), reason: reason,
                    invalidSince: response.timestampMilliseconds.map { UnixTime(milliseconds: $0) })
                let verdict: MassPruneGuard.Answer =
                    switch (response.status, response.reason) {
                    case (400, "BadDeviceToken"): .badDeviceToken
                    case (400, _): .notForTopic
                    default: .accepted  // 410: one device's token, pruned whatever the others say
                    }
                let tokenIsDead: Bool
                if verdict == .accepted {
                    actions.prunes.append(dead)
                    credentials = judge(.accepted, prune: nil, app: a, now: now, &actions)
                    tokenIsDead = true
                } else if isSuspended(a, now: now) {
                    // The app's configuration is in doubt: the answer says nothing about the device.
                    tokenIsDead = false
                } else {
                    // Pruned now, later (held by the guard) or, if this answer trips the guard, not at all.
                    let released = actions.prunes.count
                    credentials = judge(verdict, prune: dead, app: a, now: now, &actions)
                    tokenIsDead = credentials == nil && actions.prunes[released...].contains(dead)
                }
                if !tokenIsDead, credentials != nil || isSuspended(a, now: now) {
                    // The app's configuration is in doubt, not the token: held with the app's other pushes.
                    putBack(id, &lane)
                } else if !tokenIsDead, verdict != .accepted {
                    // The guard holds the prune until its verdict (and drops it if it trips): the push
                    // failed with APNs's reason, and counts as pruned only if its token is pruned now.
                    finish(id, .failed(reason: reason), &actions)
                } else if tokenIsDead {
                    let pruned = PushOutcome.pruned(reason: reason)
                    finish(id, pruned, &actions)
                    // The token is dead for every push queued to it, not only this one.
                    for other in lane.pending { finish(other, pruned, &actions) }
                    lane.pending.removeAll()
                } else {
                    finish(id, .failed(reason: reason), &actions)
                }
            case .failRequest:
                credentials = judge(.accepted, prune: nil, app: a, now: now, &actions)
                finish(id, .failed(reason: reason), &actions)
            case .credentialsRejected:
                // Held, not failed: it goes again once the credentials are accepted.
                putBack(id, &lane)
                // The pushes in flight when the hold began come back rejected too: one rejection per hold.
                credentials =
                    isSuspended(a, now: now)
                    ? apps[a].credentialError : suspend(app: a, status: response.status, reason: reason, now: now, &actions)
            case .refreshProviderTokenAndRetry:
                // The transport has told its token source; the next stream carries a new JWT.
                // A second rejection in a row backs off: a token source that keeps
                // making rejected tokens must not spin the push.
                let atOnce = !push.refreshedAtOnce
                pushes[id]!.refreshedAtOnce = true
                retry(id, &lane, delay: atOnce ? .zero : backoff(after: push.attempts), reason: reason, now: now, &actions)
            case .retryWithBackoff, .retryWithoutNewProviderToken:
                // APNs sends no retry-after (its answers carry only apns-id and the
                // JSON reason), so a 429 backs off like a 503. A proxy in front of it
                // may send one: it is the least wait, never shortened by the back-off
                // (a retry it pushes past the send-by time expires the push).
                var delay = backoff(after: push.attempts)
                if let seconds = response.retryAfterSeconds {
                    delay = max(delay, .seconds(Int64(min(seconds, APNsResponse.maximumRetryAfterSeconds))))
                }
                retry(id, &lane, delay: delay, reason: reason, now: now, &actions)
            }
        case let .transportError(error):
            let reason = error.reason
            switch error {
            case .connectFailed, .connectionLost, .timedOut: routeOutcome = .failure
            // A GOAWAY is APNs moving streams to another connection, not an outage;
            // a push that waited past its send-by time in the transport says nothing either.
            case .refusedByGoAway, .shutDown, .malformedResponse, .expiredBeforeSending: routeOutcome = .neutral
            }
            if push.refreshedAtOnce { pushes[id]?.refreshedAtOnce = false }
            if error == .expiredBeforeSending {
                // The transport kept it from the wire at its send-by time: expired, as if it had waited here.
                finish(id, .expired, &actions)
            } else if error.isRetryable {
                retry(id, &lane, delay: backoff(after: push.attempts), reason: reason, now: now, &actions)
            } else {
                finish(id, .failed(reason: reason), &actions)
            }
        }
        if let transition = breakers[push.route].record(routeOutcome, probe: push.probe, now: now, using: &random) {
            actions.circuitChanges.append((routes[push.route], transition))
        }
        makeReady(&lane, slot: push.lane, app: a, front: false)
        apps[a].lanes.put(consume lane, at: push.lane)
        // An answer that says the credentials work (a delivery, a request refused on its own merits, a
        // 410) ends a hold whose probe it is.
        if !heldApps.isEmpty, credentials == nil, case let .response(response) = answer, apps[a].credentialError?.probing == true,
            response.disposition == .delivered || response.disposition == .failRequest || response.status == 410
        {
            apps[a].credentialError = nil
            heldApps.remove(a)
            actions.holdChanges.append((apps[a].id, false))
        }
    }

    /// Puts a push back at the front of its lane, unsent: the app's pushes are held.
    private mutating func putBack(_ id: UInt64, _ lane: inout Lane) {
        pushes[id]!.state = .queued
        lane.pending.prepend(id)
    }

    /// Retries a push unless that would break a rule: past the optional cap on
    /// attempts (fails with the last reason), overtaken by a newer push of its
    /// activity (superseded), due at or after its send-by time (expired), or
    /// draining past the grace period (fails `ShuttingDown`). Without a cap a
    /// push is retried for as long as it is worth sending.
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
        } else if let maxAttempts = configuration.retry.maxAttempts, push.attempts >= maxAttempts {
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
                lane.pending.prepend(id)
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

    // MARK: Credentials and the mass-pruning guard

    /// Whether the app's hold is in its waiting part (credentials rejected, or tokens rejected en masse).
    /// (The set is asked first: it is empty nearly always, and reading an app's state there costs a copy of it.)
    func isSuspended(_ a: Int, now: NIODeadline) -> Bool {
        guard !heldApps.isEmpty, heldApps.contains(a), let error = apps[a].credentialError else { return false }
        return now < error.suspendedUntil && !error.probing
    }

    /// Whether the pump passes the app over: held and waiting, or probing with its probe out.
    func isHeld(_ a: Int) -> Bool {
        guard !heldApps.isEmpty, heldApps.contains(a), let error = apps[a].credentialError else { return false }
        return !error.probing || apps[a].counters.inFlight > 0
    }

    /// Records one judged answer in the app's ``MassPruneGuard``, emitting the
    /// prunes it releases; when it trips, suspends the app and returns the
    /// error (the caller fails what the app has unsent). While the app is
    /// suspended nothing is recorded, so it is judged afresh after the cooldown.
    private mutating func judge(
        _ answer: MassPruneGuard.Answer, prune: PrunedToken?, app a: Int, now: NIODeadline, _ actions: inout DispatchActions
    ) -> CredentialError? {
        guard !isSuspended(a, now: now) else { return nil }
        switch apps[a].pruneGuard.record(answer, prune: prune) {
        case let .prune(tokens):
            actions.prunes += tokens
            return nil
        case let .tripped(reason):
            return suspend(app: a, status: 400, reason: reason, now: now, &actions)
        }
    }

    /// Holds the app: its pushes wait (none is failed for it) until the hold ends, which doubles with
    /// each rejection in a row; then one push probes the credentials. Operators see why (GetAppStats,
    /// the log, `liverelay_dispatch_app_held`).
    private mutating func suspend(
        app a: Int, status: Int, reason: String, now: NIODeadline, _ actions: inout DispatchActions
    ) -> CredentialError {
        let previous = apps[a].credentialError
        let rejections = (previous?.rejections ?? 0) + 1
        let cooldown = configuration.credentialsCooldown
        let hold = Backoff(initial: cooldown, maximum: max(cooldown, configuration.credentialsHoldMaximum), jitter: 0)
            .delay(after: rejections, random: 0)
        let error = CredentialError(
            status: status, reason: reason, at: now, suspendedUntil: now + hold, heldSince: previous?.heldSince ?? now,
            rejections: rejections)
        if previous == nil { actions.holdChanges.append((apps[a].id, true)) }
        heldApps.insert(a)
        apps[a].credentialError = error
        apps[a].counters.credentialRejections += 1
        actions.credentialRejections.append((apps[a].id, error))
        return error
    }

    // MARK: Time

    /// Runs what is due at `now`: circuit breakers whose cooldown is over turn
    /// half-open; retries whose back-off is over go to the front of their
    /// app's ready queue (they have waited already); calls past their send-by
    /// time expire what they have not sent; waiting calls at their reply time
    /// are answered with what they have; draining past its grace period fails
    /// what is left unsent.
    public mutating func tick(now: NIODeadline) -> DispatchActions {
        var actions = DispatchActions()
        for route in breakers.indices {
            if let transition = breakers[route].advance(now: now) { actions.circuitChanges.append((routes[route], transition)) }
        }
        while let id = retryTimers.popDue(now) {
            guard let push = pushes[id], push.state == .backingOff else { continue }
            var lane = apps[push.app].lanes.take(push.lane)
            if lane.busy == id {
                lane.busy = nil
                pushes[id]!.state = .queued
                lane.pending.prepend(id)
                makeReady(&lane, slot: push.lane, app: push.app, front: true)
            }
            apps[push.app].lanes.put(consume lane, at: push.lane)
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
        for a in heldApps where apps[a].credentialError.map({ !$0.probing && $0.suspendedUntil <= now }) == true {
            apps[a].credentialError?.probing = true
        }
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
            apps[a].lanes.forget { _, lane in lane.isIdle && now - lane.lastTaken >= retention }
            remaining += apps[a].lanes.count
        }
        nextSweep = remaining > 0 ? now + retention : nil
    }

    /// Expires a push that is queued or waiting to retry; one in flight was sent in time.
    private mutating func expireUnsent(_ id: UInt64, _ actions: inout DispatchActions) {
        guard let push = pushes[id], push.state != .inFlight else { return }
        let outcome = expiry(app: push.app)
        if push.state == .backingOff {
            var lane = apps[push.app].lanes.take(push.lane)
            if lane.busy == id { lane.busy = nil }
            finish(id, outcome, &actions)
            makeReady(&lane, slot: push.lane, app: push.app, front: false)
            apps[push.app].lanes.put(consume lane, at: push.lane)
        } else {
            // A queued push stays in its lane as a stale id, skipped when the lane comes up.
            finish(id, outcome, &actions)
        }
    }

    /// How a push of the app ends at its send-by time: expired, or, while the app's
    /// credentials are held, failed with the rejection's reason (which is why it was not sent).
    func expiry(app a: Int) -> PushOutcome {
        guard !heldApps.isEmpty, heldApps.contains(a) else { return .expired }
        return apps[a].credentialError.map { .failed(reason: $0.reason) } ?? .expired
    }

    /// Ends every push of the app that is not in flight with `outcome`.
    mutating func failUnsent(app a: Int, _ outcome: PushOutcome, _ actions: inout DispatchActions) {
        for slot in apps[a].lanes.allSlots {
            var lane = apps[a].lanes.take(slot)
            for id in lane.pending { finish(id, outcome, &actions) }
            lane.pending.removeAll()
            if let busy = lane.busy, pushes[busy]?.state == .backingOff {
                finish(busy, outcome, &actions)
                lane.busy = nil
            }
            apps[a].lanes.put(consume lane, at: slot)
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

    mutating func checkDrained(_ actions: inout DispatchActions) {
        switch phase {
        case .draining, .finishing: break
        case .running, .stopped: return
        }
        guard unfinished == 0 else { return }
        phase = .stopped
        actions.shutdownComplete = true
    }
}
