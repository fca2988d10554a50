import LiveRelayAPNs
import LiveRelayPushOutlet
import NIOCore

extension DispatchScheduler {
    /// One accepted call. What never changes after ``enqueue`` is kept in one
    /// shared object, so reading a call for each of its pushes (sending, retrying,
    /// superseding) copies a reference instead of its activity id, payload,
    /// headers and apns-id prefix, each with a retain and a release.
    /// The scheduler stays a value: the shared part is immutable.
    struct Call {
        final class Fixed: Sendable {
            let activityID: String
            let timestamp: Int64
            let payload: APNsPayload
            let headers: APNsHeaders
            let first: UInt64
            let count: Int
            /// Names the call in every push's `apns-id`.
            let apnsCall: APNsCallID
            let sendBy: NIODeadline?
            let waits: Bool
            let durable: Bool
            let idempotencyKey: String?

            init(
                activityID: String, timestamp: Int64, payload: APNsPayload, headers: APNsHeaders, first: UInt64,
                count: Int, apnsCall: APNsCallID, sendBy: NIODeadline?, waits: Bool, durable: Bool, idempotencyKey: String? = nil
            ) {
                self.activityID = activityID
                self.timestamp = timestamp
                self.payload = payload
                self.headers = headers
                self.first = first
                self.count = count
                self.apnsCall = apnsCall
                self.sendBy = sendBy
                self.waits = waits
                self.durable = durable
                self.idempotencyKey = idempotencyKey
            }
        }

        let fixed: Fixed
        var replied = false
        var account = CallAccount()
        /// A durable call's pushes that failed for good, for its settlement (the event feed reports each).
        var failedPushes: [FailedPush] = []

        // What the scheduler reads from a call it holds as a whole (sending reads `fixed`).
        var activityID: String { fixed.activityID }
        var timestamp: Int64 { fixed.timestamp }
        var first: UInt64 { fixed.first }
        var count: Int { fixed.count }
        var sendBy: NIODeadline? { fixed.sendBy }
        var waits: Bool { fixed.waits }
        var durable: Bool { fixed.durable }
    }
}
