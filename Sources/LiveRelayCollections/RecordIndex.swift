// Collections the store and the dispatcher share: a hash index of record
// numbers whose keys live elsewhere (RecordIndex). No dependencies.

/// An open-addressing hash index (linear probing) of record numbers, each
/// slot holding the record's number and the low 32 bits of its key's hash:
/// 8 bytes a slot, at most 3/4 full, where a `Dictionary` keyed by the
/// token's strings would hold the key a second time. The keys live in the
/// records; callers pass a record's hash and a predicate that recognises its key.
///
/// Why the hash is kept: the records are large and scattered, so touching
/// one is a cache miss. With the hash beside the number, a probe calls the
/// predicate (reads a record) only when the 32 bits match, which for a new
/// key is almost never, and growing re-places the slots from their stored
/// hashes without reading a record or hashing a key again (reading and
/// rehashing every record was a tenth of the memory store's CPU per
/// RegisterToken while it grew; docs/BENCHMARKS.md). The dispatcher's lane
/// table uses it for the same reason: a `Dictionary` keyed by token strings
/// rehashed every remembered token each time it grew, in the middle of a fan-out.
package struct RecordIndex: Sendable {
    private struct Slot: Sendable {
        var record: Int32
        var hash: UInt32
    }

    private static let empty: Int32 = -1
    private static let removed: Int32 = -2

    private var slots: [Slot] = []
    /// Live entries.
    package private(set) var count = 0
    /// Live entries plus tombstones: what bounds the probe lengths.
    private var used = 0

    /// The slot a hash starts probing at; the table never exceeds 2^31 slots
    /// (records are `Int32`), so the stored 32 bits are enough to place it.
    private static func start(_ hash: UInt32, _ mask: Int) -> Int { Int(hash) & mask }

    package init() {}

    package func find(hash: Int, _ matches: (Int32) -> Bool) -> Int32? {
        guard !slots.isEmpty else { return nil }
        let tag = UInt32(truncatingIfNeeded: hash)
        let mask = slots.count - 1
        var i = Self.start(tag, mask)
        while true {
            let slot = slots[i]
            if slot.record == Self.empty { return nil }
            if slot.record >= 0 && slot.hash == tag && matches(slot.record) { return slot.record }
            i = (i + 1) & mask
        }
    }

    /// Adds `record`, whose key must not be in the index yet.
    package mutating func insert(_ record: Int32, hash: Int) {
        if (used + 1) * 4 > slots.count * 3 { rebuild() }
        let tag = UInt32(truncatingIfNeeded: hash)
        let mask = slots.count - 1
        var i = Self.start(tag, mask)
        while slots[i].record >= 0 { i = (i + 1) & mask }
        if slots[i].record == Self.empty { used += 1 }
        slots[i] = Slot(record: record, hash: tag)
        count += 1
    }

    /// Removes `record` if it is in the index under `hash`.
    package mutating func remove(_ record: Int32, hash: Int) {
        guard !slots.isEmpty else { return }
        let mask = slots.count - 1
        var i = Self.start(UInt32(truncatingIfNeeded: hash), mask)
        while slots[i].record != Self.empty {
            if slots[i].record == record {
                slots[i].record = Self.removed
                count -= 1
                return
            }
            i = (i + 1) & mask
        }
    }

    /// Re-places the live entries, by their stored hashes, in a table at most
    /// half full after the insert to come.
    private mutating func rebuild() {
        var capacity = 16
        while (count + 1) * 2 > capacity { capacity *= 2 }
        let old = slots
        slots = Array(repeating: Slot(record: Self.empty, hash: 0), count: capacity)
        used = count
        let mask = capacity - 1
        for slot in old where slot.record >= 0 {
            var i = Self.start(slot.hash, mask)
            while slots[i].record != Self.empty { i = (i + 1) & mask }
            slots[i] = slot
        }
    }
}
