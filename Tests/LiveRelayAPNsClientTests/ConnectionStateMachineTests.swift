import LiveRelayAPNs
import NIOCore
import Testing

@testable import LiveRelayAPNsClient

@Suite("APNs connection state machine")
struct ConnectionStateMachineTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let timeouts = APNsConnectionStateMachine.Timeouts(
        idlePingInterval: .seconds(60), pingTimeout: .seconds(10),
        responseTimeout: .seconds(30))

    func ready() -> APNsConnectionStateMachine {
        var m = APNsConnectionStateMachine(timeouts: timeouts, now: t0)
        #expect(m.connected(now: t0) == [.capacityChanged(available: 1)])
        return m
    }

    func open(_ m: inout APNsConnectionStateMachine) -> Int {
        guard case .opened(let key) = m.openStream(now: t0) else {
            Issue.record("no stream")
            return -1
        }
        return key
    }

    @Test func noStreamsBeforeConnected() {
        var m = APNsConnectionStateMachine(timeouts: timeouts, now: t0)
        #expect(m.openStream(now: t0) == .unavailable)
        #expect(m.availableStreams == 0)
    }

    @Test func limitIsOneUntilSettingsThenFollowsEveryChange() {
        var m = ready()
        let first = open(&m)
        #expect(m.openStream(now: t0) == .noCapacity)
        #expect(m.settingsReceived(maxConcurrentStreams: 1000, now: t0) == [.capacityChanged(available: 999)])
        for _ in 0..<999 { _ = open(&m) }
        #expect(m.openStream(now: t0) == .noCapacity)
        // The server lowers the limit: open streams finish, new ones wait until below it.
        #expect(m.settingsReceived(maxConcurrentStreams: 10, now: t0) == [.capacityChanged(available: 0)])
        #expect(m.streamClosed(first, now: t0) == [])  // the pool counts finished requests itself
        #expect(m.availableStreams == 0)
        #expect(m.openStream(now: t0) == .noCapacity)
        // SETTINGS without the parameter change nothing.
        #expect(m.settingsReceived(maxConcurrentStreams: nil, now: t0) == [])
        #expect(m.streamLimit == 10 && m.openStreams == 999)
    }

    @Test func goAwayRefusesStreamsAboveTheLastIDAndStopsNewOnes() {
        var m = ready()
        _ = m.settingsReceived(maxConcurrentStreams: 100, now: t0)
        let a = open(&m), b = open(&m), c = open(&m), unsent = open(&m)
        m.streamIDAssigned(a, http2ID: 1)
        m.streamIDAssigned(b, http2ID: 3)
        m.streamIDAssigned(c, http2ID: 5)
        let actions = m.goAwayReceived(lastStreamID: 3, now: t0)
        #expect(actions == [.capacityChanged(available: 0), .failStreams([c, unsent], .refusedByGoAway)])
        #expect(m.phase == .draining)
        #expect(m.openStream(now: t0) == .unavailable)
        #expect(m.streamClosed(a, now: t0) == [])
        #expect(m.streamClosed(b, now: t0) == [.closeConnection(.goAwayDrained)])
        #expect(APNsTransportError.refusedByGoAway.isRetryable)
    }

    @Test func goAwayWithNothingInFlightClosesAtOnce() {
        var m = ready()
        #expect(m.goAwayReceived(lastStreamID: 0, now: t0) == [.capacityChanged(available: 0), .closeConnection(.goAwayDrained)])
    }

    @Test func connectionLossFailsEverythingInFlight() {
        var m = ready()
        _ = m.settingsReceived(maxConcurrentStreams: 5, now: t0)
        let keys = (0..<3).map { _ in open(&m) }
        m.streamIDAssigned(keys[0], http2ID: 1)
        m.streamIDAssigned(keys[2], http2ID: 3)
        // keys[1]'s HEADERS never reached the socket: not sent, so retryable anywhere.
        #expect(
            m.connectionClosed() == [
                .failStreams([keys[1]], .refusedByGoAway),
                .failStreams([keys[0], keys[2]], .connectionLost),
            ])
        #expect(m.phase == .closed && m.openStreams == 0)
        #expect(m.connectionClosed() == [])
        #expect(m.openStream(now: t0) == .unavailable)
    }

    @Test func idlePingAndDeadPeer() {
        var m = ready()
        #expect(m.tick(now: t0 + .seconds(59)) == [])
        #expect(m.tick(now: t0 + .seconds(60)) == [.sendPing(1)])
        #expect(m.tick(now: t0 + .seconds(65)) == [])  // one PING outstanding at a time
        #expect(m.tick(now: t0 + .seconds(70)) == [.closeConnection(.pingTimeout)])
    }

    @Test func pingAckKeepsTheConnection() {
        var m = ready()
        #expect(m.tick(now: t0 + .seconds(60)) == [.sendPing(1)])
        m.pingAckReceived(data: 999, now: t0 + .seconds(61))  // not ours: ignored
        m.pingAckReceived(data: 1, now: t0 + .seconds(62))
        #expect(m.tick(now: t0 + .seconds(75)) == [])
        #expect(m.tick(now: t0 + .seconds(122)) == [.sendPing(2)])
    }

    @Test func responseTimeoutFailsOnlyExpiredStreams() {
        var m = ready()
        _ = m.settingsReceived(maxConcurrentStreams: 10, now: t0)
        let old = open(&m)
        guard case .opened(let young) = m.openStream(now: t0 + .seconds(20)) else { Issue.record("no stream"); return }
        #expect(m.tick(now: t0 + .seconds(30)) == [.failStreams([old], .timedOut), .capacityChanged(available: 9)])
        #expect(m.streamClosed(old, now: t0 + .seconds(31)) == [])  // a late answer changes nothing
        #expect(m.tick(now: t0 + .seconds(50)) == [.failStreams([young], .timedOut), .capacityChanged(available: 10)])
    }

    @Test func closeRequestedDrainsThenCloses() {
        var m = ready()
        let key = open(&m)
        #expect(m.closeRequested() == [.capacityChanged(available: 0)])
        #expect(m.openStream(now: t0) == .unavailable)
        #expect(m.streamClosed(key, now: t0) == [.closeConnection(.goAwayDrained)])
    }
}
