import LiveRelayAPNs
import LiveRelayBackoff
import NIOCore
import Testing

@testable import LiveRelayAPNsClient

@Suite("APNs pool state machine")
struct PoolStateMachineTests {
    typealias M = APNsPoolStateMachine<String>

    func machine(connections: Int = 2, queue: Int = 3) -> M {
        M(
            configuration: .init(
                maximumConnections: connections, maximumQueuedRequests: queue,
                backoff: .init(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0)))
    }

    func summary(_ actions: [M.Action]) -> [String] {
        actions.map {
            switch $0 {
            case .dispatch(let w, let id): "dispatch \(w)->\(id)"
            case .fail(let w, let e): "fail \(w) \(e)"
            case .connect(let id): "connect \(id)"
            case .scheduleBackoff(let d): "backoff \(d.nanoseconds / 1_000_000)ms"
            case .close(let id): "close \(id)"
            }
        }
    }

    @Test func connectsLazilyQueuesAndDispatchesWhenReady() {
        var m = machine()
        #expect(summary(m.submit("a")) == ["connect 0"])
        #expect(summary(m.submit("b")) == [])  // one connect at a time
        #expect(summary(m.connectionUpdated(0, phase: .ready, streamLimit: 1)) == ["dispatch a->0", "connect 1"])
        #expect(summary(m.connectionUpdated(0, phase: .ready, streamLimit: 100)) == ["dispatch b->0"])
        #expect(summary(m.submit("c")) == ["dispatch c->0"])
    }

    /// A batch's actions gather in one array, in submission order, the same as one submit at a time.
    @Test func aBatchSubmitsIntoOneArrayInOrder() {
        var one = M(configuration: .init(maximumConnections: 2, maximumQueuedRequests: 2, streamsPerConnection: 2))
        var batch = one
        let waiters = ["a", "b", "c", "d", "e", "f", "g"]
        _ = one.submit("first")
        _ = one.connectionUpdated(0, phase: .ready, streamLimit: 3)
        _ = batch.submit("first")
        _ = batch.connectionUpdated(0, phase: .ready, streamLimit: 3)
        let separately = waiters.flatMap { summary(one.submit($0)) }
        var actions: [M.Action] = [.connect(9)]
        for waiter in waiters { batch.submit(waiter, into: &actions) }
        #expect(summary(actions) == ["connect 9"] + separately)
        // Dispatched while connection 0 has room, queued up to the bound, then refused.
        #expect(Array(separately.prefix(3)) == ["dispatch a->0", "connect 1", "dispatch b->0"])
        #expect(separately.dropFirst(3).allSatisfy { $0.hasPrefix("fail ") })
        #expect(separately.last?.hasPrefix("fail g") == true)
        #expect(batch.queuedCount == 2)
    }

    @Test func picksTheLeastLoadedConnection() {
        var m = machine()
        _ = m.submit("a")
        _ = m.connectionUpdated(0, phase: .ready, streamLimit: 10)
        _ = m.submit("b"); _ = m.submit("c")
        #expect(summary(m.submit("x")) == ["dispatch x->0"])  // only connection 0 exists
        // Connection 1 appears only when requests queue; force one by filling 0.
        for i in 0..<6 { _ = m.submit("f\(i)") }
        #expect(summary(m.submit("q")) == ["connect 1"])
        #expect(summary(m.connectionUpdated(1, phase: .ready, streamLimit: 10)) == ["dispatch q->1"])
        #expect(summary(m.submit("next")) == ["dispatch next->1"])
    }

    @Test func aBusyConnectionOpensAnotherBeforeItIsFullAndLoadSpreads() {
        var m = M(configuration: .init(maximumConnections: 2, maximumQueuedRequests: 10, streamsPerConnection: 2))
        _ = m.submit("a")
        _ = m.connectionUpdated(0, phase: .ready, streamLimit: 10)
        // The second request makes connection 0 carry its share: another opens, though 0 has room.
        #expect(summary(m.submit("b")) == ["dispatch b->0", "connect 1"])
        #expect(summary(m.submit("c")) == ["dispatch c->0"], "one connect at a time")
        _ = m.connectionUpdated(1, phase: .ready, streamLimit: 10)
        #expect(summary(m.submit("d")) == ["dispatch d->1"], "the least loaded takes it")
        #expect(summary(m.submit("e")) == ["dispatch e->1"], "and no third connection beyond the maximum")
        #expect(m.connectionCount == 2)
    }

    @Test func boundedQueueFailsFast() {
        var m = machine(connections: 1, queue: 2)
        _ = m.submit("a"); _ = m.submit("b")
        let third = summary(m.submit("c"))
        #expect(third.count == 1 && third[0].hasPrefix("fail c connectFailed"))
        #expect(m.queuedCount == 2)
    }

    @Test func failedConnectsBackOffExponentiallyAndFailTheQueue() {
        var m = machine(connections: 1)
        _ = m.submit("a")
        let first = summary(m.connectionClosed(0, connectError: "refused", random: 0))
        #expect(first == ["backoff 100ms", "fail a connectFailed(\"refused\")"])
        // While backing off with nothing alive, requests fail fast.
        #expect(summary(m.submit("b")) == ["fail b connectFailed(\"refused\")"])
        #expect(summary(m.backoffElapsed()) == [])
        #expect(summary(m.submit("c")) == ["connect 1"])
        #expect(
            summary(m.connectionClosed(1, connectError: "refused", random: 0)) == ["backoff 200ms", "fail c connectFailed(\"refused\")"])
        _ = m.backoffElapsed(); _ = m.submit("d")
        #expect(summary(m.connectionClosed(2, connectError: "refused", random: 0)).first == "backoff 400ms")
        // A success resets the count.
        _ = m.backoffElapsed(); _ = m.submit("e")
        #expect(summary(m.connectionUpdated(3, phase: .ready, streamLimit: 1)) == ["dispatch e->3"])
        _ = m.requestFinished(on: 3)
        _ = m.connectionClosed(3, connectError: nil, random: 0)
        _ = m.submit("f")
        #expect(summary(m.connectionClosed(4, connectError: "refused", random: 0)).first == "backoff 100ms")
    }

    @Test func backoffJitterAndCap() {
        let b = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0.5)
        #expect(b.delay(after: 1, random: 0) == .milliseconds(100))
        #expect(b.delay(after: 1, random: 1) == .milliseconds(50))
        #expect(b.delay(after: 3, random: 0) == .milliseconds(400))
        #expect(b.delay(after: 30, random: 0) == .seconds(1))
    }

    @Test func drainingConnectionIsReplacedAndBouncedRequestsGoFirst() {
        var m = machine()
        _ = m.submit("a")
        _ = m.connectionUpdated(0, phase: .ready, streamLimit: 1)
        _ = m.submit("b")  // queued behind the single slot, triggers connect 1
        #expect(summary(m.connectionUpdated(0, phase: .draining, streamLimit: 1)) == [])
        // "a" was refused by GOAWAY on connection 0 and comes back: it goes to the front.
        #expect(summary(m.bounced("a", from: 0)) == [])
        #expect(summary(m.connectionUpdated(1, phase: .ready, streamLimit: 1)) == ["dispatch a->1", "connect 2"])
        #expect(summary(m.requestFinished(on: 1)) == ["dispatch b->1"])
    }

    @Test func shutdownFailsTheQueueAndClosesConnections() {
        var m = machine()
        _ = m.submit("a"); _ = m.submit("b")
        #expect(summary(m.shutdown()) == ["fail a shutDown", "fail b shutDown", "close 0"])
        #expect(summary(m.submit("c")) == ["fail c shutDown"])
    }
}
