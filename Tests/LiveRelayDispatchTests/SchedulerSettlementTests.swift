import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import NIOCore
import Testing

/// A durable batch is reported settled once, when its last push is final,
/// with its account; never when the shutdown gave its pushes up.
@Suite struct SchedulerSettlementTests {
    func durable(_ tokens: [String], timestamp: Int64 = 1_700_000_000, app: String = "app-a") throws -> PushBatch {
        var b = try batch(app: app, timestamp: timestamp, tokens: tokens)
        b.durable = true
        return b
    }

    @Test func aDurableBatchIsSettledWhenItsLastPushIsFinal() throws {
        var d = SchedulerDriver()
        d.enqueue(try durable([token(1), token(2), token(3)]), wait: false)
        d.enqueue(try batch(tokens: [token(4)]), wait: false)  // not durable: never reported
        d.respond(200)
        d.respond(410, "Unregistered", timestamp: 1)
        #expect(d.settled.isEmpty)
        d.respond(400, "BadTopic")
        #expect(
            d.settled == [
                SettledBatch(
                    appID: "app-a", activityID: "act-1", timestamp: 1_700_000_000,
                    account: EnqueueResult(delivered: 1, pruned: 1, failures: ["BadTopic": 1]),
                    // The token the account only counts: the event feed reports it.
                    failedPushes: [FailedPush(target: token(3), reason: "BadTopic")])
            ])
        d.respond(200)
        #expect(d.settled.count == 1)
    }

    @Test func aSupersededBatchIsSettledToo() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        d.enqueue(try durable([token(9)], timestamp: 1), wait: false)
        d.enqueue(try durable([token(1)], timestamp: 2), wait: false)
        d.enqueue(try durable([token(1)], timestamp: 3), wait: false)
        #expect(d.settled.map(\.timestamp) == [2])
        #expect(d.settled.first?.account == EnqueueResult(superseded: 1))
        d.respond(200)
        d.respond(200)
        #expect(d.settled.map(\.timestamp) == [2, 1, 3])
    }

    @Test func aBatchForAnUnknownAppIsSettledAsFailed() throws {
        var d = SchedulerDriver()
        d.enqueue(try durable([token(1)], app: "nobody"), wait: false)
        #expect(d.settled.map(\.account) == [EnqueueResult(failures: ["AppNotConfigured": 1])])
    }

    @Test func pushesGivenUpByTheShutdownLeaveTheIntent() throws {
        var d = SchedulerDriver(configuration(maxInFlight: 1))
        d.enqueue(try durable([token(1)], timestamp: 1), wait: false)
        d.enqueue(try durable([token(2)], timestamp: 2), wait: false)
        d.absorb(d.scheduler.beginShutdown(now: d.now, drainUntil: d.now + .seconds(1)))
        d.advance(by: .seconds(2))
        d.respond(200)
        #expect(d.shutdownComplete)
        // The first was delivered; the second failed ShuttingDown and stays for the next start.
        #expect(d.settled.map(\.timestamp) == [1])
    }
}
