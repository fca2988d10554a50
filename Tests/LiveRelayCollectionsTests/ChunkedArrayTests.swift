import Testing

@testable import LiveRelayCollections

/// ``ChunkedArray`` against an `Array` across chunk boundaries, and its
/// copies as independent snapshots.
@Suite struct ChunkedArrayTests {
    @Test func holdsWhatAnArrayHoldsAcrossChunks() {
        var chunked = ChunkedArray<String>()
        var model: [String] = []
        for i in 0..<10_000 {
            chunked.append("v\(i)")
            model.append("v\(i)")
            if i % 7 == 0 {
                let j = (i * 31) % model.count
                chunked[j] += "!"
                model[j] += "!"
            }
        }
        #expect(chunked.count == model.count)
        #expect((0..<model.count).allSatisfy { chunked[$0] == model[$0] })
    }

    @Test func aCopyIsASnapshot() {
        var a = ChunkedArray<Int>()
        for i in 0..<5_000 { a.append(i) }
        let snapshot = a
        a[4_999] = -1
        a[0] = -1
        a.append(5_000)
        #expect(snapshot.count == 5_000)
        #expect(snapshot[0] == 0 && snapshot[4_999] == 4_999)
        #expect(a.count == 5_001 && a[0] == -1 && a[4_999] == -1 && a[5_000] == 5_000)
    }

    /// The first chunk starts small and is replaced by larger ones as it
    /// grows; a copy taken meanwhile keeps what it had.
    @Test func theFirstChunkGrowsUnderASnapshot() {
        var a = ChunkedArray<String>()
        for i in 0..<10 { a.append("s\(i)") }
        let snapshot = a
        for i in 10..<5_000 { a.append("s\(i)") }
        a[3] = "changed"
        #expect(snapshot.count == 10 && (0..<10).allSatisfy { snapshot[$0] == "s\($0)" })
        #expect(a.count == 5_000 && a[3] == "changed" && a[4_999] == "s4999" && a[4_096] == "s4096")
    }
}
