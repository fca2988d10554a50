import Testing

@testable import LiveRelayDispatch

/// A lane's queue against a plain array doing the same operations.
@Suite struct PendingPushesTests {
    typealias Pending = DispatchScheduler.PendingPushes

    @Test func oneInlinePushThenAQueueInOrder() {
        var p = Pending()
        #expect(p.isEmpty && p.count == 0 && p.popFirst() == nil)
        p.append(1)
        #expect(Array(p) == [1] && p.count == 1)
        p.append(2)
        p.append(3)
        p.prepend(0)
        #expect(Array(p) == [0, 1, 2, 3] && p.count == 4)
        #expect(p.popFirst() == 0)
        p.prepend(9)
        #expect(Array(p) == [9, 1, 2, 3])
        p.removeAll { $0 % 2 == 1 }
        #expect(Array(p) == [2])
        p.removeAll()
        #expect(p.isEmpty && Array(p).isEmpty)
    }

    /// A deep backlog taken from the front (the head index drops the spent front as it goes).
    @Test func aDeepBacklogDrainsInOrderAcrossCompactions() {
        var p = Pending()
        for id in 0..<100 as Range<UInt64> { p.append(id) }
        for expected in 0..<60 as Range<UInt64> { #expect(p.popFirst() == expected) }
        p.prepend(500)
        for id in 100..<110 as Range<UInt64> { p.append(id) }
        #expect(Array(p) == [500] + Array(60..<110))
        #expect(p.count == 51)
        var drained: [UInt64] = []
        while let id = p.popFirst() { drained.append(id) }
        #expect(drained == [500] + Array(60..<110))
        #expect(p.isEmpty)
    }

    /// Random appends, prepends, pops and removals, through the head index's
    /// compaction, give the array's answers at every step.
    @Test func matchesAnArrayUnderRandomOperations() {
        var rng = SplitMix64(seed: 14)
        var p = Pending()
        var model: [UInt64] = []
        var next: UInt64 = 0
        for step in 0..<20_000 {
            switch rng.next() % 10 {
            case 0...4:
                p.append(next)
                model.append(next)
                next += 1
            case 5:
                p.prepend(next)
                model.insert(next, at: 0)
                next += 1
            case 6...8:
                #expect(p.popFirst() == (model.isEmpty ? nil : model.removeFirst()), "step \(step)")
            default:
                let modulus = rng.next() % 7 + 2
                p.removeAll { $0 % modulus == 0 }
                model.removeAll { $0 % modulus == 0 }
            }
            #expect(p.count == model.count && p.isEmpty == model.isEmpty, "step \(step)")
            if step % 97 == 0 { #expect(Array(p) == model, "step \(step)") }
        }
        while let id = p.popFirst() { #expect(id == model.removeFirst()) }
        #expect(model.isEmpty)
    }
}
