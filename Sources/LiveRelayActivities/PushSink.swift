#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LiveRelayDomain
import NIOConcurrencyHelpers
import NIOCore

/// Where the service hands the pushes of an accepted call: APNs dispatch
/// (issue 5) once it exists, ``RecordingPushSink`` until then.
///
/// The service calls `enqueue` only after the state that produced the batch
/// is durable, and reports what the result says in the reply's
/// DeliverySummary (queued, superseded, failed by reason). Batches of one
/// activity may arrive out of order when calls race; see ``PushBatch``.
public protocol PushSink: Sendable {
    func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult>
}

/// What a sink did with a batch: every target is counted exactly once.
public struct EnqueueResult: Hashable, Sendable {
    /// Accepted and not yet final.
    public var queued: Int
    /// Dropped because a newer push of the same activity already went to the token.
    public var superseded: Int
    /// Refused for good, by reason ("QueueFull"...).
    public var failures: [String: Int]

    public init(queued: Int = 0, superseded: Int = 0, failures: [String: Int] = [:]) {
        self.queued = queued
        self.superseded = superseded
        self.failures = failures
    }
}

/// Records the batches it is given, so `liverelay serve` and tests work end to
/// end before APNs dispatch exists; nothing is sent anywhere.
///
/// It keeps dispatch's ordering promise at the activity level: a batch whose
/// timestamp is not above the newest one recorded for its activity arrives
/// after it (two racing calls) and is counted as superseded, never recorded
/// behind it. Only the newest `capacity` batches are kept, so a long-running
/// server does not grow without bound; counters cover everything.
public final class RecordingPushSink: PushSink, @unchecked Sendable {
    private let lock = NIOLock()
    private let capacity: Int
    private var recorded: [PushBatch] = []
    private var newest: [ActivityKey: Int64] = [:]
    private var pushCount = 0

    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    /// The batches kept, oldest first.
    public var batches: [PushBatch] { lock.withLock { Array(recorded.suffix(capacity)) } }

    /// Every push ever recorded (not superseded), including batches no longer kept.
    public var recordedPushCount: Int { lock.withLock { pushCount } }

    public func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
        let result: EnqueueResult = lock.withLock {
            let key = ActivityKey(appID: batch.appID, activityID: batch.activityID)
            if let last = newest[key], batch.timestamp <= last {
                return EnqueueResult(superseded: batch.targets.count)
            }
            newest[key] = batch.timestamp
            recorded.append(batch)
            // Trim in halves so appending stays O(1) amortized.
            if recorded.count > 2 * capacity { recorded.removeFirst(recorded.count - capacity) }
            pushCount += batch.targets.count
            return EnqueueResult(queued: batch.targets.count)
        }
        return eventLoop.makeSucceededFuture(result)
    }
}
