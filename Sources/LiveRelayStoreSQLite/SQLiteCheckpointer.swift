import CSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Checkpoints off the commit path, with a bound on the WAL.
///
/// ## Why
/// With SQLite's automatic checkpoint (every 1,000 WAL frames, inside the
/// `COMMIT` that crosses the mark) the writer itself copies the WAL into the
/// database file and fsyncs it, every few batches, while callers wait; and it
/// copies a page as often as checkpoints find it dirty. Here the writer's
/// connection has no automatic checkpoint; its WAL hook reports the WAL's size
/// after each commit, and:
/// - at ``softFrames`` this thread runs a PASSIVE checkpoint on its own
///   connection, concurrently with the writer (PASSIVE never blocks it);
/// - a PASSIVE checkpoint cannot let the WAL start over while the writer keeps
///   committing (SQLite restarts the WAL only when a write transaction begins
///   with every frame copied), so at ``hardFrames`` the writer stops before its
///   next `BEGIN` and waits for a RESTART checkpoint here. Most frames are
///   already copied by then, so the pause is short, and the WAL file never grows
///   much past ``hardFrames`` pages plus one batch.
///
/// Durability is unchanged: a checkpoint syncs the WAL before it writes into
/// the database file and syncs the database file before it lets the WAL be
/// reused, whatever the connection's `synchronous` level; a crash at any point
/// leaves a WAL that recovery replays (the SIGKILL tests cover this).
final class SQLiteCheckpointer: @unchecked Sendable {
    let softFrames: Int
    let hardFrames: Int
    private let db: SQLiteConnection
    private let monitor = SQLiteMonitor()
    private var passiveRequested = false
    private var restartRequested = false
    private var restartsDone = 0
    private var isClosed = false

    /// Totals for ``SQLiteActivityStore/Statistics``; guarded by the mutex.
    private var checkpoints = 0
    private var restarts = 0
    private var nanoseconds: UInt64 = 0
    private var lastError: SQLiteError?
    var totals: (checkpoints: Int, restarts: Int, nanoseconds: UInt64, lastError: SQLiteError?) {
        locked { (checkpoints, restarts, nanoseconds, lastError) }
    }

    init(db: SQLiteConnection, softFrames: Int, hardFrames: Int) {
        self.db = db
        self.softFrames = max(1, softFrames)
        self.hardFrames = max(self.softFrames, hardFrames)
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T { try monitor.locked(body) }

    /// The writer, after a commit: the WAL now holds `frames` frames.
    func walHas(frames: Int) {
        guard frames >= softFrames else { return }
        locked {
            if !passiveRequested {
                passiveRequested = true
                monitor.broadcast()
            }
        }
    }

    /// The writer, outside a transaction, with the WAL at its bound: blocks
    /// until a RESTART checkpoint has run (successfully or not).
    func restartAndWait() {
        locked {
            let target = restartsDone + 1
            restartRequested = true
            monitor.broadcast()
            while restartsDone < target && !isClosed { monitor.wait() }
        }
    }

    func close() {
        locked {
            isClosed = true
            monitor.broadcast()
        }
    }

    /// The thread's loop; closes the connection when done.
    func run() {
        while true {
            let restart: Bool? = locked {
                while !passiveRequested && !restartRequested && !isClosed { monitor.wait() }
                if isClosed { return nil }
                let restart = restartRequested
                restartRequested = false
                passiveRequested = false
                return restart
            }
            guard let restart else { break }
            let start = sqliteMonotonicNanoseconds()
            var log: Int32 = 0
            var copied: Int32 = 0
            let rc = sqlite3_wal_checkpoint_v2(
                db.handle, nil, restart ? SQLITE_CHECKPOINT_RESTART : SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
            let elapsed = sqliteMonotonicNanoseconds() - start
            let error = rc == SQLITE_OK || rc == SQLITE_BUSY ? nil : db.error(rc, "wal_checkpoint")
            locked {
                checkpoints += 1
                nanoseconds += elapsed
                if let error { lastError = error }
                if restart {
                    restarts += 1
                    restartsDone += 1
                    monitor.broadcast()
                }
            }
        }
        // Wake a writer that might still wait (it checks isClosed).
        monitor.locked { monitor.broadcast() }
        db.close()
    }
}

/// The WAL's size in frames after the writer's last commit, from SQLite's WAL hook.
///
/// Setting a WAL hook replaces SQLite's automatic checkpoint (which is itself
/// a WAL hook), which is what ``SQLiteCheckpointer`` wants.
final class SQLiteWALFrames {
    /// Written by the hook on the writer thread, read by the writer thread.
    var frames = 0

    func install(on db: SQLiteConnection) {
        sqlite3_wal_hook(
            db.handle,
            { context, _, _, frames in
                Unmanaged<SQLiteWALFrames>.fromOpaque(context!).takeUnretainedValue().frames = Int(frames)
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    func uninstall(from db: SQLiteConnection) {
        sqlite3_wal_hook(db.handle, nil, nil)
    }
}
