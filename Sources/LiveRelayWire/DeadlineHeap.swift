import NIOCore

/// A min-heap of (deadline, request id), so the next deadline of up to
/// MAX_REQUESTS_IN_FLIGHT requests is found in O(1) and maintained in
/// O(log n), instead of scanning every request on every event.
///
/// Entries are not removed when a request completes early; a stale entry is
/// skipped when it reaches the top (the owner checks whether the id is still
/// waiting). At worst that causes one early timer wake-up that does nothing.
struct DeadlineHeap: Sendable {
    struct Entry: Sendable {
        var deadline: NIODeadline
        var id: RequestID
    }

    private var entries: [Entry] = []

    var isEmpty: Bool { self.entries.isEmpty }
    var count: Int { self.entries.count }
    var top: Entry? { self.entries.first }

    mutating func push(_ deadline: NIODeadline, _ id: RequestID) {
        self.entries.append(Entry(deadline: deadline, id: id))
        var child = self.entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.entries[child].deadline < self.entries[parent].deadline else { break }
            self.entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    mutating func popExpired(now: NIODeadline) -> Entry? {
        guard let first = self.entries.first, first.deadline <= now else { return nil }
        let last = self.entries.removeLast()
        if !self.entries.isEmpty {
            self.entries[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < self.entries.count, self.entries[left].deadline < self.entries[smallest].deadline {
                    smallest = left
                }
                if right < self.entries.count, self.entries[right].deadline < self.entries[smallest].deadline {
                    smallest = right
                }
                if smallest == parent { break }
                self.entries.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return first
    }

    mutating func removeAll() {
        self.entries.removeAll()
    }
}

extension TimeAmount {
    /// Milliseconds for a u32 timeout field: rounded up so that a sub-millisecond
    /// timeout does not become 0 ("no deadline"), capped at UInt32.max.
    var wireMilliseconds: UInt32 {
        let nanos = self.nanoseconds
        if nanos <= 0 { return 0 }
        let millis = (nanos + 999_999) / 1_000_000
        return millis > Int64(UInt32.max) ? UInt32.max : UInt32(millis)
    }
}
