import LiveRelayMockAPNs
import Testing

@Suite("HTTP/2 inbound window top-ups")
struct HTTP2InboundWindowTests {
    @Test("a window is topped up to its target once it falls to half of it, never before")
    func windowIncrements() {
        #expect(HTTP2InboundWindow.increment(windowSize: 100, target: 100) == nil)
        #expect(HTTP2InboundWindow.increment(windowSize: 51, target: 100) == nil)
        #expect(HTTP2InboundWindow.increment(windowSize: 50, target: 100) == 50)
        #expect(HTTP2InboundWindow.increment(windowSize: 0, target: 100) == 100)
        #expect(HTTP2InboundWindow.increment(windowSize: -20, target: 100) == 120)
        // The connection's first DATA: the protocol's 65,535 bytes up to a 16 MiB target.
        #expect(HTTP2InboundWindow.increment(windowSize: 65_535 - 100, target: 1 << 24) == (1 << 24) - 65_435)
    }
}
