import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import LiveRelayTestSupport
import NIOCore

/// The dispatcher's scheduler (the pure value inside `Dispatcher`), counted per push:
/// - `dispatch-push`: each iteration enqueues an update to the same 1,000 tokens and
///   answers every send with 200, until the batch is final;
/// - `dispatch-fanout-fresh`: the same with 10,000 tokens the scheduler has not seen (a
///   fan-out's first update after its tokens registered: every push makes its token's
///   lane), the lanes of earlier iterations kept as a running server keeps them.
enum DispatchWorkloads {
    static let batchSize = 1_000
    static let freshBatchSize = 10_000

    static var all: [Workload] {
        [
            Workload(name: "dispatch-push", unit: "push", iterations: 20) { iterations in
                try pushes(iterations: iterations, batchSize: batchSize, freshTokens: false)
            },
            Workload(name: "dispatch-fanout-fresh", unit: "push", iterations: 10) { iterations in
                try pushes(iterations: iterations, batchSize: freshBatchSize, freshTokens: true)
            },
        ]
    }

    static func token(_ n: Int) -> String {
        let digits = String(n, radix: 16)
        return "cd" + String(repeating: "0", count: 62 - digits.count) + digits
    }

    static func batch(timestamp: Int64, tokens: [String]) -> PushBatch {
        PushBatch(
            appID: "app-a", activityID: "match-1", event: .update, timestamp: timestamp,
            payload: APNsPayload(
                bytes: Array(#"{"aps":{"timestamp":\#(timestamp),"event":"update","content-state":{"score":"2-1"}}}"#.utf8)),
            headers: APNsHeaders(bundleID: "com.example.app-a", expiration: 0),
            targets: tokens.map { PushTarget(token: $0, environment: .production) })
    }

    static func pushes(iterations: Int, batchSize: Int, freshTokens: Bool) throws -> () throws -> Int {
        let warmUp = 3
        var scheduler = DispatchScheduler(
            configuration: DispatcherConfiguration(
                apps: [DispatchApp(appID: "app-a", queueCapacity: 100_000, route: testRoute("key-a"))]))
        let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let ok = DispatchAnswer.response(APNsResponse(status: 200))
        // Newer timestamps each time, so no batch is superseded by the one before.
        let batches = (0..<(warmUp + iterations)).map { n in
            let first = freshTokens ? n * batchSize : 0
            return batch(timestamp: 1_700_000_000 + Int64(n), tokens: (first..<(first + batchSize)).map(token))
        }

        func run(_ batch: PushBatch) -> Int {
            let step = scheduler.enqueue(batch, waitForDelivery: false, sendBy: nil, replyBy: nil, now: now)
            var pending = step.actions.sends
            var answered = 0
            while let send = pending.popLast() {
                pending += scheduler.answered(send.push, ok, now: now).sends
                answered += 1
            }
            return answered
        }
        for batch in batches[..<warmUp] {
            guard run(batch) == batchSize else { throw WorkloadFailure("a warm-up batch was not sent whole") }
        }
        guard scheduler.unfinishedCount == 0 else { throw WorkloadFailure("pushes left unfinished after the warm-up") }
        var next = warmUp
        return {
            let answered = run(batches[next])
            next += 1
            return answered
        }
    }
}
