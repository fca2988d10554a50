import LiveRelayAPNs
import LiveRelayCollections
import LiveRelayDomain

/// The activities of ``InMemoryState`` by the minute of their sweep deadline,
/// so that a sweep reads only the minutes that are due.
///
/// Why: the sweeper runs every minute, inside a mutation (under the memory
/// store's lock), and without an index it would look at every activity to
/// find the due ones: 51 ms for a million activities, most of the time to
/// find none (docs/BENCHMARKS.md, "Memory"). The SQL
/// stores index the same value (`activities_sweep_deadline`).
struct SweepIndex: Sendable {
    /// Keys by minute; a minute with no activity left is removed. A
    /// `RecordMap` per minute rather than a `Set`: a burst of starts lands in
    /// one minute, and a `Set` of 786,432 of them stalled a start for 163 ms
    /// as it grew (the value is unused).
    private var minutes: [Int64: RecordMap<ActivityKey, Bool>] = [:]

    private static func minute(_ time: UnixTime) -> Int64 {
        let ms = time.milliseconds
        return ms >= 0 ? ms / 60_000 : (ms - 59_999) / 60_000
    }

    /// Follows one activity from `old` (nil: new) to `new` (nil: deleted).
    mutating func move(_ key: ActivityKey, from old: UnixTime?, to new: UnixTime?) {
        guard old != new else { return }
        if let old {
            let m = Self.minute(old)
            minutes[m]?[key] = nil
            if minutes[m]?.isEmpty == true { minutes[m] = nil }
        }
        if let new { minutes[Self.minute(new), default: RecordMap()][key] = true }
    }

    /// The keys of the minutes at or before `now`'s, the earliest minutes
    /// first, until at least `enough` keys (every key of the last minute read:
    /// the caller filters by the exact deadline and orders).
    func keys(dueBy now: UnixTime, enough: Int) -> [ActivityKey] {
        let last = Self.minute(now)
        var keys: [ActivityKey] = []
        for minute in minutes.keys.filter({ $0 <= last }).sorted() {
            keys.append(contentsOf: minutes[minute]!.lazy.map(\.key))
            if keys.count >= enough { break }
        }
        return keys
    }
}
