// Collections the store and the dispatcher share: a hash index of record
// numbers whose keys live elsewhere (RecordIndex), an array in chunks
// (ChunkedArray) and a map built from both (RecordMap). No dependencies.
//
// Public and @inlinable rather than `package`: their users are other modules,
// and this compiler specialized `@inlinable package` generics from another
// module not at all (the memory store's registrations ran 30% slower through
// unspecialized code looking up type metadata); public inlinable ones it does.

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
///
/// Why it splits into shards: growing re-places every entry of a table, and
/// the memory store grows its indexes under its lock. One table of two
/// million tokens took 42 ms to grow, a stall every call waiting for the lock
/// paid (docs/BENCHMARKS.md, "Memory"). Past
/// ``splitAt`` entries the index becomes 256 tables chosen by the top 8 bits of
/// the stored hash, each growing on its own: a growth re-places a 256th of
/// the entries.
public struct RecordIndex: Sendable {
    /// One open-addressing table: what the whole index was before it splits.
    @usableFromInline struct Table: Sendable {
        @usableFromInline var slots: [Slot] = []
        /// Live entries.
        @usableFromInline var count = 0
        /// Live entries plus tombstones: what bounds the probe lengths.
        @usableFromInline var used = 0
        /// The slots' count minus one (-1: no slots yet), kept here so that a
        /// lookup needs no load of the array's header: that header is a cache
        /// line of its own per shard, and loading it for the bounds was a third
        /// of a lookup's time in the memory store (`perf annotate`).
        @usableFromInline var mask = -1

        @inlinable init() {}

        /// The slot a hash starts probing at. A table holds at most 2^31 / 256
        /// entries once split (records are `Int32`), so its low bits never reach
        /// the top 8 that choose the shard.
        @inlinable static func start(_ tag: UInt32, _ mask: Int) -> Int { Int(tag) & mask }

        @inlinable func find(_ tag: UInt32, _ matches: (Int32) -> Bool) -> Int32? {
            guard mask >= 0 else { return nil }
            return slots.withUnsafeBufferPointer { buffer in
                // In bounds: `mask` is the count minus one, a power of two minus one.
                let base = buffer.baseAddress.unsafelyUnwrapped
                var i = Self.start(tag, mask)
                while true {
                    let slot = base[i]
                    if slot.record == RecordIndex.empty { return nil }
                    if slot.record >= 0 && slot.hash == tag && matches(slot.record) { return slot.record }
                    i = (i + 1) & mask
                }
            }
        }

        @inlinable mutating func insert(_ slot: Slot) {
            if (used + 1) * 4 > (mask + 1) * 3 { rebuild(for: count + 1) }
            var i = Self.start(slot.hash, mask)
            while slots[i].record >= 0 { i = (i + 1) & mask }
            if slots[i].record == RecordIndex.empty { used += 1 }
            slots[i] = slot
            count += 1
        }

        @inlinable mutating func remove(_ record: Int32, _ tag: UInt32) -> Bool {
            guard mask >= 0 else { return false }
            var i = Self.start(tag, mask)
            while slots[i].record != RecordIndex.empty {
                if slots[i].record == record {
                    slots[i].record = RecordIndex.removed
                    count -= 1
                    return true
                }
                i = (i + 1) & mask
            }
            return false
        }

        /// Re-places the live entries, by their stored hashes, in a table at
        /// most half full with `entries`.
        @inlinable mutating func rebuild(for entries: Int) {
            var capacity = 16
            while entries * 2 > capacity { capacity *= 2 }
            let old = slots
            slots = Array(repeating: Slot(record: RecordIndex.empty, hash: 0), count: capacity)
            used = count
            mask = capacity - 1
            for slot in old where slot.record >= 0 {
                var i = Self.start(slot.hash, mask)
                while slots[i].record != RecordIndex.empty { i = (i + 1) & mask }
                slots[i] = slot
            }
        }

        @inlinable func forEachLive(_ body: (Slot) -> Void) {
            for slot in slots where slot.record >= 0 { body(slot) }
        }
    }

    @usableFromInline struct Slot: Sendable {
        @usableFromInline var record: Int32
        @usableFromInline var hash: UInt32

        @inlinable init(record: Int32, hash: UInt32) {
            self.record = record
            self.hash = hash
        }
    }

    @inlinable static var empty: Int32 { -1 }
    @inlinable static var removed: Int32 { -2 }
    /// Shards once split: the top 8 bits of the stored hash choose one.
    @inlinable static var shardBits: Int { 8 }

    /// One table until ``splitAt`` entries, then `1 << shardBits`.
    @usableFromInline var tables: [Table] = [Table()]
    /// Live entries.
    @inlinable public var count: Int { _count }
    @usableFromInline var _count = 0
    /// The entries at which the one table splits into shards.
    public let splitAt: Int

    /// - Parameter splitAt: entries past which growth happens per shard; the
    ///   default keeps small indexes (most lane tables) in one table.
    @inlinable public init(splitAt: Int = 1 << 13) {
        self.splitAt = splitAt
    }

    /// Whether the index has split into shards (for tests).
    @inlinable public var isSharded: Bool { tables.count > 1 }

    @inlinable func shard(_ tag: UInt32) -> Int {
        tables.count == 1 ? 0 : Int(tag >> UInt32(32 - Self.shardBits))
    }

    @inlinable public func find(hash: Int, _ matches: (Int32) -> Bool) -> Int32? {
        let tag = UInt32(truncatingIfNeeded: hash)
        return tables[shard(tag)].find(tag, matches)
    }

    /// Adds `record`, whose key must not be in the index yet.
    @inlinable public mutating func insert(_ record: Int32, hash: Int) {
        if tables.count == 1 && _count >= splitAt { split() }
        let tag = UInt32(truncatingIfNeeded: hash)
        tables[shard(tag)].insert(Slot(record: record, hash: tag))
        _count += 1
    }

    /// Removes `record` if it is in the index under `hash`.
    @inlinable public mutating func remove(_ record: Int32, hash: Int) {
        let tag = UInt32(truncatingIfNeeded: hash)
        if tables[shard(tag)].remove(record, tag) { _count -= 1 }
    }

    /// Deals the one table's entries out to the shards, each sized for its
    /// share: one pass over ``splitAt`` entries, once in the index's life.
    @inlinable mutating func split() {
        let whole = tables[0]
        let shards = 1 << Self.shardBits
        tables = Array(repeating: Table(), count: shards)
        for s in 0..<shards { tables[s].rebuild(for: whole.count / shards + 1) }
        whole.forEachLive { tables[shard($0.hash)].insert($0) }
    }
}
