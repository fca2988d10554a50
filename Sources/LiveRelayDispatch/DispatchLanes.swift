import NIOCore

extension DispatchScheduler {
    /// One token's pushes of one app.
    struct Lane {
        /// The token (or, for a broadcast, the channel id) whose pushes these are.
        var token: String
        var pending = PendingPushes()
        /// The push in flight or waiting to retry; none may be sent to the token meanwhile.
        var busy: UInt64?
        /// Whether the lane is in its app's ready queue (possibly with stale entries).
        var inReady = false
        /// The newest timestamp taken per activity id.
        var newest = NewestTimestamps()
        /// When a push was last taken: an idle lane is forgotten ``DispatcherConfiguration/laneRetention`` later.
        var lastTaken = NIODeadline.uptimeNanoseconds(0)

        var isIdle: Bool { pending.isEmpty && busy == nil && !inReady }
    }

    /// The newest timestamp taken per activity id, for one lane. An update token
    /// belongs to one activity, so nearly every lane holds one entry: it is kept
    /// inline (no dictionary, no hashing per push); a push-to-start token that
    /// starts several activities spills the others into a dictionary.
    struct NewestTimestamps {
        private var first: (activity: String, timestamp: Int64)?
        private var others: [String: Int64] = [:]

        subscript(activity: String) -> Int64? {
            get {
                if let first, first.activity == activity { return first.timestamp }
                return others.isEmpty ? nil : others[activity]
            }
            set {
                if first == nil || first?.activity == activity {
                    first = newValue.map { (activity, $0) }
                } else {
                    others[activity] = newValue
                }
            }
        }
    }

    /// One app's lanes. A token is hashed once per push, when the push is taken;
    /// from then on its lane is a slot number (in the ready queue, in the push),
    /// so sending and answering a push hash no strings (in issue 14's profile a
    /// third of the scheduler's instructions were `Hasher` over token strings).
    /// Slots of forgotten lanes are reused; only idle lanes are forgotten, and no
    /// push or ready entry refers to an idle lane.
    struct LaneTable {
        private var slots: [String: Int] = [:]
        private var lanes: [Lane] = []
        private var free: [Int] = []

        /// Lanes remembered, idle ones included.
        var count: Int { slots.count }

        /// The slots of every remembered lane.
        var allSlots: [Int] { Array(slots.values) }

        /// Makes room for a batch of `tokens` before its lanes are looked up: a
        /// 100,000-token fan-out to tokens without lanes otherwise grows the table
        /// from empty through a dozen resizes, each rehashing every token string
        /// read from memory again (a fifth of a SQLite fan-out's enqueue in
        /// issue 14's profile). At least the batch's size and never more than the
        /// table holds: a table that already has the batch's lanes does not grow.
        mutating func reserve(forBatchOf tokens: Int) {
            slots.reserveCapacity(max(slots.count, tokens))
            lanes.reserveCapacity(max(lanes.count, tokens))
        }

        /// The token's lane, made if it has none; one hash of the token either way.
        mutating func slot(for token: String) -> Int {
            // No remembered lane has a free slot or the next one: finding `candidate` means the lane is new.
            let candidate = free.last ?? lanes.count
            let slot = Self.claim(&slots[token, default: -1], candidate)
            guard slot == candidate else { return slot }
            if slot == free.last {
                free.removeLast()
                lanes[slot] = Lane(token: token)
            } else {
                lanes.append(Lane(token: token))
            }
            return slot
        }

        /// The slot a lookup found, or `candidate` stored in place of the lookup's default.
        private static func claim(_ stored: inout Int, _ candidate: Int) -> Int {
            if stored < 0 { stored = candidate }
            return stored
        }

        /// Moves the lane out of its slot (no copy of its arrays); ``put(_:at:)`` puts it back.
        mutating func take(_ slot: Int) -> Lane {
            var lane = Lane(token: "")
            swap(&lane, &lanes[slot])
            return lane
        }

        mutating func put(_ lane: Lane, at slot: Int) { lanes[slot] = lane }

        /// Forgets the lanes `isForgotten` picks.
        mutating func forget(where isForgotten: (Lane) -> Bool) {
            for (token, slot) in slots where isForgotten(lanes[slot]) {
                slots[token] = nil
                lanes[slot] = Lane(token: "")
                free.append(slot)
            }
            if slots.isEmpty {
                lanes.removeAll()
                free.removeAll()
            }
        }
    }
}
