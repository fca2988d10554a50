/// A dictionary that never rehashes its keys: entries live in chunks
/// (``ChunkedArray``), found through a ``RecordIndex`` that keeps each key's
/// hash, so growing re-places stored hashes a shard at a time instead of
/// hashing every key again into one new table.
///
/// Why: the memory store's maps with an entry per user, per activity or per
/// pooled string grow under the store's lock. A `Dictionary` of 393,216 user
/// ids stalled the RegisterToken that crossed its capacity for about 80 ms,
/// and every call waiting for the lock with it (docs/BENCHMARKS.md,
/// "Memory"). Lookups cost what a `Dictionary`'s do: one
/// hash of the key, one comparison for a hit.
///
/// A value type like `Dictionary`; a copy is a snapshot. Order of iteration
/// is unspecified.
public struct RecordMap<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline struct Entry: Sendable {
        @usableFromInline var key: Key
        @usableFromInline var value: Value

        @inlinable init(key: Key, value: Value) {
            self.key = key
            self.value = value
        }
    }

    /// The entries by number; nil: a free entry, on ``free``.
    @usableFromInline var entries = ChunkedArray<Entry?>()
    @usableFromInline var free: [Int32] = []
    @usableFromInline var index = RecordIndex()

    @inlinable public init() {}

    /// Live entries.
    @inlinable public var count: Int { index.count }

    @inlinable public var isEmpty: Bool { index.count == 0 }

    @inlinable func find(_ key: Key, hash: Int) -> Int32? {
        index.find(hash: hash) { entries[Int($0)]?.key == key }
    }

    @inlinable public subscript(key: Key) -> Value? {
        get { find(key, hash: key.hashValue).flatMap { entries[Int($0)]?.value } }
        set {
            let hash = key.hashValue
            switch (find(key, hash: hash), newValue) {
            case let (entry?, value?):
                entries[Int(entry)]?.value = value
            case let (entry?, nil):
                index.remove(entry, hash: hash)
                entries[Int(entry)] = nil
                free.append(entry)
            case let (nil, value?):
                _ = add(key, value, hash: hash)
            case (nil, nil):
                break
            }
        }
    }

    /// The live entries among entry numbers `start ..< start + limit`, for a
    /// scan done in slices (a caller holding a lock can let go between them).
    /// Returns the entry number to resume from, or nil when the scan is done.
    /// An entry added or removed between slices may be seen or not.
    @inlinable public func forEach(from start: Int, limit: Int, _ body: (Key, Value) -> Void) -> Int? {
        var i = Swift.max(0, start)
        let end = Swift.max(1, limit) >= entries.count - i ? entries.count : i + Swift.max(1, limit)
        while i < end {
            if let entry = entries[i] { body(entry.key, entry.value) }
            i += 1
        }
        return end < entries.count ? end : nil
    }

    /// The value for `key`, or `defaultValue` when absent, as `Dictionary`'s:
    /// changed in place, the absent key added with `defaultValue` first.
    @inlinable public subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[key] ?? defaultValue() }
        _modify {
            let hash = key.hashValue
            let entry = find(key, hash: hash) ?? add(key, defaultValue(), hash: hash)
            yield &entries[Int(entry)]!.value
        }
    }

    /// Adds an entry for `key`, which must not be in the map, reusing a free one.
    @inlinable mutating func add(_ key: Key, _ value: Value, hash: Int) -> Int32 {
        let entry: Int32
        if let reused = free.popLast() {
            entry = reused
            entries[Int(entry)] = Entry(key: key, value: value)
        } else {
            entry = Int32(entries.count)
            entries.append(Entry(key: key, value: value))
        }
        index.insert(entry, hash: hash)
        return entry
    }
}

extension RecordMap: Sequence {
    /// The live entries in no particular order (by entry number: freed
    /// entries are reused, so not in insertion order either).
    public struct Iterator: IteratorProtocol {
        @usableFromInline let entries: ChunkedArray<Entry?>
        @usableFromInline var position = 0

        @inlinable init(entries: ChunkedArray<Entry?>) {
            self.entries = entries
        }

        @inlinable public mutating func next() -> (key: Key, value: Value)? {
            while position < entries.count {
                defer { position += 1 }
                if let entry = entries[position] { return (entry.key, entry.value) }
            }
            return nil
        }
    }

    @inlinable public func makeIterator() -> Iterator { Iterator(entries: entries) }

    @inlinable public var underestimatedCount: Int { count }
}
