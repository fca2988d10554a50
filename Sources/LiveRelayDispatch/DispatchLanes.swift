import NIOCore

extension DispatchScheduler {
    /// One token's pushes of one app.
    struct Lane {
        /// The token (or, for a broadcast, the channel id) whose pushes these are.
        var token: String
        var pending: [UInt64] = []
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

        /// The token's lane, made if it has none.
        mutating func slot(for token: String) -> Int {
            if let slot = slots[token] { return slot }
            let slot: Int
            if let reused = free.popLast() {
                slot = reused
                lanes[slot] = Lane(token: token)
            } else {
                slot = lanes.count
                lanes.append(Lane(token: token))
            }
            slots[token] = slot
            return slot
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
