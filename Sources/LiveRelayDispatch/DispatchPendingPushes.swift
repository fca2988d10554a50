extension DispatchScheduler {
    /// A lane's queued pushes, oldest first.
    ///
    /// Nearly every lane holds one push at a time (each token of a fan-out
    /// gets one), so the oldest is kept inline: no array, hence no allocation,
    /// until a second push waits behind it (a 100,000-token fan-out made
    /// 100,000 one-element arrays). The rest is an array read from a head
    /// index, so taking the oldest of a deep backlog (a push-to-start token
    /// starting one activity after another) costs O(1), not the O(n) of
    /// `Array.removeFirst`.
    struct PendingPushes: Sequence {
        private var first: UInt64?
        private var rest: [UInt64] = []
        private var head = 0

        var isEmpty: Bool { first == nil }

        var count: Int { first == nil ? 0 : 1 + rest.count - head }

        /// Queues `id` behind the others.
        mutating func append(_ id: UInt64) {
            if first == nil { first = id } else { rest.append(id) }
        }

        /// Puts `id` ahead of the others (a push that must go first again, such as a retry).
        mutating func prepend(_ id: UInt64) {
            guard let oldest = first else {
                first = id
                return
            }
            if head > 0 {
                head -= 1
                rest[head] = oldest
            } else {
                rest.insert(oldest, at: 0)
            }
            first = id
        }

        /// Takes the oldest.
        mutating func popFirst() -> UInt64? {
            guard let oldest = first else { return nil }
            if head < rest.count {
                first = rest[head]
                head += 1
                // The spent front is dropped once it is half the array (amortized O(1)).
                if head == rest.count {
                    rest.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 16, head * 2 >= rest.count {
                    rest.removeFirst(head)
                    head = 0
                }
            } else {
                first = nil
            }
            return oldest
        }

        mutating func removeAll() { self = PendingPushes() }

        /// Drops the pushes `isRemoved` picks, keeping the others in order.
        mutating func removeAll(where isRemoved: (UInt64) throws -> Bool) rethrows {
            guard first != nil else { return }
            var kept = PendingPushes()
            for id in self where try !isRemoved(id) { kept.append(id) }
            self = kept
        }

        func makeIterator() -> Iterator { Iterator(first: first, rest: rest, index: head) }

        struct Iterator: IteratorProtocol {
            var first: UInt64?
            let rest: [UInt64]
            var index: Int

            mutating func next() -> UInt64? {
                if let id = first {
                    first = nil
                    return id
                }
                guard index < rest.count else { return nil }
                defer { index += 1 }
                return rest[index]
            }
        }
    }
}
