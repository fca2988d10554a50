import Testing

@testable import LiveRelayDomain

/// ``RecordBits`` against a `Set`, across word boundaries and removals.
@Suite struct RecordBitsTests {
    @Test func holdsWhatASetHoldsInIncreasingOrder() {
        var bits = RecordBits()
        var model = Set<Int32>()
        var seed: UInt64 = 11
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        bits.remove(5_000)  // beyond the words: nothing to do
        for _ in 0..<20_000 {
            let record = Int32(next(3_000))
            if next(3) == 0 {
                bits.remove(record)
                model.remove(record)
            } else {
                bits.insert(record)
                model.insert(record)
            }
        }
        var seen: [Int32] = []
        bits.forEach {
            seen.append($0)
            return true
        }
        #expect(seen == model.sorted())
        // Stopping early: exactly the first members.
        var first: [Int32] = []
        bits.forEach {
            first.append($0)
            return first.count < 10
        }
        #expect(first == Array(model.sorted().prefix(10)))
        for record in [Int32(0), 63, 64, 127, 128] { bits.insert(record) }
        var edges: [Int32] = []
        bits.forEach {
            if [0, 63, 64, 127, 128].contains($0) { edges.append($0) }
            return true
        }
        #expect(edges == [0, 63, 64, 127, 128])
    }
}
