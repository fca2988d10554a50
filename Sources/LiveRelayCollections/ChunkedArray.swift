/// A growable array kept in fixed-size chunks of 4,096 elements: appending
/// never moves what is stored, only adds a chunk (the first chunk alone
/// starts at 16 elements and doubles, so small arrays stay small).
///
/// Why: an `Array` doubles by copying every element into a new buffer whose
/// pages are then faulted in. The memory store appends its token records
/// (about 112 bytes each) under its lock, and at a million tokens that copy
/// stalled one RegisterToken, and every call waiting for the lock, for about
/// 70 ms (docs/BENCHMARKS.md, "Memory"). Here
/// the only thing ever copied is the directory of chunks, a reference per
/// 4,096 elements. A value type with copy-on-write per chunk: a copy is a
/// snapshot, and writing to it afterwards copies only the chunks written.
///
/// Elements are reached through addressors, not a `_modify` coroutine: the
/// coroutine yielding a nested `Array` access was not inlined (a call and a
/// resume per write under callgrind). Inlinable, as the collections of this
/// module are: their users are in other modules, and unspecialized generic
/// code looked up type metadata on every access.
///
/// `@unchecked Sendable`: the chunks are classes, but only reached through
/// this value, which copies a shared chunk before writing to it, as `Array`
/// does with its buffer.
public struct ChunkedArray<Element: Sendable>: @unchecked Sendable {
    @inlinable static var shift: Int { 12 }
    @inlinable static var capacity: Int { 1 << shift }
    @inlinable static var mask: Int { capacity - 1 }

    /// One chunk: a header (elements initialized) and room for ``capacity`` elements.
    @usableFromInline final class Chunk: ManagedBuffer<Int, Element> {
        @inlinable static func make(capacity: Int = ChunkedArray.capacity) -> Chunk {
            unsafeDowncast(Chunk.create(minimumCapacity: capacity) { _ in 0 }, to: Chunk.self)
        }

        @inlinable var elements: UnsafeMutablePointer<Element> {
            withUnsafeMutablePointerToElements { $0 }
        }

        /// Elements initialized: the header, through its address (reading `header`,
        /// a class's stored property, checked exclusivity at run time on every append).
        @inlinable var initialized: UnsafeMutablePointer<Int> {
            withUnsafeMutablePointerToHeader { $0 }
        }

        /// A chunk of its own for a writer whose chunk is shared with a copy,
        /// or a larger one for the first chunk as it grows.
        @inlinable func copy(capacity: Int? = nil) -> Chunk {
            let copy = Chunk.make(capacity: capacity ?? self.capacity)
            copy.initialized.pointee = initialized.pointee
            copy.elements.initialize(from: elements, count: initialized.pointee)
            return copy
        }

        @inlinable deinit {
            _ = withUnsafeMutablePointers { count, elements in elements.deinitialize(count: count.pointee) }
        }
    }

    @usableFromInline var chunks: [Chunk] = []
    @usableFromInline var _count = 0

    @inlinable public init() {}

    @inlinable public var count: Int { _count }

    @inlinable public subscript(index: Int) -> Element {
        unsafeAddress {
            precondition(index >= 0 && index < _count, "ChunkedArray index out of range")
            return UnsafePointer(chunks[index >> Self.shift].elements + (index & Self.mask))
        }
        unsafeMutableAddress {
            precondition(index >= 0 && index < _count, "ChunkedArray index out of range")
            return uniqueChunk(index >> Self.shift).elements + (index & Self.mask)
        }
    }

    /// The chunk `c`, copied first if a copy of this array shares it.
    @inlinable @inline(__always) mutating func uniqueChunk(_ c: Int) -> Chunk {
        if !isKnownUniquelyReferenced(&chunks[c]) { chunks[c] = chunks[c].copy() }
        return chunks[c]
    }

    @inlinable public mutating func append(_ element: Element) {
        if _count & Self.mask == 0 { chunks.append(Chunk.make(capacity: _count == 0 ? 16 : Self.capacity)) }
        var chunk = uniqueChunk(chunks.count - 1)
        if _count < Self.capacity && chunk.initialized.pointee == chunk.capacity {
            // Only the first chunk starts small (16) and doubles up to a full
            // chunk: a small map costs what it holds, not 4,096 elements.
            chunk = chunk.copy(capacity: Swift.min(2 * chunk.capacity, Self.capacity))
            chunks[chunks.count - 1] = chunk
        }
        (chunk.elements + chunk.initialized.pointee).initialize(to: element)
        chunk.initialized.pointee += 1
        _count += 1
    }
}
