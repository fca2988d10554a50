import Testing

@testable import LiveRelayDispatch

/// ``DispatchScheduler/LaneTable`` against a dictionary: through the index's
/// growth, forgetting, slot reuse, and a lane taken out of its slot.
@Suite struct LaneTableTests {
    private static func token(_ i: Int) -> String {
        let digits = String(i, radix: 16)
        return String(repeating: "0", count: 64 - digits.count) + digits
    }

    @Test func everyRememberedTokenKeepsItsSlotThroughGrowthForgettingAndReuse() {
        var table = DispatchScheduler.LaneTable()
        var model: [String: Int] = [:]
        table.reserve(forBatchOf: 1_000)
        for i in 0..<50_000 {
            let slot = table.slot(for: Self.token(i))
            #expect(model[Self.token(i)] == nil)
            model[Self.token(i)] = slot
        }
        #expect(table.count == 50_000)
        #expect(Set(model.values).count == 50_000, "one slot per token")
        for i in stride(from: 0, to: 50_000, by: 7) { #expect(table.slot(for: Self.token(i)) == model[Self.token(i)]) }
        #expect(table.count == 50_000, "looking a token up again makes no lane")

        let forgotten = Set((0..<50_000).filter { $0 % 2 == 0 }.map(Self.token))
        table.forget { token, _ in forgotten.contains(token) }
        #expect(table.count == 25_000)
        var freed = Set<Int>()
        for token in forgotten { freed.insert(model.removeValue(forKey: token)!) }
        #expect(Set(table.allSlots) == Set(model.values))
        for (token, slot) in model { #expect(table.slot(for: token) == slot) }

        // New tokens take the forgotten lanes' slots before any new one.
        for i in 50_000..<60_000 {
            let slot = table.slot(for: Self.token(i))
            #expect(freed.contains(slot))
            model[Self.token(i)] = slot
        }
        #expect(table.count == 35_000)
        for (token, slot) in model { #expect(table.slot(for: token) == slot) }

        table.forget { _, _ in true }
        #expect(table.count == 0)
        #expect(table.allSlots.isEmpty)
        #expect(table.slot(for: Self.token(1)) == 0, "an empty table starts over")
    }

    @Test func aLaneTakenOutOfItsSlotIsStillFoundByItsToken() {
        var table = DispatchScheduler.LaneTable()
        let a = table.slot(for: Self.token(1))
        let b = table.slot(for: Self.token(2))
        var lane = table.take(a)
        #expect(table.token(at: a) == Self.token(1))
        #expect(table.slot(for: Self.token(1)) == a, "no second lane for a token whose lane is out")
        #expect(table.count == 2)
        lane.inReady = true
        table.put(lane, at: a)
        #expect(table.take(a).inReady)
        #expect(table.slot(for: Self.token(2)) == b)
    }
}
