import LiveRelayCollections
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
        /// Lane slots by their token's hash (stored, so growing rehashes no token).
        private var index = RecordIndex()
        private var lanes: [Lane] = []
        private var free: [Int] = []

        /// Lanes remembered, idle ones included.
        var count: Int { index.count }

        /// The slots of every remembered lane.
        var allSlots: [Int] {
            guard !free.isEmpty else { return Array(lanes.indices) }
            let freed = Set(free)
            return lanes.indices.filter { !freed.contains($0) }
        }

        /// Makes room for a batch of `tokens` lanes before they are looked up
        /// (the index grows from its stored hashes, without reading a token).
        mutating func reserve(forBatchOf tokens: Int) {
            lanes.reserveCapacity(max(lanes.count, tokens))
        }

        /// The token's lane, made if it has none; one hash of the token either way.
        mutating func slot(for token: String) -> Int {
            let hash = token.hashValue
            if let found = index.find(hash: hash, { lanes[Int($0)].token == token }) { return Int(found) }
            let slot: Int
            if let reused = free.popLast() {
                slot = reused
                lanes[slot] = Lane(token: token)
            } else {
                slot = lanes.count
                lanes.append(Lane(token: token))
            }
            index.insert(Int32(slot), hash: hash)
            return slot
        }

        /// Moves the lane out of its slot (no copy of its arrays); ``put(_:at:)``
        /// puts it back. The slot keeps the token meanwhile: it is the index's key.
        mutating func take(_ slot: Int) -> Lane {
            var lane = Lane(token: lanes[slot].token)
            swap(&lane, &lanes[slot])
            return lane
        }

        mutating func put(_ lane: Lane, at slot: Int) { lanes[slot] = lane }

        /// Forgets the lanes `isForgotten` picks.
        mutating func forget(where isForgotten: (Lane) -> Bool) {
            let freed = Set(free)
            for slot in lanes.indices where !freed.contains(slot) && isForgotten(lanes[slot]) {
                index.remove(Int32(slot), hash: lanes[slot].token.hashValue)
                lanes[slot] = Lane(token: "")
                free.append(slot)
            }
            if index.count == 0 {
                index = RecordIndex()
                lanes.removeAll()
                free.removeAll()
            }
        }
    }
}
