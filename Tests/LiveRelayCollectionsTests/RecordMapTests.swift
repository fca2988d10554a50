import Testing

@testable import LiveRelayCollections

/// ``RecordMap`` against a `Dictionary`: sets, removals (entries reused),
/// in-place changes through the default subscript, iteration and snapshots.
@Suite struct RecordMapTests {
    @Test func answersWhatADictionaryAnswers() {
        var map = RecordMap<String, Int>()
        var model: [String: Int] = [:]
        var seed: UInt64 = 3
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        for step in 0..<40_000 {
            let key = "key-\(next(step < 20_000 ? 30_000 : 5_000))"
            switch next(4) {
            case 0:
                map[key] = nil
                model[key] = nil
            case 1:
                map[key, default: 100] += 1
                model[key, default: 100] += 1
            default:
                map[key] = step
                model[key] = step
            }
        }
        #expect(map.count == model.count)
        #expect(!map.isEmpty)
        for (key, value) in model { #expect(map[key] == value) }
        for i in 30_000..<30_100 { #expect(map["key-\(i)"] == nil) }
        var seen: [String: Int] = [:]
        for (key, value) in map { #expect(seen.updateValue(value, forKey: key) == nil) }
        #expect(seen == model)
    }

    @Test func aCopyIsASnapshot() {
        var map = RecordMap<Int, [String]>()
        map[1] = ["a"]
        map[2] = ["b"]
        let snapshot = map
        map[1, default: []].append("c")
        map[2] = nil
        map[3] = ["d"]
        #expect(snapshot.count == 2 && snapshot[1] == ["a"] && snapshot[2] == ["b"] && snapshot[3] == nil)
        #expect(map.count == 2 && map[1] == ["a", "c"] && map[2] == nil && map[3] == ["d"])
    }

    @Test func theDefaultSubscriptAddsTheDefaultOnlyWhenChanged() {
        var map = RecordMap<String, Int>()
        #expect(map["absent", default: 7] == 7)
        #expect(map.count == 0)
        map["absent", default: 7] += 1
        #expect(map["absent"] == 8)
        #expect(map.count == 1)
    }
}

/// The sliced scan a store uses to count without holding its lock throughout.
@Suite struct RecordMapSlicedScanTests {
    @Test(arguments: [1, 7, 64, 1_000, Int.max])
    func slicesVisitEveryLiveEntryOnce(limit: Int) {
        var map = RecordMap<Int, Int>()
        for i in 0..<500 { map[i] = i * 10 }
        for i in stride(from: 0, to: 500, by: 3) { map[i] = nil }  // free entries among the live ones
        var seen: [Int: Int] = [:]
        var next: Int? = 0
        var slices = 0
        while let start = next {
            next = map.forEach(from: start, limit: limit) { key, value in
                #expect(seen.updateValue(value, forKey: key) == nil)
            }
            slices += 1
        }
        #expect(seen.count == map.count)
        #expect(seen.allSatisfy { $0.value == $0.key * 10 && $0.key % 3 != 0 })
        #expect(slices == (limit >= 500 ? 1 : (500 + limit - 1) / limit))
    }
}
