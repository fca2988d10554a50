import LiveRelayAPNs
import LiveRelayDispatch
import LiveRelayPushOutlet
import NIOCore
import Testing

/// A fan-out taken a slice at a time: its first pushes leave before its last
/// targets are taken, and the call is accounted for as one.
@Suite struct SchedulerSliceTests {
    func sliced(_ slice: Int, maxInFlight: Int = 100) -> DispatcherConfiguration {
        var c = configuration(maxInFlight: maxInFlight)
        c.enqueueSlice = slice
        return c
    }

    @Test func theFirstSliceIsSentAndTheCallerAnsweredBeforeTheRestIsTaken() throws {
        var d = SchedulerDriver(sliced(4))
        let first = d.begin(try batch(tokens: (0..<10).map(token)), wait: false)
        #expect(first.more)
        #expect(first.immediate == EnqueueResult(queued: 10), "answered with every push queued, taken or not")
        #expect(d.outstanding.map(\.request.deviceToken) == (0..<4).map(token), "the first slice is on its way")
        #expect(d.scheduler.callsBeingTaken == 1)
        #expect(d.scheduler.counters(appID: "app-a")?.unfinished == 10, "the untaken pushes count as unfinished")
        d.respond(200)
        d.respond(200)
        let second = d.takeMore(first.call)
        #expect(second.more)
        #expect(second.immediate == nil, "a call that does not wait is answered once")
        #expect(d.outstanding.count == 6)
        let last = d.takeMore(first.call)
        #expect(!last.more)
        #expect(last.immediate == nil)
        #expect(d.scheduler.callsBeingTaken == 0)
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.everSent.map(\.request.deviceToken) == (0..<10).map(token), "each token once, in order")
        let counters = try #require(d.scheduler.counters(appID: "app-a"))
        #expect(counters.delivered == 10)
        #expect(counters.unfinished == 0)
        #expect(!d.takeMore(first.call).more, "nothing is left to take")
    }

    @Test func aWaitingCallIsAnsweredOnlyOnceItsLastSliceIsDelivered() throws {
        var d = SchedulerDriver(sliced(4))
        let call = d.begin(try batch(tokens: (0..<10).map(token))).call
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[call] == nil, "six pushes are not even taken yet")
        #expect(d.takeMore(call).more)
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[call] == nil)
        #expect(!d.takeMore(call).more)
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[call] == EnqueueResult(delivered: 10))
    }

    @Test func aWaitingCallWhoseLastSliceEndsItIsAnsweredByThatStep() throws {
        var d = SchedulerDriver(sliced(2))
        let tokens = (0..<4).map(token)
        d.enqueue(try batch(timestamp: 11, tokens: tokens), wait: false)
        // Every push of the older call is superseded as it is taken.
        let older = d.begin(try batch(timestamp: 10, tokens: tokens))
        #expect(older.more)
        #expect(older.immediate == nil)
        let last = d.takeMore(older.call)
        #expect(last.immediate == EnqueueResult(superseded: 4))
    }

    @Test func aNewerCallTakenBetweenSlicesSupersedesTheOlderCallsLaterPushes() throws {
        var d = SchedulerDriver(sliced(2))
        let tokens = (0..<6).map(token)
        let older = d.begin(try batch(timestamp: 10, tokens: tokens)).call
        let newer = d.begin(try batch(timestamp: 11, tokens: tokens))
        #expect(newer.more)
        while d.takeMore(newer.call).more {}
        while d.takeMore(older).more {}
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[newer.call] == EnqueueResult(delivered: 6))
        // The older call's first slice was on the wire already; the rest never left.
        #expect(d.replies[older] == EnqueueResult(delivered: 2, superseded: 4))
        for t in tokens {
            let sent = d.everSent.filter { $0.request.deviceToken == t }.compactMap { timestamp(of: $0.request) }
            #expect(sent == sent.sorted(), "never an older update after a newer one to \(t)")
            #expect(sent.last == 11)
        }
    }

    @Test func aShutdownBetweenSlicesRefusesTheRestAndTheDrainStillEnds() throws {
        var d = SchedulerDriver(sliced(4))
        let call = d.begin(try batch(tokens: (0..<10).map(token))).call
        d.absorb(d.scheduler.beginShutdown(now: d.now, drainUntil: d.now + .seconds(10)))
        #expect(!d.shutdownComplete, "six pushes are not even taken yet")
        #expect(d.takeMore(call).more)
        #expect(!d.takeMore(call).more)
        while !d.outstanding.isEmpty { d.respond(200) }
        #expect(d.replies[call] == EnqueueResult(delivered: 4, failures: [DispatchFailure.shuttingDown: 6]))
        #expect(d.shutdownComplete)
    }

    @Test func aBatchThatFitsOneSliceIsTakenInOneStep() throws {
        var d = SchedulerDriver(sliced(4))
        let step = d.begin(try batch(tokens: (0..<4).map(token)))
        #expect(!step.more)
        #expect(d.scheduler.callsBeingTaken == 0)
        #expect(d.outstanding.count == 4)
    }
}
