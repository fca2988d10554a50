/// A map whose keys are handed out by a counter (push and call numbers), kept
/// as pages of 1,024 slots by key: a lookup is a shift, a subtraction and a
/// mask, with no hashing; an insert writes a slot of a page that already
/// exists (a new page every 1,024 keys), so a fan-out of 100,000 pushes neither
/// rehashes nor grows a table by copying it.
///
/// Why: the dispatcher's scheduler looks its pushes and calls up by their
/// numbers about seven times per push (taken, sent, answered, settled), and
/// hashing those numbers in dictionaries would be the largest single cost of
/// its per-push work under callgrind (docs/BENCHMARKS.md, "Instruction-count gate").
///
/// Memory follows the keys alive, not the keys handed out: a page whose last
/// key is removed is freed, and the directory drops the freed pages at its
/// front. A key that lives long (a push retrying for an hour while millions
/// pass) keeps only its own page, plus one directory entry per 1,024 keys
/// handed out after it, until it is removed. The directory's last page is the
/// exception: kept while empty until the keys go past it, so that keys which
/// come and go one at a time (calls of one push) do not make a page each.
///
/// Keys may come in any order; a key below the first page only grows the
/// directory at its front. A value type with copy-on-write per page, as
/// ``ChunkedArray`` is.
///
/// `@unchecked Sendable`: the pages are classes, but only reached through this
/// value, which copies a shared page before writing to it.
public struct SequentialMap<Value: Sendable>: @unchecked Sendable {
    @inlinable static var shift: UInt64 { 10 }
    @inlinable static var pageSize: Int { 1 << Int(shift) }
    @inlinable static var mask: UInt64 { UInt64(pageSize - 1) }

    /// One page: a header (how many of its slots hold a value) and ``pageSize`` slots.
    @usableFromInline final class Page: ManagedBuffer<Int, Value?> {
        @inlinable static func make() -> Page {
            let page = unsafeDowncast(Page.create(minimumCapacity: pageSize) { _ in 0 }, to: Page.self)
            page.slots.initialize(repeating: nil, count: pageSize)
            return page
        }

        @inlinable var slots: UnsafeMutablePointer<Value?> {
            withUnsafeMutablePointerToElements { $0 }
        }

        /// How many slots hold a value: the header, through its address (reading
        /// `header`, a class's stored property, checked exclusivity at run time).
        @inlinable var live: UnsafeMutablePointer<Int> {
            withUnsafeMutablePointerToHeader { $0 }
        }

        /// A page of its own for a writer whose page is shared with a copy.
        @inlinable func copy() -> Page {
            let copy = unsafeDowncast(Page.create(minimumCapacity: pageSize) { _ in self.live.pointee }, to: Page.self)
            copy.slots.initialize(from: slots, count: pageSize)
            return copy
        }

        @inlinable deinit {
            _ = withUnsafeMutablePointerToElements { $0.deinitialize(count: pageSize) }
        }
    }

    /// Pages by number, from ``firstPage``; nil where every key was removed (or none came).
    @usableFromInline var pages: [Page?] = []
    @usableFromInline var firstPage: UInt64 = 0
    @usableFromInline var _count = 0

    @inlinable public init() {}

    /// Keys with a value.
    @inlinable public var count: Int { _count }

    @inlinable public var isEmpty: Bool { _count == 0 }

    /// The position of `key`'s page in ``pages``, if the directory reaches it.
    @inlinable func pageIndex(_ key: UInt64) -> Int? {
        let index = (key >> Self.shift) &- firstPage
        return index < UInt64(pages.count) ? Int(index) : nil
    }

    /// The value of `key`; setting nil removes it.
    @inlinable public subscript(key: UInt64) -> Value? {
        get {
            guard let p = pageIndex(key), let page = pages[p] else { return nil }
            return page.slots[Int(key & Self.mask)]
        }
        set {
            if let newValue {
                insert(newValue, for: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Changes the value of `key` where it is stored (no copy out and back),
    /// returning what `body` returns, or nil (without calling it) if `key` has none.
    @inlinable public mutating func update<R>(_ key: UInt64, _ body: (inout Value) throws -> R) rethrows -> R? {
        guard let p = pageIndex(key), pages[p] != nil else { return nil }
        let slot = uniquePage(p).slots + Int(key & Self.mask)
        guard slot.pointee != nil else { return nil }
        return try body(&slot.pointee!)
    }

    /// Sets the value of `key`, replacing one it had.
    @inlinable public mutating func insert(_ value: Value, for key: UInt64) {
        let number = key >> Self.shift
        // The last page, kept while empty for the keys that come next, is freed once they go past it.
        if let tail = pages.last ?? nil, tail.live.pointee == 0, number > firstPage + UInt64(pages.count - 1) {
            if pages.count == 1 { pages.removeAll(keepingCapacity: true) } else { pages[pages.count - 1] = nil }
        }
        if pages.isEmpty {
            firstPage = number
        } else if number < firstPage {
            pages.insert(contentsOf: repeatElement(nil, count: Int(firstPage - number)), at: 0)
            firstPage = number
        }
        let p = Int(number - firstPage)
        if p >= pages.count { pages.append(contentsOf: repeatElement(nil, count: p - pages.count + 1)) }
        if pages[p] == nil { pages[p] = Page.make() }
        let page = uniquePage(p)
        let slot = page.slots + Int(key & Self.mask)
        if slot.pointee == nil {
            page.live.pointee += 1
            _count += 1
        }
        slot.pointee = value
    }

    /// Removes the value of `key` and returns it; frees its page if it was the page's last.
    @discardableResult
    @inlinable public mutating func removeValue(forKey key: UInt64) -> Value? {
        guard let p = pageIndex(key), pages[p] != nil else { return nil }
        let page = uniquePage(p)
        let slot = page.slots + Int(key & Self.mask)
        guard let value = slot.pointee else { return nil }
        slot.pointee = nil
        _count -= 1
        page.live.pointee -= 1
        // The last page stays while empty: calls of one push each, answered one at a
        // time, empty it at every push, and would make and clear a page for each.
        if page.live.pointee == 0, p < pages.count - 1 {
            pages[p] = nil
            if p == 0 { dropFreedFront() }
        }
        return value
    }

    /// Drops the freed pages at the front of the directory (all of it when the map is empty).
    @inlinable mutating func dropFreedFront() {
        guard let kept = pages.firstIndex(where: { $0 != nil }) else {
            pages.removeAll(keepingCapacity: true)
            return
        }
        pages.removeFirst(kept)
        firstPage += UInt64(kept)
    }

    /// The page at `p` (which must exist), copied first if a copy of this map shares it.
    @inlinable @inline(__always) mutating func uniquePage(_ p: Int) -> Page {
        if !isKnownUniquelyReferenced(&pages[p]) { pages[p] = pages[p]!.copy() }
        return pages[p].unsafelyUnwrapped
    }
}
