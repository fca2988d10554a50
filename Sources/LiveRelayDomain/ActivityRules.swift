import LiveRelayAPNs
import LiveRelayMessages
import LiveRelayPushOutlet

/// What a StartActivity, UpdateActivity or EndActivity came to.
public enum ActivityCallOutcome: Hashable, Sendable {
    /// The idempotency key was used before for this same request: its first reply, nothing new sent.
    case replayed(StoredReply)
    case accepted(AcceptedCall)

    /// The accepted call, or nil for a replay.
    public var accepted: AcceptedCall? {
        if case let .accepted(call) = self { return call }
        return nil
    }

    /// The first reply, or nil for a newly accepted call.
    public var replayed: StoredReply? {
        if case let .replayed(reply) = self { return reply }
        return nil
    }
}

/// An accepted call: the state it left and the pushes it asks for.
public struct AcceptedCall: Hashable, Sendable {
    /// The activity after the call.
    public var activity: Activity
    public var batch: PushBatch
    /// The reply as stored for replays: `targeted` and `unresolved` are final;
    /// `queued` assumes the sink takes every push (the service reports what it did take).
    public var reply: StoredReply
}

/// A StartActivity as the rules use it: the fields of a request the message
/// layer has already validated (required fields, sizes, JSON objects, token
/// hex), so the rule never validates again inside the store's transaction.
public struct StartCommand: Hashable, Sendable {
    public var appID: String
    public var activityID: String
    public var attributesType: String
    /// A JSON object, spliced into the payload as it is.
    public var attributesJSON: String
    public var content: LiveActivityContent
    /// `apns-priority`: 10 or 5.
    public var priority: Int
    public var targets: Targets
    public var idempotencyKey: String?
    /// ``Fingerprint`` of the request, compared with a stored one on replays.
    public var fingerprint: UInt64
    /// Ask the new activity for an update token (`input-push-token: 1`).
    public var inputPushToken: Bool
    /// Subscribe the new activity to this broadcast channel (`input-push-channel`),
    /// which the service has found to be the app's.
    public var channelID: String?

    /// The fields of a request that passed `StartActivityRequest.validate()` (every decoded request has).
    public init(validated request: StartActivityRequest) {
        appID = request.appID ?? ""
        activityID = request.activityID ?? ""
        attributesType = request.attributesType ?? ""
        attributesJSON = request.attributesJSON ?? "{}"
        content = LiveActivityContent(
            contentStateJSON: request.contentStateJSON, alert: request.alert, staleDate: request.staleDate,
            dismissalDate: request.dismissalDate, relevanceScore: request.relevanceScore)
        priority = request.priority.apnsPriority
        targets = request.targets ?? Targets()
        idempotencyKey = request.idempotencyKey?.nonEmpty
        fingerprint = Fingerprint.of(request)
        inputPushToken = request.inputPushToken ?? true
        channelID = request.channelID?.nonEmpty
    }
}

/// StartActivity's rule: a new activity under the caller's id, sent to the resolved push-to-start tokens.
public struct StartActivity: StoreMutation {
    public var command: StartCommand
    public var app: App
    /// Record the pushes as a durable ``DispatchIntent`` leased to this node; nil records none.
    public var intents: IntentLease?
    /// Set when the app is at its live-activity quota: a new start is refused, a replay is not.
    public var activityQuota: CountQuota?

    public init(_ command: StartCommand, app: App, intents: IntentLease? = nil, activityQuota: CountQuota? = nil) {
        self.command = command
        self.app = app
        self.intents = intents
        self.activityQuota = activityQuota
    }

    /// A request that passed validation (every decoded request has).
    public init(_ request: StartActivityRequest, app: App, intents: IntentLease? = nil, activityQuota: CountQuota? = nil) {
        self.init(StartCommand(validated: request), app: app, intents: intents, activityQuota: activityQuota)
    }

    public var scope: MutationScope { .app(command.appID) }

    /// The type's push-to-start tokens for `all_devices`, else the tokens named.
    public func tokensRead(in state: some TokenCounts, upTo limit: Int) -> Int {
        guard command.targets.allDevices == true else { return command.targets.pushToStartTokens.count }
        return state.pushToStartTokenCount(appID: command.appID, attributesType: command.attributesType, upTo: limit)
    }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<ActivityCallOutcome> {
        let appID = command.appID, activityID = command.activityID
        let attributesType = command.attributesType
        let key = ActivityKey(appID: appID, activityID: activityID)
        let fingerprint = command.fingerprint

        if let idempotencyKey = command.idempotencyKey,
            let record = state.idempotencyRecord(key, key: idempotencyKey)
        {
            guard record.operation == .start, record.fingerprint == fingerprint else {
                throw .idempotencyKeyReused(key: idempotencyKey, key, firstUsedFor: record.operation)
            }
            return MutationPlan(outcome: .replayed(record.reply))
        }
        // An activity known only from update tokens registered before any push
        // (a device reported its token before this Start arrived) is taken over
        // by the Start; one that was started, or already pushed to, is taken.
        let preRegistered = state.activity(key)
        if let preRegistered, !preRegistered.isOnlyPreRegistered(at: now) { throw .activityAlreadyExists(key) }
        if let activityQuota { throw .quotaExceeded(appID: appID, activityQuota) }

        let resolution = TargetResolution.resolve(
            command.targets, appID: appID, attributesType: attributesType, state: state, now: now)
        let stamp = now.seconds
        let payload = try APNsPayloadBuilder.start(
            timestamp: stamp, attributesType: attributesType, attributesJSON: command.attributesJSON,
            content: command.content, inputPushToken: command.inputPushToken, channelID: command.channelID)

        // With update tokens already registered, the activity runs on a device: active,
        // and its 8-hour clock runs from the first token.
        let activity = Activity(
            appID: appID, id: activityID, attributesType: attributesType, state: preRegistered == nil ? .starting : .active,
            lastTimestamp: stamp, lastContentState: command.content.contentStateJSON,
            createdAt: preRegistered?.createdAt ?? now)
        var batch = PushBatch(
            appID: appID, activityID: activityID, event: .start, timestamp: stamp, payload: payload,
            headers: APNsHeaders(
                bundleID: app.bundleID, priority: command.priority,
                expiration: activity.expiresAt.seconds),
            targets: resolution.targets,
            expiresAt: PushBatch.sendBy(activity.expiresAt))
        batch.idempotencyKey = command.idempotencyKey
        let reply = StoredReply(
            timestamp: stamp, state: activity.state, targeted: batch.targets.count,
            unresolved: resolution.unresolved)

        var writes: [StoreWrite] = [.putActivity(activity)]
        writes += DispatchIntent.record(&batch, lease: intents, now: now)
        if let idempotencyKey = command.idempotencyKey {
            writes.append(
                .putIdempotencyRecord(
                    IdempotencyRecord(
                        appID: appID, activityID: activityID, key: idempotencyKey, operation: .start,
                        fingerprint: fingerprint, reply: reply, createdAt: now)))
        }
        return MutationPlan(writes: writes, outcome: .accepted(AcceptedCall(activity: activity, batch: batch, reply: reply)))
    }
}

/// UpdateActivity's and EndActivity's rule (an Update with `end_activity: true` is an End).
public struct ChangeActivity: StoreMutation {
    public let appID: String
    public let activityID: String
    public let event: APNsEvent
    /// Which RPC the call was, for idempotency records.
    public let operation: IdempotentOperation
    public let content: LiveActivityContent
    /// `apns-priority`: 10 or 5 (the service lowers it to 5 when the priority-10 budget is spent).
    public var priority: Int
    public let idempotencyKey: String?
    public let fingerprint: UInt64
    public let app: App
    /// Record the pushes as a durable ``DispatchIntent`` leased to this node; nil records none.
    public var intents: IntentLease?
    /// The broadcast channel the request named, as the service found it in
    /// the app's channels (``PushTarget/channel(_:environment:storagePolicy:)``);
    /// nil: the activity's update tokens only.
    public var channel: PushTarget?
    /// Send to the channel only, not to the activity's update tokens.
    public let channelOnly: Bool

    /// The fields of a request that passed `UpdateActivityRequest.validate()` (every decoded request has).
    public init(_ request: UpdateActivityRequest, app: App, intents: IntentLease? = nil) {
        self.appID = request.appID ?? ""
        self.activityID = request.activityID ?? ""
        self.event = request.endActivity == true ? .end : .update
        self.operation = .update
        self.content = LiveActivityContent(
            contentStateJSON: request.contentStateJSON, alert: request.alert, staleDate: request.staleDate,
            dismissalDate: request.dismissalDate, relevanceScore: request.relevanceScore)
        self.priority = request.priority.apnsPriority
        self.idempotencyKey = request.idempotencyKey?.nonEmpty
        self.fingerprint = Fingerprint.of(request)
        self.app = app
        self.intents = intents
        self.channelOnly = request.channelOnly == true
    }

    /// The fields of a request that passed `EndActivityRequest.validate()` (every decoded request has).
    public init(_ request: EndActivityRequest, app: App, intents: IntentLease? = nil) {
        self.appID = request.appID ?? ""
        self.activityID = request.activityID ?? ""
        self.event = .end
        self.operation = .end
        self.content = LiveActivityContent(
            contentStateJSON: request.contentStateJSON, alert: request.alert, staleDate: request.staleDate,
            dismissalDate: request.dismissalDate, relevanceScore: request.relevanceScore)
        self.priority = request.priority.apnsPriority
        self.idempotencyKey = request.idempotencyKey?.nonEmpty
        self.fingerprint = Fingerprint.of(request)
        self.app = app
        self.intents = intents
        self.channelOnly = request.channelOnly == true
    }

    public var scope: MutationScope { .app(appID) }

    /// The activity's update tokens: the fan-out reads them, and an end deletes them too.
    public func tokensRead(in state: some TokenCounts, upTo limit: Int) -> Int {
        state.updateTokenCount(of: ActivityKey(appID: appID, activityID: activityID), upTo: limit)
    }

    public func plan(_ state: some StateReader, now: UnixTime) throws(DomainError) -> MutationPlan<ActivityCallOutcome> {
        let key = ActivityKey(appID: appID, activityID: activityID)
        guard var activity = state.activity(key) else { throw .activityNotFound(key) }

        // A retry of a call that already ended the activity must replay, not fail: check keys first.
        if let idempotencyKey, let record = state.idempotencyRecord(key, key: idempotencyKey) {
            guard record.operation == operation, record.fingerprint == fingerprint else {
                throw .idempotencyKeyReused(key: idempotencyKey, key, firstUsedFor: record.operation)
            }
            return MutationPlan(outcome: .replayed(record.reply))
        }
        if activity.isFinished(at: now) {
            throw .activityFinished(key, state: activity.state.isFinished ? activity.state : .expired)
        }

        // Devices ignore a timestamp older than or equal to the last: never reuse one.
        let stamp = max(now.seconds, activity.lastTimestamp + 1)
        let sendsToTokens = !(channelOnly && channel != nil)
        var content = self.content
        var writes: [StoreWrite] = []
        let payload: APNsPayload
        let expiration: UnixTime
        // A send to the channel alone may carry a broadcast's larger payload; one that also goes to tokens may not.
        let limit = channel != nil && channelOnly ? APNsBroadcast.maxPayloadBytes : APNsPayload.maxBytes
        switch event {
        case .update, .start:
            payload = try APNsPayloadBuilder.update(timestamp: stamp, content: content, limit: limit)
            activity.lastContentState = content.contentStateJSON ?? activity.lastContentState
            expiration = activity.expiresAt
        case .end:
            content.contentStateJSON = content.contentStateJSON ?? activity.lastContentState
            payload = try APNsPayloadBuilder.end(timestamp: stamp, content: content, limit: limit)
            activity.lastContentState = content.contentStateJSON
            activity.endedAt = now
            activity.dismissAt = content.dismissalDate.map { UnixTime(seconds: $0) } ?? now + ActivityLifetime.dismissalWindow
            activity.state = (activity.dismissAt ?? now) <= now ? .dismissed : .ended
            // The end push may still reach a device that was offline until the activity would leave the screen.
            expiration = now + ActivityLifetime.dismissalWindow
            // Update tokens die with their activity: nothing can be sent to them after the end.
            // One write for all of them (the plan's reads below see the state before its writes).
            writes.append(.deleteUpdateTokens(of: key))
        }
        activity.lastTimestamp = stamp

        // An end goes where an update would: the live update tokens, read as the fan-out reads them.
        var targets: [PushTarget] = sendsToTokens ? state.updateTargets(of: key, at: now) : []
        if let channel { targets.append(channel) }
        var batch = PushBatch(
            appID: appID, activityID: activityID, event: event, timestamp: stamp, payload: payload,
            headers: APNsHeaders(bundleID: app.bundleID, priority: priority, expiration: expiration.seconds),
            targets: targets, expiresAt: PushBatch.sendBy(expiration))
        batch.idempotencyKey = idempotencyKey
        let reply = StoredReply(timestamp: stamp, state: activity.state, targeted: targets.count)
        writes.insert(.putActivity(activity), at: 0)
        writes += DispatchIntent.record(&batch, lease: intents, now: now, channelOnly: channelOnly)
        if let idempotencyKey {
            writes.append(
                .putIdempotencyRecord(
                    IdempotencyRecord(
                        appID: appID, activityID: activityID, key: idempotencyKey, operation: operation,
                        fingerprint: fingerprint, reply: reply, createdAt: now)))
        }
        if event == .end { writes.append(.appendEvent(.activityEnded(key, state: activity.state, at: now))) }
        return MutationPlan(writes: writes, outcome: .accepted(AcceptedCall(activity: activity, batch: batch, reply: reply)))
    }
}

/// A hash of a request's meaning, stable across processes and builds (FNV-1a
/// 64 over a tagged, length-prefixed encoding), because it is stored with an
/// idempotency key and compared after restarts; Swift's `Hasher` is seeded
/// per process. Transport details (`wait_for_delivery`) are left out: waiting
/// or not, it is the same request.
public struct Fingerprint {
    private var hash: UInt64 = 0xcbf2_9ce4_8422_2325

    private mutating func byte(_ b: UInt8) {
        hash ^= UInt64(b)
        hash &*= 0x0000_0100_0000_01b3
    }

    private mutating func u64(_ v: UInt64) { for i in 0..<8 { byte(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }

    private mutating func tag(_ t: UInt8, present: Bool) {
        byte(t)
        byte(present ? 1 : 0)
    }

    mutating func add(_ t: UInt8, _ s: String?) {
        tag(t, present: s != nil)
        guard let s else { return }
        u64(UInt64(s.utf8.count))
        for b in s.utf8 { byte(b) }
    }

    mutating func add(_ t: UInt8, _ v: Int64?) {
        tag(t, present: v != nil)
        if let v { u64(UInt64(bitPattern: v)) }
    }

    mutating func add(_ t: UInt8, _ v: Double?) {
        tag(t, present: v != nil)
        if let v { u64(v.bitPattern) }
    }

    mutating func add(_ t: UInt8, _ strings: [String]) {
        tag(t, present: true)
        u64(UInt64(strings.count))
        for s in strings { add(t, s) }
    }

    /// Absent and unspecified mean the default, high: the same request.
    mutating func add(_ t: UInt8, _ p: Priority?) {
        add(t, Int64(p == .low ? 5 : 10))
    }

    mutating func add(_ t: UInt8, _ alert: Alert?) {
        tag(t, present: alert != nil)
        add(t, alert?.title)
        add(t, alert?.body)
        add(t, alert?.sound)
    }

    public static func of(_ r: StartActivityRequest) -> UInt64 {
        var f = Fingerprint()
        f.add(0, "start")
        f.add(1, r.appID); f.add(2, r.activityID); f.add(3, r.attributesType); f.add(4, r.attributesJSON)
        f.add(5, r.contentStateJSON); f.add(6, r.alert); f.add(7, r.staleDate); f.add(8, r.dismissalDate)
        f.add(9, r.relevanceScore); f.add(10, r.priority)
        f.add(11, r.targets?.pushToStartTokens ?? []); f.add(12, r.targets?.externalUserIDs ?? [])
        f.add(13, r.targets?.allDevices == true ? "all" : nil)
        // Added with channels: hashed only when set, so keys stored before still match their requests.
        if let channel = r.channelID { f.add(14, channel) }
        if r.inputPushToken == false { f.add(15, "no-input-push-token") }
        return f.hash
    }

    public static func of(_ r: UpdateActivityRequest) -> UInt64 {
        var f = Fingerprint()
        f.add(0, "update")
        f.add(1, r.appID); f.add(2, r.activityID); f.add(3, r.contentStateJSON); f.add(4, r.alert)
        f.add(5, r.staleDate); f.add(6, r.dismissalDate); f.add(7, r.relevanceScore); f.add(8, r.priority)
        f.add(9, r.endActivity == true ? "end" : nil)
        if let channel = r.channelID { f.add(10, channel) }
        if r.channelOnly == true { f.add(11, "channel-only") }
        return f.hash
    }

    public static func of(_ r: EndActivityRequest) -> UInt64 {
        var f = Fingerprint()
        f.add(0, "end")
        f.add(1, r.appID); f.add(2, r.activityID); f.add(3, r.contentStateJSON); f.add(4, r.dismissalDate)
        f.add(5, r.alert); f.add(6, r.priority)
        if let stale = r.staleDate { f.add(7, stale) }
        if let score = r.relevanceScore { f.add(8, score) }
        if let channel = r.channelID { f.add(9, channel) }
        if r.channelOnly == true { f.add(10, "channel-only") }
        return f.hash
    }
}

extension Optional where Wrapped == Priority {
    /// The `apns-priority` the caller asked for: 5 for `low`, else 10 (APNs's default).
    package var apnsPriority: Int { self == .low ? 5 : 10 }
}
