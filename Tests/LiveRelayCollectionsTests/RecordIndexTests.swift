import Testing

@testable import LiveRelayCollections

/// ``RecordIndex`` against a dictionary, through growth and tombstones, with
/// keys whose stored 32 bits collide (so the predicate must still decide).
@Suite struct RecordIndexTests {
    /// Keys are record numbers' "names"; the hash of a name is chosen so that
    /// every fourth name shares its low 32 bits with another.
    static func hash(of name: Int) -> Int {
        let low = UInt32(truncatingIfNeeded: (name / 2) &* 2_654_435_761)
        return Int(bitPattern: UInt(name) << 32 | UInt(low))
    }

    /// Split early, at the default, and never: the shards must answer what one table does.
    @Test(arguments: [64, RecordIndex().splitAt, Int.max])
    func answersWhatADictionaryAnswersThroughGrowthAndRemovals(splitAt: Int) {
        var index = RecordIndex(splitAt: splitAt)
        var names: [Int32: Int] = [:]  // record -> name
        var byName: [Int: Int32] = [:]  // the model
        var nextRecord: Int32 = 0
        var seed: UInt64 = 7
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        func find(_ name: Int) -> Int32? {
            index.find(hash: Self.hash(of: name)) { names[$0] == name }
        }
        for step in 0..<60_000 {
            // Mostly inserts early (growth), a balance later (tombstones reused).
            let name = next(step < 30_000 ? 100_000 : 20_000)
            if let record = byName[name], next(3) == 0 {
                index.remove(record, hash: Self.hash(of: name))
                byName[name] = nil
            } else if byName[name] == nil {
                let record = nextRecord
                nextRecord += 1
                names[record] = name
                index.insert(record, hash: Self.hash(of: name))
                byName[name] = record
            }
            if step % 997 == 0 {
                #expect(index.count == byName.count)
                for probe in (0..<64).map({ _ in next(100_000) }) { #expect(find(probe) == byName[probe]) }
            }
        }
        #expect(index.count == byName.count)
        for (name, record) in byName { #expect(find(name) == record) }
        for name in 100_000..<100_200 { #expect(find(name) == nil) }
        #expect(index.isSharded == (splitAt < 20_000))
    }

    /// A record that was removed before the split stays removed after it, and
    /// one removed after it is found in its shard (the count follows both).
    @Test func theSplitKeepsOnlyLiveRecords() {
        var index = RecordIndex(splitAt: 100)
        for r in Int32(0)..<100 { index.insert(r, hash: Self.hash(of: Int(r))) }
        for r in Int32(0)..<100 where r % 3 == 0 { index.remove(r, hash: Self.hash(of: Int(r))) }
        #expect(!index.isSharded)
        let live = index.count
        // The split happens on an insert once `splitAt` entries were reached (tombstones do not count).
        for r in Int32(100)..<200 { index.insert(r, hash: Self.hash(of: Int(r))) }
        #expect(index.isSharded)
        #expect(index.count == live + 100)
        for r in Int32(0)..<200 {
            let found = index.find(hash: Self.hash(of: Int(r))) { $0 == r }
            #expect(found == (r < 100 && r % 3 == 0 ? nil : r))
        }
        index.remove(150, hash: Self.hash(of: 150))
        #expect(index.find(hash: Self.hash(of: 150)) { $0 == 150 } == nil)
        #expect(index.count == live + 99)
        // Removing what is not there changes nothing.
        index.remove(150, hash: Self.hash(of: 150))
        #expect(index.count == live + 99)
    }

    @Test func aRemovedRecordIsGoneAndItsSlotIsReused() {
        var index = RecordIndex()
        // Two names with the same stored 32 bits: both kept, each found by the predicate.
        let a = 10, b = 11
        #expect(UInt32(truncatingIfNeeded: Self.hash(of: a)) == UInt32(truncatingIfNeeded: Self.hash(of: b)))
        index.insert(0, hash: Self.hash(of: a))
        index.insert(1, hash: Self.hash(of: b))
        #expect(index.find(hash: Self.hash(of: a)) { $0 == 0 } == 0)
        #expect(index.find(hash: Self.hash(of: b)) { $0 == 1 } == 1)
        index.remove(0, hash: Self.hash(of: a))
        #expect(index.count == 1)
        #expect(index.find(hash: Self.hash(of: a)) { $0 == 0 } == nil)
        #expect(index.find(hash: Self.hash(of: b)) { $0 == 1 } == 1)
        index.insert(2, hash: Self.hash(of: a))
        #expect(index.find(hash: Self.hash(of: a)) { $0 == 2 } == 2)
        #expect(index.count == 2)
    }
}
