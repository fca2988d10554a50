import NIOConcurrencyHelpers

/// Counts open connections against the server's two limits: all of them
/// (`RPCServer.Configuration.maxConnections`) and the authenticated ones of
/// each API key (`maxConnectionsPerKey`).
///
/// Two limits because they guard different things: the global one keeps the
/// process inside its file descriptors and memory however many peers come;
/// the per-key one keeps one caller (a runaway pool, a retry loop that never
/// closes) from taking that whole allowance from every other key.
///
/// Shared by every event loop, hence the lock: the tracker takes a slot on
/// the listener's loop, handlers take their key's slot on their own loops,
/// and slots come back from whichever loop sees a connection close. Each
/// operation is a counter or dictionary update, once per connection.
final class ConnectionLimiter: Sendable {
    /// What `acquire(keyID:)` decided.
    enum KeyAdmission: Hashable, Sendable {
        /// Counted: call `release(keyID:)` once the connection closes.
        case admitted
        /// The key already has `open` connections, at or above `limit`; nothing was counted.
        case refused(open: Int, limit: Int)
    }

    private struct Counts {
        var connections = 0
        /// Only keys with open connections, so the table is bounded by
        /// connections, not by every key that ever connected.
        var perKey: [String: Int] = [:]
    }

    let maxConnections: Int
    let maxConnectionsPerKey: Int
    private let counts = NIOLockedValueBox(Counts())

    /// Limits below 1 count as 1: a server that refuses every connection is a misconfiguration, not a limit.
    init(maxConnections: Int, maxConnectionsPerKey: Int) {
        self.maxConnections = max(1, maxConnections)
        self.maxConnectionsPerKey = max(1, maxConnectionsPerKey)
    }

    /// Takes a slot for a newly accepted connection; false at the limit, and
    /// then nothing was counted (close the connection, do not release it).
    func acquireConnection() -> Bool {
        counts.withLockedValue { counts in
            guard counts.connections < maxConnections else { return false }
            counts.connections += 1
            return true
        }
    }

    /// Gives back a slot taken by `acquireConnection()`.
    func releaseConnection() {
        counts.withLockedValue { counts in
            assert(counts.connections > 0, "released a connection that was never acquired")
            counts.connections = max(0, counts.connections - 1)
        }
    }

    /// Counts one more authenticated connection for `keyID`, unless the key is at its limit.
    func acquire(keyID: String) -> KeyAdmission {
        counts.withLockedValue { counts in
            let open = counts.perKey[keyID, default: 0]
            guard open < maxConnectionsPerKey else { return .refused(open: open, limit: maxConnectionsPerKey) }
            counts.perKey[keyID] = open + 1
            return .admitted
        }
    }

    /// Gives back a slot `acquire(keyID:)` admitted.
    func release(keyID: String) {
        counts.withLockedValue { counts in
            guard let open = counts.perKey[keyID] else {
                assertionFailure("released a connection of key \(keyID), which has none")
                return
            }
            counts.perKey[keyID] = open > 1 ? open - 1 : nil
        }
    }

    /// Connections holding a slot of the global limit.
    var connections: Int {
        counts.withLockedValue { $0.connections }
    }

    /// Authenticated connections of `keyID`.
    func connections(keyID: String) -> Int {
        counts.withLockedValue { $0.perKey[keyID, default: 0] }
    }

    /// The GOAWAY reason for a key over its limit. It names the key id, which
    /// is public (it is in every log line), never the secret.
    static func refusalReason(keyID: String, open: Int, limit: Int) -> String {
        "API key \(keyID) has \(open) connection\(open == 1 ? "" : "s"), the limit is \(limit)"
    }
}
