import Testing

@testable import LiveRelayCollections

/// ``SequentialMap`` against a `Dictionary` under the scheduler's pattern (keys
/// from a counter, removed out of order, some living long), and its copies as
/// independent snapshots.
@Suite struct SequentialMapTests {
    @Test func holdsWhatADictionaryHolds() {
        var map = SequentialMap<String>()
        var model: [UInt64: String] = [:]
        var random = SystemRandomNumberGenerator()
        var next: UInt64 = 1
        // Snapshots taken along the way, with what each held: writes after them must not show.
        var snapshots: [(map: SequentialMap<String>, model: [UInt64: String])] = []
        for round in 0..<200 {
            // A batch of keys (some of one key, as calls of one push), then a random
            // share of the live ones removed or changed. Values longer than a small
            // string, so that each is a reference the pages must retain and release.
            for _ in 0..<(round % 5 == 0 ? 1 : Int.random(in: 1...700, using: &random)) {
                map[next] = "a value long enough to be stored on the heap \(next)"
                model[next] = "a value long enough to be stored on the heap \(next)"
                next += 1
            }
            if round % 25 == 0 { snapshots.append((map, model)) }
            for key in Array(model.keys) where Int.random(in: 0..<3, using: &random) == 0 {
                if round % 2 == 0 {
                    #expect(map.removeValue(forKey: key) == model.removeValue(forKey: key))
                } else {
                    #expect(
                        map.update(key) { value in
                            value += "!"
                            return value.count
                        } == model[key].map { $0.count + 1 })
                    model[key]? += "!"
                }
            }
            #expect(map.count == model.count)
        }
        for key in 0...next + 2_000 { #expect(map[key] == model[key]) }
        for (snapshot, held) in snapshots {
            #expect(snapshot.count == held.count)
            #expect((0...next).allSatisfy { snapshot[$0] == held[$0] })
        }
        #expect(map.update(next + 5) { _ in 1 } == nil)
        #expect(map.removeValue(forKey: next + 5) == nil)
        for key in Array(model.keys) { #expect(map.removeValue(forKey: key) == model[key]) }
        // Only the last page is left, empty, for the keys to come.
        #expect(map.isEmpty && map.pages.count == 1 && map.pages[0]?.live.pointee == 0)
    }

    /// One key that lives while many pass keeps one page (and the last page, for
    /// the keys to come); when it goes, the directory's freed front goes with it.
    @Test func aLongLivedKeyKeepsOnlyItsPage() {
        var map = SequentialMap<Int>()
        map[0] = -1
        for key in UInt64(1)..<100_000 {
            map[key] = Int(key)
            map[key] = nil
        }
        #expect(map.count == 1 && map[0] == -1)
        #expect(map.pages.compactMap { $0 }.count == 2 && map.pages.count == (99_999 >> 10) + 1)
        map[100_000] = 7
        map[0] = nil
        #expect(map.pages.count == 1 && map.firstPage == 100_000 >> 10)
        #expect(map[100_000] == 7 && map[0] == nil)
    }

    /// Keys that come and go one at a time (calls of one push each) use one page
    /// instead of making and clearing a page per key; the page goes once the keys
    /// go past it.
    @Test func oneKeyAtATimeKeepsItsPage() {
        var map = SequentialMap<Int>()
        map[0] = 0
        map[0] = nil
        let page = map.pages.first.map { $0.map(ObjectIdentifier.init) }
        #expect(page != nil && map.isEmpty && map.pages.count == 1)
        for key in UInt64(1)..<1_024 {
            map[key] = Int(key)
            #expect(map.pages.count == 1 && map[key] == Int(key))
            map[key] = nil
        }
        #expect(map.pages.first.map { $0.map(ObjectIdentifier.init) } == page)
        map[1_024] = 1
        #expect(map.pages.count == 1 && map.firstPage == 1 && map[1_024] == 1 && map.count == 1)
    }

    /// A key below the first page grows the directory at its front.
    @Test func keysMayComeBelowTheFirstPage() {
        var map = SequentialMap<Int>()
        map[50_000] = 1
        map[3] = 2
        map[1_024] = 3
        #expect(map.count == 3 && map[50_000] == 1 && map[3] == 2 && map[1_024] == 3 && map[4] == nil)
        map[3] = 4
        #expect(map.count == 3 && map[3] == 4)
    }

    @Test func aCopyIsASnapshot() {
        var a = SequentialMap<String>()
        for key in UInt64(0)..<3_000 { a[key] = "v\(key)" }
        let snapshot = a
        a[5] = "changed"
        _ = a.update(2_000) { $0 = "updated" }
        a[2_999] = nil
        a[3_000] = "new"
        for key in UInt64(0)..<1_024 { a[key] = nil }
        #expect(snapshot.count == 3_000 && (0..<3_000).allSatisfy { snapshot[$0] == "v\($0)" } && snapshot[3_000] == nil)
        #expect(a.count == 1_976 && a[5] == nil && a[2_000] == "updated" && a[2_999] == nil && a[3_000] == "new")
    }
}
