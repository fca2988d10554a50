import Testing

@testable import LiveRelayStore

/// ``ExpiryIndex`` against a dictionary of expiries, across word boundaries,
/// removals and moved expiries, the way ``TokenTable`` drives it.
@Suite struct ExpiryIndexTests {
    /// The index and its model, changed together; removal refreshes a word's
    /// earliest expiry as `TokenTable.unindex` does.
    struct Harness {
        var index = ExpiryIndex()
        var model: [Int32: Int64] = [:]

        mutating func insert(_ record: Int32, _ expiresAt: Int64) {
            remove(record)
            index.insert(record, expiresAt: expiresAt)
            model[record] = expiresAt
        }

        mutating func remove(_ record: Int32) {
            guard let old = model.removeValue(forKey: record) else { return }
            if let word = index.remove(record, expiresAt: old) {
                var earliest = Int64.max
                index.forEachMember(ofWord: word) {
                    earliest = min(earliest, model[$0]!)
                    return earliest > old
                }
                index.setEarliest(earliest, ofWord: word)
            }
        }

        /// What a sweep at `now` reads: every member the index visits.
        func visited(dueBy now: Int64) -> [Int32] {
            var seen: [Int32] = []
            index.forEach(dueBy: now) {
                seen.append($0)
                return true
            }
            return seen
        }
    }

    @Test func visitsEveryDueRecordAndNoWordWithoutOne() {
        var h = Harness()
        var seed: UInt64 = 11
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        #expect(h.index.remove(5_000, expiresAt: 1) == nil)  // beyond the words: nothing to do
        for round in 0..<40 {
            for _ in 0..<500 {
                let record = Int32(next(3_000))
                if next(3) == 0 { h.remove(record) } else { h.insert(record, Int64(next(10_000))) }
            }
            for now in [-1, 0, 50, 2_500, 9_999, Int64(round * 250)] {
                let visited = h.visited(dueBy: now)
                #expect(visited == visited.sorted())
                // Every due record is visited...
                let due = Set(h.model.filter { $0.value <= now }.keys)
                #expect(due.isSubset(of: Set(visited)))
                // ...and only words that have one: the earliest expiries are exact, not stale.
                let dueWords = Set(due.map { $0 / 64 })
                #expect(Set(visited.map { $0 / 64 }) == dueWords)
            }
        }
    }

    @Test func aWordsEarliestFollowsItsMembers() {
        var h = Harness()
        h.insert(3, 100)
        h.insert(70, 50)  // the next word
        h.insert(5, 300)
        #expect(h.visited(dueBy: 99) == [70])
        #expect(h.visited(dueBy: 100) == [3, 5, 70])  // the word of 3 and 5 is read whole
        // The earliest leaves: its word's earliest becomes the next one's.
        h.remove(3)
        #expect(h.visited(dueBy: 299) == [70])
        #expect(h.visited(dueBy: 300) == [5, 70])
        // An expiry moved later (a refreshed retention) leaves nothing behind.
        h.insert(70, 1_000)
        #expect(h.visited(dueBy: 999) == [5])
        h.remove(5)
        #expect(h.visited(dueBy: 999).isEmpty)
        #expect(h.visited(dueBy: 1_000) == [70])
        // Equal expiries (tokens registered together): the earliest stays until the last of them leaves.
        h.insert(128, 500)
        h.insert(129, 500)
        h.insert(130, 700)
        h.remove(128)
        #expect(h.visited(dueBy: 500) == [129, 130])
        h.remove(129)
        #expect(h.visited(dueBy: 699).isEmpty)
        #expect(h.visited(dueBy: 700) == [130])
    }

    @Test func stopsWhenTheBodySays() {
        var h = Harness()
        for record in Int32(0)..<200 { h.insert(record, Int64(record)) }
        var first: [Int32] = []
        h.index.forEach(dueBy: .max) {
            first.append($0)
            return first.count < 10
        }
        #expect(first == Array(0..<10))
        #expect(h.visited(dueBy: 63) == Array(0..<64))
        #expect(h.visited(dueBy: 64) == Array(0..<128))
    }
}

/// ``StringPool``'s hints: an id tried before hashing is taken only when it
/// is a live id of an equal string, however stale.
@Suite struct StringPoolHintTests {
    @Test func aHintIsTakenOnlyWhenItNamesTheString() {
        var pool = StringPool()
        let a = pool.retain("app-a")
        let b = pool.retain("app-b")
        #expect(pool.id(of: "app-a", hint: a) == a)
        #expect(pool.id(of: "app-a", hint: b) == a)  // another string's id: found by its hash
        #expect(pool.id(of: "app-a", hint: 9_999) == a)  // beyond the pool
        #expect(pool.retain("app-b", hint: a) == b)  // counted on b, not a
        #expect(pool.retain("app-b", hint: b) == b)

        pool.release(a)  // a's last user: its id is free
        #expect(pool.id(of: "app-a", hint: a) == nil)
        #expect(pool.id(of: "", hint: a) == nil)  // a free id holds "", but no user
        let c = pool.retain("app-c")
        #expect(c == a)  // the free id, reused
        #expect(pool.id(of: "app-a", hint: c) == nil)
        let again = pool.retain("app-a", hint: c)
        #expect(again != c)
        #expect(pool[c] == "app-c")
        #expect(pool[again] == "app-a")

        // b has three users now: it stays until the third release.
        pool.release(b)
        pool.release(b)
        #expect(pool.id(of: "app-b", hint: b) == b)
        pool.release(b)
        #expect(pool.id(of: "app-b", hint: b) == nil)
    }
}
