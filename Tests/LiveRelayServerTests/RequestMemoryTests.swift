import LiveRelayMessages
import LiveRelayTestSupport
import LiveRelayWire
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import LiveRelayServer

/// The budget alone: no channel, no socket.
@Suite("RequestMemoryBudget")
struct RequestMemoryBudgetTests {
    /// Records which holders were granted after waiting.
    final class Grants: Sendable {
        private let granted = NIOLockedValueBox<[Int]>([])
        var all: [Int] { granted.withLockedValue { $0 } }
        func callback(_ n: Int) -> @Sendable () -> Void { { self.granted.withLockedValue { $0.append(n) } } }
    }

    @Test func aReservationThatDoesNotFitWaitsAndIsGrantedWhenBytesComeBack() {
        let budget = RequestMemoryBudget(limit: 100, perKeyLimit: 100)
        let grants = Grants()
        let a = budget.makeHolder(), b = budget.makeHolder(), c = budget.makeHolder()
        #expect(budget.reserve(60, for: a, keyID: nil, granted: grants.callback(0)))
        #expect(!budget.reserve(60, for: b, keyID: nil, granted: grants.callback(1)))
        #expect(!budget.reserve(10, for: c, keyID: nil, granted: grants.callback(2)), "queued behind b: first come, first served")
        #expect(budget.reserved() == 60 && budget.waiting == 2)
        budget.release(a)
        #expect(grants.all == [1, 2])
        #expect(budget.reserved() == 70 && budget.waiting == 0)
    }

    @Test func aFrameLargerThanTheLimitIsGrantedWhenNothingElseIsReserved() {
        let budget = RequestMemoryBudget(limit: 100, perKeyLimit: 50)
        let grants = Grants()
        let a = budget.makeHolder(), b = budget.makeHolder()
        #expect(budget.reserve(10, for: a, keyID: "k", granted: grants.callback(0)))
        #expect(!budget.reserve(500, for: b, keyID: "k", granted: grants.callback(1)))
        budget.release(a)
        #expect(grants.all == [1], "never refused outright: the wire allowed the frame")
        #expect(budget.reserved() == 500)
    }

    @Test func aKeyAtItsLimitWaitsWithoutHoldingUpOtherKeys() {
        let budget = RequestMemoryBudget(limit: 100, perKeyLimit: 40)
        let grants = Grants()
        let a1 = budget.makeHolder(), a2 = budget.makeHolder(), a3 = budget.makeHolder(), b = budget.makeHolder()
        #expect(budget.reserve(30, for: a1, keyID: "a", granted: grants.callback(1)))
        #expect(!budget.reserve(30, for: a2, keyID: "a", granted: grants.callback(2)))
        #expect(!budget.reserve(5, for: a3, keyID: "a", granted: grants.callback(3)), "behind its own key's waiter")
        #expect(budget.reserve(30, for: b, keyID: "b", granted: grants.callback(4)), "another key is not held up")
        #expect(budget.reserved(keyID: "a") == 30 && budget.reserved(keyID: "b") == 30)
        budget.release(b)
        #expect(grants.all.isEmpty, "b's bytes do not lift a's own limit")
        budget.release(a1)
        #expect(grants.all == [2, 3])
        #expect(budget.reserved(keyID: "a") == 35)
    }

    @Test func aWaiterThatLeavesLetsThoseBehindItGo() {
        let budget = RequestMemoryBudget(limit: 100, perKeyLimit: 100)
        let grants = Grants()
        let a = budget.makeHolder(), b = budget.makeHolder(), c = budget.makeHolder()
        #expect(budget.reserve(90, for: a, keyID: nil, granted: grants.callback(0)))
        #expect(!budget.reserve(50, for: b, keyID: nil, granted: grants.callback(1)))
        #expect(!budget.reserve(5, for: c, keyID: nil, granted: grants.callback(2)))
        budget.release(b)
        #expect(grants.all == [2])
        #expect(budget.reserved() == 95 && budget.waiting == 0)
        budget.release(a)
        budget.release(c)
        #expect(budget.reserved() == 0)
    }
}

/// Connections holding partial frames over the budget stop being read, on a
/// real server: one key's connections cannot buffer more than its share, and
/// another key's calls still go through.
@Suite("Request memory budget on a server")
struct RequestMemoryServerTests {
    static let frameBytes = 24 * 1024

    /// A PING whose frame's payload is about ``frameBytes``, split after its header and half its payload.
    static func halves(_ id: UInt32) -> (ByteBuffer, ByteBuffer) {
        var whole = RawClient.encode([ping(RequestID(rawValue: id), [UInt8](repeating: 7, count: frameBytes))])
        let first = whole.readSlice(length: Wire.frameHeaderSize + frameBytes / 2)!
        return (first, whole)
    }

    static func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
        for _ in 0..<500 {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestFailure("timed out waiting until \(what)")
    }

    @Test func aKeysPartialFramesOverItsShareAreNotReadUntilMemoryComesBack() async throws {
        let server = try await TestServer.start(maxBufferedRequestBytes: 64 * 1024, maxBufferedRequestBytesPerKey: 32 * 1024)
        let budget = server.server.requestMemory
        let keyA = TestKeys.all.record.keyID, keyB = TestKeys.pingOnly.record.keyID
        let a1 = try await server.connectAndHello()
        let a2 = try await server.connectAndHello()
        let b = try await server.connectAndHello(apiKey: TestKeys.pingOnly.plaintext)

        let (a1Head, a1Rest) = Self.halves(1)
        try await a1.write(a1Head)
        try await Self.waitUntil("a1's frame is reserved") { budget.reserved(keyID: keyA) > 0 }
        let (a2Head, a2Rest) = Self.halves(1)
        try await a2.write(a2Head)
        try await Self.waitUntil("a2 waits") { budget.waiting == 1 }
        #expect(budget.reserved(keyID: keyA) <= 32 * 1024)

        // a2's frame is complete on the wire, but its connection is not read.
        try await a2.write(a2Rest)
        await #expect(throws: (any Error).self, "a2 was answered while over its key's share") {
            _ = try await a2.nextFrame(timeout: .seconds(1))
        }

        // Another key's connection is read and answered meanwhile.
        let (bHead, bRest) = Self.halves(1)
        try await b.write(bHead)
        try await b.write(bRest)
        _ = expectResponse(try await b.nextFrame(), id: RequestID(rawValue: 1))
        #expect(budget.reserved(keyID: keyB) == 0)

        // a1's frame completes: its bytes come back, a2 is read and answered.
        try await a1.write(a1Rest)
        _ = expectResponse(try await a1.nextFrame(), id: RequestID(rawValue: 1))
        _ = expectResponse(try await a2.nextFrame(), id: RequestID(rawValue: 1))
        try await Self.waitUntil("every reservation is back") { budget.reserved() == 0 && budget.waiting == 0 }

        // A connection that closes while waiting or holding gives its bytes back.
        let (c1Head, _) = Self.halves(2)
        try await a1.write(c1Head)
        try await a2.write(c1Head)
        try await Self.waitUntil("a2 waits again") { budget.waiting == 1 }
        await a1.close()
        await a2.close()
        try await Self.waitUntil("closed connections give their bytes back") { budget.reserved() == 0 && budget.waiting == 0 }
        await b.close()
        try await server.shutdown()
    }
}
