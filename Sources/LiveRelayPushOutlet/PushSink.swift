import LiveRelayAPNs
import NIOCore

/// Where the service hands the pushes of an accepted call: the APNs
/// dispatcher (LiveRelayDispatch) in a deployment, a recording double in tests.
/// This module is the only thing the service and the dispatcher share, so
/// neither imports the other.
///
/// A mutating call talks to its sink twice:
/// 1. ``admit(appID:)`` before the store write. A refusal there is the only
///    moment a call can be turned away for lack of room (RESOURCE_EXHAUSTED,
///    only for that app): once the state is durable, its pushes must be
///    accounted for, not dropped.
/// 2. ``enqueue(_:options:on:)`` after the state that produced the batch is
///    durable. The result is what the reply's DeliverySummary reports.
///
/// Batches of one activity may arrive out of order when calls race; see ``PushBatch``.
public protocol PushSink: Sendable {
    /// Whether the app's queue may take a new call's pushes. Cheap and
    /// synchronous: it runs before every Start, Update and End.
    func admit(appID: String) -> PushAdmission

    /// Takes a batch; the future succeeds once the pushes are queued (or, with
    /// `options.waitForDelivery`, once every push is final). A waiting call whose
    /// deadline comes first fails with ``DeliveryDeadlineExceeded``.
    func enqueue(_ batch: PushBatch, options: EnqueueOptions, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult>

    /// The batch with default options: reply once queued, no deadline.
    func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult>

    /// Whether the sink began to drain: what a waiting call (a long poll of the
    /// event feed) looks at to end early. Unlike ``admit(appID:)`` it counts nothing.
    var isShuttingDown: Bool { get }
}

extension PushSink {
    /// Sinks without queues (test doubles) always have room.
    public func admit(appID: String) -> PushAdmission { .admitted }

    /// Sinks without a drain (test doubles) never shut down.
    public var isShuttingDown: Bool { false }

    /// Sinks that cannot deliver ignore the options: their reply is "queued".
    public func enqueue(_ batch: PushBatch, options: EnqueueOptions, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
        enqueue(batch, on: eventLoop)
    }
}

/// How the caller of a batch wants its answer.
public struct EnqueueOptions: Hashable, Sendable {
    /// Reply only when every push is final (`wait_for_delivery`).
    public var waitForDelivery: Bool
    /// The call's deadline. With `waitForDelivery`, a push not sent by then is
    /// counted as expired, so the waiting caller gets its account in time;
    /// without, it bounds only the call: the pushes live on to their own expiry.
    public var deadline: NIODeadline?
    /// The RPC's request id, for the sink's logs (beside the call's `apns-id`s).
    public var requestID: UInt64?

    public init(waitForDelivery: Bool = false, deadline: NIODeadline? = nil, requestID: UInt64? = nil) {
        self.waitForDelivery = waitForDelivery
        self.deadline = deadline
        self.requestID = requestID
    }
}

/// A waiting call's deadline passed before every push was final: the call is
/// DEADLINE_EXCEEDED (docs/PROTOCOL.md section 6), never an OK reply with
/// `complete = false`. `account` is what the sink knew at the deadline.
public struct DeliveryDeadlineExceeded: Error, Hashable, Sendable {
    public var account: EnqueueResult

    public init(account: EnqueueResult) {
        self.account = account
    }
}

/// A sink's answer to ``PushSink/admit(appID:)``.
public enum PushAdmission: Hashable, Sendable {
    case admitted
    /// The app has `unfinished` pushes against a capacity of `capacity`: RESOURCE_EXHAUSTED, with a retry hint.
    case queueFull(unfinished: Int, capacity: Int, retryAfterMS: UInt32)
    /// The sink is draining for shutdown: UNAVAILABLE.
    case shuttingDown
}

/// What a sink did with a batch: every target is counted exactly once, so
/// `queued + delivered + pruned + superseded + expired + failed == targets`.
public struct EnqueueResult: Hashable, Sendable {
    /// Accepted and not yet final.
    public var queued: Int
    /// APNs answered 200.
    public var delivered: Int
    /// APNs declared the token dead (410, BadDeviceToken, DeviceTokenNotForTopic).
    public var pruned: Int
    /// Dropped because a newer push of the same activity went (or goes) to the token.
    public var superseded: Int
    /// Not sent before the call's deadline or the push's apns-expiration.
    public var expired: Int
    /// Refused or failed for good, by reason ("QueueFull", "InvalidProviderToken"...).
    public var failures: [String: Int]

    public init(
        queued: Int = 0, delivered: Int = 0, pruned: Int = 0, superseded: Int = 0, expired: Int = 0,
        failures: [String: Int] = [:]
    ) {
        self.queued = queued
        self.delivered = delivered
        self.pruned = pruned
        self.superseded = superseded
        self.expired = expired
        self.failures = failures
    }

    /// Every push failed for good, whatever the reason.
    public var failed: Int { failures.values.reduce(0, +) }

    /// Every push the result accounts for.
    public var total: Int { queued + delivered + pruned + superseded + expired + failed }
}
