import NIOConcurrencyHelpers

/// Bounds the bytes of partial request frames buffered across all connections,
/// and those of one API key's connections, so that many connections each
/// holding an almost complete large frame cannot take the process past its
/// memory limit: 1,000 connections of one key holding 1 MiB each would be a
/// gigabyte.
///
/// A connection reserves a frame's payload length as soon as the frame's
/// header is read (``RPCConnectionHandler``) and gives it back once the frame
/// is whole. A reservation that does not fit waits, first come first served,
/// and the connection reads nothing more until it is granted, so the kernel's
/// buffer fills and TCP pushes back on that peer alone. A reservation is
/// granted only whole, so every granted frame can complete: waiting never
/// deadlocks. One that is larger than a limit is granted when nothing else is
/// reserved under that limit, so a frame the wire allows is never refused
/// outright. A waiter blocked only by its key's limit does not hold up other
/// keys' waiters behind it.
///
/// Shared by every event loop, hence the lock; each operation is a few
/// dictionary updates, once per partial frame, not per byte.
final class RequestMemoryBudget: Sendable {
    /// One connection's place in the budget.
    struct Holder: Hashable, Sendable {
        fileprivate let id: UInt64
    }

    private struct Waiter {
        var holder: Holder
        var bytes: Int
        var keyID: String?
        var granted: @Sendable () -> Void
    }

    private struct State {
        var nextID: UInt64 = 0
        var reserved = 0
        var reservedByKey: [String: Int] = [:]
        var holdings: [Holder: (bytes: Int, keyID: String?)] = [:]
        var waiters: [Waiter] = []

        func fits(_ bytes: Int, keyID: String?, limit: Int, perKeyLimit: Int) -> Bool {
            guard fitsGlobally(bytes, limit: limit) else { return false }
            guard let keyID, let ofKey = reservedByKey[keyID] else { return true }
            return ofKey + bytes <= perKeyLimit
        }

        func fitsGlobally(_ bytes: Int, limit: Int) -> Bool { reserved == 0 || reserved + bytes <= limit }

        /// Whether a new reservation must queue behind the waiters: one of them
        /// waits for room under the global limit (first come, first served), or
        /// one of its own key's waits.
        func queued(keyID: String?, limit: Int) -> Bool {
            waiters.contains { !fitsGlobally($0.bytes, limit: limit) || (keyID != nil && $0.keyID == keyID) }
        }

        mutating func take(_ holder: Holder, _ bytes: Int, keyID: String?) {
            reserved += bytes
            if let keyID { reservedByKey[keyID, default: 0] += bytes }
            holdings[holder] = (bytes, keyID)
        }

        /// Gives back what `holder` holds or stops its wait; returns the grants now due.
        mutating func leave(_ holder: Holder, limit: Int, perKeyLimit: Int) -> [@Sendable () -> Void] {
            // A waiter that leaves frees nothing, but may have held up those behind it.
            waiters.removeAll { $0.holder == holder }
            if let (bytes, keyID) = holdings.removeValue(forKey: holder) {
                reserved -= bytes
                if let keyID {
                    let left = reservedByKey[keyID, default: 0] - bytes
                    reservedByKey[keyID] = left > 0 ? left : nil
                }
            }
            var due: [@Sendable () -> Void] = []
            // Keys with a waiter left waiting: their later waiters wait behind it.
            var passedOver: Set<String> = []
            var index = 0
            while index < waiters.count {
                let waiter = waiters[index]
                let keyWaits = waiter.keyID.map { passedOver.contains($0) } ?? false
                if !keyWaits, fits(waiter.bytes, keyID: waiter.keyID, limit: limit, perKeyLimit: perKeyLimit) {
                    waiters.remove(at: index)
                    take(waiter.holder, waiter.bytes, keyID: waiter.keyID)
                    due.append(waiter.granted)
                } else if fitsGlobally(waiter.bytes, limit: limit) {
                    // Held only by its key's limit: the others behind it may go.
                    if let keyID = waiter.keyID { passedOver.insert(keyID) }
                    index += 1
                } else {
                    break
                }
            }
            return due
        }
    }

    /// The most bytes reserved at once, all connections together.
    let limit: Int
    /// The most bytes reserved at once by the connections of one API key.
    let perKeyLimit: Int
    private let state = NIOLockedValueBox(State())

    init(limit: Int, perKeyLimit: Int) {
        self.limit = max(1, limit)
        self.perKeyLimit = max(1, min(perKeyLimit, limit))
    }

    /// A place for one connection; it holds nothing until it reserves.
    func makeHolder() -> Holder {
        state.withLockedValue { state in
            state.nextID += 1
            return Holder(id: state.nextID)
        }
    }

    /// Reserves `bytes` for `holder`'s partial frame (a holder has at most one
    /// reservation: ``release(_:)`` the last first). True if granted now;
    /// false if it waits, and then `granted` is called, from whichever thread
    /// releases the bytes it needs, once it is granted.
    func reserve(_ bytes: Int, for holder: Holder, keyID: String?, granted: @escaping @Sendable () -> Void) -> Bool {
        state.withLockedValue { state in
            if !state.queued(keyID: keyID, limit: limit), state.fits(bytes, keyID: keyID, limit: limit, perKeyLimit: perKeyLimit) {
                state.take(holder, bytes, keyID: keyID)
                return true
            }
            state.waiters.append(Waiter(holder: holder, bytes: bytes, keyID: keyID, granted: granted))
            return false
        }
    }

    /// Gives back `holder`'s reservation, or ends its wait; for a frame that is
    /// whole and for a connection that closes.
    func release(_ holder: Holder) {
        let due = state.withLockedValue { $0.leave(holder, limit: limit, perKeyLimit: perKeyLimit) }
        for granted in due { granted() }
    }

    /// Bytes reserved now, and by `keyID`'s connections.
    func reserved(keyID: String? = nil) -> Int {
        state.withLockedValue { state in keyID.map { state.reservedByKey[$0] ?? 0 } ?? state.reserved }
    }

    /// Connections waiting for a reservation.
    var waiting: Int { state.withLockedValue { $0.waiters.count } }
}
