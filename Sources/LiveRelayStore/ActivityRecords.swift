import LiveRelayDomain
import LiveRelayPushOutlet

/// One activity's idempotency records in the memory store: by key for
/// replays, by reply timestamp for settles and for evicting the oldest calls'
/// records over ``IdempotencyRecord/keptPerActivity``. A call's timestamp is
/// unique within its activity and grows with each call, so `timestamps` is
/// kept sorted by appending, and the oldest is its first element.
struct ActivityRecords: Sendable {
    private(set) var byKey: [String: IdempotencyRecord] = [:]
    private var keyByTimestamp: [Int64: String] = [:]
    /// Ascending.
    private var timestamps: [Int64] = []

    subscript(key: String) -> IdempotencyRecord? { byKey[key] }

    /// Puts `record`, replacing the one with its key; then evicts the oldest
    /// calls' records over `cap`.
    mutating func put(_ record: IdempotencyRecord, cap: Int = IdempotencyRecord.keptPerActivity) {
        if let old = byKey[record.key] { forgetTimestamp(old.reply.timestamp, of: record.key) }
        if let other = keyByTimestamp[record.reply.timestamp], other != record.key {
            // Not reached while timestamps are unique per activity; kept consistent if they are not.
            byKey[other] = nil
            forgetTimestamp(record.reply.timestamp, of: other)
        }
        byKey[record.key] = record
        keyByTimestamp[record.reply.timestamp] = record.key
        let timestamp = record.reply.timestamp
        if let last = timestamps.last, last > timestamp {
            timestamps.insert(timestamp, at: insertionIndex(of: timestamp))
        } else {
            timestamps.append(timestamp)
        }
        let over = timestamps.count - cap
        guard over > 0 else { return }
        for evicted in timestamps.prefix(over) {
            if let key = keyByTimestamp.removeValue(forKey: evicted) { byKey[key] = nil }
        }
        timestamps.removeFirst(over)
    }

    /// Sets the final account of the record of the call that stamped `timestamp`, if it has one.
    mutating func settle(timestamp: Int64, account: EnqueueResult) {
        guard let key = keyByTimestamp[timestamp] else { return }
        byKey[key]?.reply.account = account
    }

    private mutating func forgetTimestamp(_ timestamp: Int64, of key: String) {
        guard keyByTimestamp[timestamp] == key else { return }
        keyByTimestamp[timestamp] = nil
        let index = insertionIndex(of: timestamp)
        if index < timestamps.count, timestamps[index] == timestamp { timestamps.remove(at: index) }
    }

    /// The first index whose timestamp is not below `timestamp`.
    private func insertionIndex(of timestamp: Int64) -> Int {
        var low = 0, high = timestamps.count
        while low < high {
            let middle = (low + high) / 2
            if timestamps[middle] < timestamp { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
