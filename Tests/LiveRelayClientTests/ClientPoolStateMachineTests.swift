import LiveRelayBackoff
import LiveRelayWire
import NIOCore
import Testing

@testable import LiveRelayClient

/// The pool's decisions without sockets: every step is an input and the actions it returns.
@Suite("Client pool state machine")
struct ClientPoolStateMachineTests {
    final class Call: CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        var description: String { self.name }
    }

    typealias M = ClientPoolStateMachine<Call>

    func machine(connections: Int = 1, maxPendingCalls: Int = 100) -> M {
        M(
            configuration: .init(
                connections: connections, maxPendingCalls: maxPendingCalls,
                backoff: Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0),
                serverName: "h:1"
            ))
    }

    func summary(_ actions: [M.Action]) -> [String] {
        actions.map {
            switch $0 {
            case .connect(let slot, let id): "connect \(id) in \(slot)"
            case .scheduleReconnect(let slot, let delay): "reconnect \(slot) in \(delay.nanoseconds / 1_000_000)ms"
            case .dispatch(let call, let id): "dispatch \(call)->\(id)"
            case .queued(let call): "queue \(call)"
            case .fail(let call, let error): "fail \(call) \(error.status): \(error.message)"
            case .reject(let call, let error): "reject \(call) \(error.status)"
            case .shutDown(let id): "shut down \(id)"
            }
        }
    }

    /// Submits a call named `name` and returns the summary of what the machine did with it.
    func submit(_ m: inout M, _ name: String) -> [String] {
        summary(m.submit(Call(name)))
    }

    @Test func firstCallOpensEverySlotAndGoesOutWhenOneIsUsable() {
        var m = machine(connections: 2)
        #expect(submit(&m, "a") == ["queue a", "connect 1 in 0", "connect 2 in 1"])
        #expect(submit(&m, "b") == ["queue b"])
        #expect(summary(m.connectionUsable(2)) == ["dispatch a->2", "dispatch b->2"])
        #expect(m.slotState(1) == .ready(2))
        #expect(m.connectionsCreated == 2)
    }

    @Test func callsGoToTheLeastLoadedConnection() {
        var m = machine(connections: 3)
        _ = submit(&m, "a")
        _ = m.connectionUsable(1)
        _ = m.connectionUsable(2)
        _ = m.connectionUsable(3)
        #expect(submit(&m, "b") == ["dispatch b->2"])
        #expect(submit(&m, "c") == ["dispatch c->3"])
        #expect(submit(&m, "d") == ["dispatch d->1"])  // a tie: the first slot
        #expect(summary(m.released(2, calls: 1)) == [])
        #expect(submit(&m, "e") == ["dispatch e->2"])
        #expect(m.load(of: 1) == 2 && m.load(of: 2) == 1 && m.load(of: 3) == 1)
        #expect(m.preferredConnection == 2)
    }

    @Test func callsWaitAtTheServersLimitAndGoWhenASlotFrees() {
        var m = machine()
        _ = submit(&m, "a")
        #expect(summary(m.connectionUsable(1)) == ["dispatch a->1"])
        m.connectionEstablished(1, maxRequestsInFlight: 2)
        #expect(submit(&m, "b") == ["dispatch b->1"])
        #expect(submit(&m, "c") == ["queue c"])
        let d = Call("d")
        #expect(summary(m.submit(d)) == ["queue d"])
        #expect(m.preferredConnection == nil)
        #expect(summary(m.released(1, calls: 1)) == ["dispatch c->1"])
        #expect(m.queuedCount == 1)
        #expect(
            summary(m.expire(d)) == [
                "fail d DEADLINE_EXCEEDED: deadline exceeded while waiting for a free request slot"
            ])
        #expect(summary(m.released(1, calls: 2)) == [])
        #expect(m.load(of: 1) == 0)
    }

    @Test func withoutALimitYetTheConnectionTakesEverything() {
        var m = machine()
        _ = submit(&m, "a")
        _ = m.connectionUsable(1)
        for name in ["b", "c", "d"] {
            #expect(submit(&m, name) == ["dispatch \(name)->1"])
        }
    }

    @Test func consecutiveConnectFailuresBackOffAndSuccessResetsIt() {
        var m = machine()
        #expect(submit(&m, "a") == ["queue a", "connect 1 in 0"])
        #expect(
            summary(m.connectionClosed(1, wasUsable: false, reason: "refused", random: 0)) == [
                "reconnect 0 in 100ms", "fail a UNAVAILABLE: cannot connect to h:1: refused",
            ])
        #expect(m.slotState(0) == .backingOff)
        #expect(submit(&m, "b") == ["queue b"])  // no connect while backing off
        #expect(summary(m.reconnectDue(slot: 0)) == ["connect 2 in 0"])
        #expect(
            summary(m.connectionClosed(2, wasUsable: false, reason: "refused", random: 0)) == [
                "reconnect 0 in 200ms", "fail b UNAVAILABLE: cannot connect to h:1: refused",
            ])
        _ = m.reconnectDue(slot: 0)
        #expect(summary(m.connectionClosed(3, wasUsable: false, reason: "refused", random: 0)) == ["reconnect 0 in 400ms"])
        _ = m.reconnectDue(slot: 0)
        // Usable but refused before WELCOME (a wrong key) still counts as a failure.
        _ = m.connectionUsable(4)
        #expect(summary(m.connectionClosed(4, wasUsable: true, reason: "closed", random: 0)) == ["reconnect 0 in 800ms"])
        _ = m.reconnectDue(slot: 0)
        _ = m.connectionUsable(5)
        m.connectionEstablished(5, maxRequestsInFlight: 100)
        // WELCOME reset the count: a later drop reconnects at once, then from the first delay.
        #expect(summary(m.connectionClosed(5, wasUsable: true, reason: "closed", random: 0)) == ["connect 6 in 0"])
        #expect(summary(m.connectionClosed(6, wasUsable: false, reason: "refused", random: 0)) == ["reconnect 0 in 100ms"])
    }

    @Test func jitterComesFromTheCallersRandomNumber() {
        var m = M(
            configuration: .init(
                connections: 1, maxPendingCalls: 10,
                backoff: Backoff(initial: .milliseconds(100), maximum: .seconds(1), jitter: 0.5), serverName: "h:1"
            ))
        _ = submit(&m, "a")
        #expect(summary(m.connectionClosed(1, wasUsable: false, reason: "x", random: 1)).first == "reconnect 0 in 50ms")
    }

    @Test func aFailedConnectSparesCallsThatArrivedDuringIt() {
        var m = machine()
        _ = submit(&m, "a")
        _ = submit(&m, "b")  // arrived while attempt 1 was under way, which may predate the server's return
        #expect(
            summary(m.connectionClosed(1, wasUsable: false, reason: "refused", random: 0)) == [
                "reconnect 0 in 100ms", "fail a UNAVAILABLE: cannot connect to h:1: refused",
            ])
        #expect(m.queuedCount == 1)
        _ = m.reconnectDue(slot: 0)
        #expect(summary(m.connectionUsable(2)) == ["dispatch b->2"])
    }

    @Test func aConnectFailureWaitsWhileAnotherSlotIsConnecting() {
        var m = machine(connections: 2)
        _ = submit(&m, "a")
        #expect(summary(m.connectionClosed(1, wasUsable: false, reason: "refused", random: 0)) == ["reconnect 0 in 100ms"])
        #expect(m.queuedCount == 1)
    }

    @Test func aConnectionThatGotGoAwayTakesNoNewCalls() {
        var m = machine()
        _ = submit(&m, "a")
        _ = m.connectionUsable(1)
        m.connectionEstablished(1, maxRequestsInFlight: 100)
        #expect(summary(m.connectionGoingAway(1, code: .noError, random: 0)) == ["connect 2 in 0"])
        #expect(submit(&m, "b") == ["queue b"])
        #expect(summary(m.released(1, calls: 1)) == [])  // the old connection's room is not used
        #expect(summary(m.connectionUsable(2)) == ["dispatch b->2"])
        // Its close later changes nothing for the slot.
        #expect(summary(m.connectionClosed(1, wasUsable: true, reason: "closed", random: 0)) == [])
        #expect(m.slotState(0) == .ready(2))
    }

    @Test func anIdleTimeoutGoAwayReconnectsOnlyWhenACallNeedsIt() {
        var m = machine()
        _ = submit(&m, "a")
        _ = m.connectionUsable(1)
        m.connectionEstablished(1, maxRequestsInFlight: 100)
        _ = m.released(1, calls: 1)
        #expect(summary(m.connectionGoingAway(1, code: .idleTimeout, random: 0)) == [])
        #expect(m.slotState(0) == .idle)
        #expect(submit(&m, "b") == ["queue b", "connect 2 in 0"])
    }

    @Test func goAwayBeforeWelcomeCountsAsAFailure() {
        var m = machine()
        _ = submit(&m, "a")
        _ = m.connectionUsable(1)
        #expect(summary(m.connectionGoingAway(1, code: .noError, random: 0)) == ["reconnect 0 in 100ms"])
    }

    @Test func tooManyConnectionsBeforeWelcomeReconnectsAfterABackOff() {
        var m = machine()
        _ = submit(&m, "a")
        _ = m.connectionUsable(1)
        #expect(summary(m.connectionGoingAway(1, code: .tooManyConnections, random: 0)) == ["reconnect 0 in 100ms"])
        #expect(m.slotState(0) == .backingOff)
    }

    @Test func shutdownFailsQueuedCallsClosesConnectionsAndRejectsNewOnes() {
        var m = machine(connections: 2)
        _ = submit(&m, "a")
        _ = submit(&m, "b")
        _ = m.connectionClosed(1, wasUsable: false, reason: "refused", random: 0)
        #expect(
            summary(m.shutdown()) == [
                "fail a UNAVAILABLE: the client is shut down", "fail b UNAVAILABLE: the client is shut down", "shut down 2",
            ])
        #expect(m.slotState(0) == .idle)
        #expect(summary(m.reconnectDue(slot: 0)) == [])
        #expect(submit(&m, "c") == ["reject c UNAVAILABLE"])
        #expect(summary(m.resubmit(Call("d"))) == ["fail d UNAVAILABLE: the client is shut down"])
        #expect(summary(m.connectionUsable(2)) == ["shut down 2"])
        #expect(summary(m.connectionClosed(2, wasUsable: false, reason: "closed", random: 0)) == [])
        #expect(m.activeCalls == 2)  // a and b until the pool reports them finished
        m.callsFinished(2)
        #expect(m.activeCalls == 0)
    }

    @Test func callsBeyondMaxPendingAreRejectedWithoutCounting() {
        var m = machine(maxPendingCalls: 2)
        _ = submit(&m, "a")
        _ = submit(&m, "b")
        #expect(submit(&m, "c") == ["reject c RESOURCE_EXHAUSTED"])
        #expect(m.activeCalls == 2)
        m.callsFinished(1)
        #expect(submit(&m, "d") == ["queue d"])
    }

    @Test func cancellingAQueuedCallFailsItOnce() {
        var m = machine()
        let call = Call("a")
        _ = m.submit(call)
        #expect(summary(m.cancelQueued(call)) == ["fail a CANCELLED: cancelled by the client"])
        #expect(summary(m.cancelQueued(call)) == [])
        #expect(summary(m.expire(call)) == [])
        #expect(summary(m.connectionUsable(1)) == [])
    }

    @Test func aQueuedCallsDeadlineBeforeAnyConnectionSaysSo() {
        var m = machine()
        let call = Call("a")
        _ = m.submit(call)
        #expect(summary(m.expire(call)) == ["fail a DEADLINE_EXCEEDED: deadline exceeded while waiting for a connection"])
    }
}
