import LiveRelayCollections
import NIOCore

extension DispatchScheduler {
    /// One token's pushes of one app. Its token is kept by the ``LaneTable``:
    /// a lane holds no reference of its own until it has pushes queued or has
    /// seen an activity, so an empty one costs nothing to make or destroy.
    struct Lane {
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
    /// so sending and answering a push hash no strings (`Hasher` over token
    /// strings at each step would be a third of the scheduler's instructions).
    /// Slots of forgotten lanes are reused; only idle lanes are forgotten, and no
    /// push or ready entry refers to an idle lane.
    struct LaneTable {
        /// Lane slots by their token's hash (stored, so growing rehashes no token).
        private var index = RecordIndex()
        /// Each slot's token (or, for a broadcast, channel id): the index's key, kept
        /// here while its lane is out, so ``take(_:)`` leaves an empty lane behind.
        private var tokens: [String] = []
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
        mutating func reserve(forBatchOf count: Int) {
            tokens.reserveCapacity(max(tokens.count, count))
            lanes.reserveCapacity(max(lanes.count, count))
        }

        /// The token of the lane in `slot`.
        func token(at slot: Int) -> String { tokens[slot] }

        /// The token's lane, made if it has none; one hash of the token either way.
        mutating func slot(for token: String) -> Int {
            let hash = token.hashValue
            if let found = index.find(hash: hash, { tokens[Int($0)] == token }) { return Int(found) }
            let slot: Int
            if let reused = free.popLast() {
                slot = reused
                tokens[slot] = token
                lanes[slot] = Lane()
            } else {
                slot = lanes.count
                tokens.append(token)
                lanes.append(Lane())
            }
            index.insert(Int32(slot), hash: hash)
            return slot
        }

        /// Moves the lane out of its slot (no copy of its arrays); ``put(_:at:)``
        /// puts it back. The token stays: it is the index's key.
        mutating func take(_ slot: Int) -> Lane {
            var lane = Lane()
            swap(&lane, &lanes[slot])
            return lane
        }

        /// Consumes `lane`: a borrowed one was copied into the slot (a retain of each
        /// of its references) and then destroyed by the caller, for every push sent and answered.
        mutating func put(_ lane: consuming Lane, at slot: Int) { lanes[slot] = lane }

        /// Forgets the lanes `isForgotten` picks, given each one's token and lane.
        mutating func forget(where isForgotten: (String, Lane) -> Bool) {
            let freed = Set(free)
            for slot in lanes.indices where !freed.contains(slot) && isForgotten(tokens[slot], lanes[slot]) {
                index.remove(Int32(slot), hash: tokens[slot].hashValue)
                tokens[slot] = ""
                lanes[slot] = Lane()
                free.append(slot)
            }
            if index.count == 0 {
                index = RecordIndex()
                tokens.removeAll()
                lanes.removeAll()
                free.removeAll()
            }
        }
    }
}
