import LiveRelayAPNs
import LiveRelayPushOutlet
import NIOConcurrencyHelpers
import NIOCore

/// A push sink that records the batches it is given and sends nothing: the
/// service's tests read what a call handed to dispatch.
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
    private var newest: [ActivityRef: Int64] = [:]
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
            let key = ActivityRef(appID: batch.appID, activityID: batch.activityID)
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

private struct ActivityRef: Hashable {
    var appID: String
    var activityID: String
}
