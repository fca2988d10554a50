import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store's durability stage: the only place that tells callers anything.
///
/// ## Why a stage of its own
/// With `synchronous=FULL` the writer thread sits in SQLite's `fsync` inside
/// `COMMIT` and plans nothing meanwhile; on this project's disk that is most of
/// the cycle. In ``SQLiteActivityStore/Durability/pipelined`` mode the writer
/// commits with `synchronous=NORMAL` (the frames reach the WAL file, no fsync)
/// and hands the batch here; this thread `fdatasync`s the WAL and only then
/// completes the batch's futures, while the writer already plans the next batch.
///
/// ## Why that is as durable as `synchronous=FULL`
/// - An acknowledgement is delivered only after an `fdatasync` of the WAL that
///   started after the batch's `COMMIT` returned, i.e. after every frame of it
///   (and of every earlier batch) was written: the same bytes on stable storage
///   that FULL would have synced before returning from `COMMIT`. A SIGKILL in
///   between loses nothing either way (the frames are in the page cache).
/// - Batches are completed strictly in commit order, one fsync covering all
///   earlier commits, so no reply (an acknowledgement, an ALREADY_EXISTS, a
///   replay, a refusal) is ever based on state that could still vanish.
/// - Committed but not yet synced data is visible to the readers' snapshots, so
///   reads are gated too: a read is answered only once every commit that could
///   be in its snapshot is durable (``deliverRead(_:)``).
/// - Checkpoints sync the WAL before they copy frames into the database file
///   (SQLite does that in NORMAL mode too), so the database file never holds a
///   page of an unsynced transaction.
/// - The fsync goes through this stage's own descriptor of the `-wal` file
///   (on Linux `fdatasync` flushes the file, whichever descriptor wrote it).
///   Before trusting it, each sync checks that the path still names the same
///   file, and the directory is synced once so the WAL's directory entry is
///   durable.
/// - A failed fsync leaves data visible that may not be on disk (and Linux may
///   report the next fsync as clean), so it poisons the stage: the batch and
///   every later write and gated read fail until the process reopens the file
///   (recovery then keeps exactly what reached the disk).
///
/// In ``SQLiteActivityStore/Durability/fullSync`` mode SQLite has already
/// synced inside `COMMIT`; this thread then only delivers, in the same order.
final class SQLiteDurability: @unchecked Sendable {
    /// One committed (or failed) batch waiting for its fsync and delivery.
    struct Item {
        /// The commit epoch it needs to be durable (its own, or the last one before it).
        var epoch: UInt64
        /// Whether this stage must fsync before delivering (pipelined mode, the batch wrote).
        var needsSync: Bool
        var deliver: (Result<Void, SQLiteError>) -> Void
    }

    private let walPath: String
    private let directoryPath: String
    private var walDescriptor: Int32 = -1
    private let monitor = SQLiteMonitor()
    private var queue: [Item] = []
    /// The highest epoch whose COMMIT has started (readers' snapshots can include it).
    private var committing: UInt64 = 0
    /// Every epoch up to this one is on stable storage.
    private var durable: UInt64 = 0
    private var readWaiters: [(epoch: UInt64, deliver: (SQLiteError?) -> Void)] = []
    private var isClosed = false
    private var isFinished = false
    private var failure: SQLiteError?
    /// Tests only: runs on the durability thread just before each fsync;
    /// may block (to hold a commit between COMMIT and fsync) or return an error
    /// (an injected fsync failure). Guarded by the mutex.
    private var syncHook: (@Sendable () -> SQLiteError?)?
    func setSyncHookForTesting(_ hook: (@Sendable () -> SQLiteError?)?) { locked { syncHook = hook } }
    /// Reads waiting for a sync (tests).
    var waitingReads: Int { locked { readWaiters.count } }
    /// Called (without the lock) when the thread has taken items: the writer may commit again.
    var onTaken: @Sendable () -> Void = {}

    /// Totals for ``SQLiteActivityStore/Statistics``; guarded by the mutex.
    private var syncs = 0
    private var syncNanoseconds: UInt64 = 0
    var syncTotals: (syncs: Int, nanoseconds: UInt64) { locked { (syncs, syncNanoseconds) } }

    init(databasePath: String) {
        walPath = databasePath + "-wal"
        let slash = databasePath.lastIndex(of: "/")
        directoryPath = slash.map { String(databasePath[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
    }

    deinit {
        if walDescriptor >= 0 { closeDescriptor(walDescriptor) }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T { try monitor.locked(body) }

    // MARK: The writer's side

    /// Announces a COMMIT about to run; returns its epoch. Called before
    /// `COMMIT` so that a reader whose snapshot includes it waits for it.
    func beginCommit() -> UInt64 {
        locked {
            committing += 1
            return committing
        }
    }

    /// The epoch a batch without writes must wait for (everything it may have read).
    var lastEpoch: UInt64 { locked { committing } }

    var currentFailure: SQLiteError? { locked { failure } }

    /// Whether the queue is empty (the previous commit is being synced or done).
    var hasRoom: Bool { locked { queue.isEmpty } }

    /// Blocks until the thread has taken everything queued.
    func waitForRoom() {
        locked {
            while !queue.isEmpty && !isClosed { monitor.wait() }
        }
    }

    func submit(_ item: Item) {
        locked {
            queue.append(item)
            monitor.broadcast()
        }
    }

    /// No more items: the thread syncs and delivers what is queued, then exits.
    func close() {
        locked {
            isClosed = true
            monitor.broadcast()
        }
    }

    // MARK: The readers' side

    /// Calls `deliver` once every commit a read that just finished could have
    /// seen is durable (at once in the common case), or with the stage's failure.
    func deliverRead(_ deliver: @escaping (SQLiteError?) -> Void) {
        let now: SQLiteError?? = locked {
            if let failure { return .some(failure) }
            if committing <= durable { return .some(nil) }
            readWaiters.append((committing, deliver))
            return .none
        }
        if case let .some(error) = now { deliver(error) }
    }

    // MARK: The thread

    /// Opens the WAL descriptor (the file exists once a connection has opened
    /// the database in WAL mode) and syncs the directory once.
    func openWAL() throws(SQLiteError) {
        walDescriptor = try Self.openWALDescriptor(walPath)
        let directory = openReadOnly(directoryPath)
        if directory >= 0 {
            _ = fsync(directory)
            closeDescriptor(directory)
        }
    }

    private static func openWALDescriptor(_ path: String) throws(SQLiteError) -> Int32 {
        let fd = openReadOnly(path)
        guard fd >= 0 else {
            throw SQLiteError(code: 10 /* SQLITE_IOERR */, message: "cannot open the WAL for syncing (errno \(errno))", context: path)
        }
        return fd
    }

    /// fdatasync of the WAL, after checking that the path still names our file.
    private func syncWAL() -> SQLiteError? {
        var mine = stat()
        var current = stat()
        if fstat(walDescriptor, &mine) != 0 || stat(walPath, &current) != 0
            || mine.st_ino != current.st_ino || mine.st_dev != current.st_dev || mine.st_nlink == 0
        {
            // Not expected while the store is open; never sync a file that is no longer the WAL.
            closeDescriptor(walDescriptor)
            walDescriptor = -1
            do throws(SQLiteError) { try openWAL() } catch { return error }
        }
        guard fdatasync(walDescriptor) == 0 else {
            return SQLiteError(
                code: 10, extendedCode: 10 | (4 << 8) /* SQLITE_IOERR_FSYNC */,
                message: "fdatasync of the WAL failed (errno \(errno))", context: walPath)
        }
        return nil
    }

    /// The thread's loop: take everything queued, one fsync if any of it needs
    /// one, deliver in order, release the readers waiting for those epochs.
    func run() {
        while true {
            let (items, closed): ([Item], Bool) = locked {
                while queue.isEmpty && !isClosed { monitor.wait() }
                defer { queue = [] }
                monitor.broadcast()  // room for the writer
                return (queue, isClosed && queue.isEmpty)
            }
            if closed { break }
            onTaken()
            var error = locked { failure }
            if error == nil, items.contains(where: \.needsSync) {
                let start = sqliteMonotonicNanoseconds()
                if let hook = locked({ syncHook }), let injected = hook() {
                    error = injected
                } else {
                    error = syncWAL()
                }
                let elapsed = sqliteMonotonicNanoseconds() - start
                locked {
                    syncs += 1
                    syncNanoseconds += elapsed
                }
            }
            let epoch = items.map(\.epoch).max() ?? 0
            let released: [(SQLiteError?) -> Void] = locked {
                if let error {
                    failure = failure ?? error
                    defer { readWaiters = [] }
                    return readWaiters.map(\.deliver)
                }
                durable = max(durable, epoch)
                let ready = readWaiters.filter { $0.epoch <= durable }.map(\.deliver)
                readWaiters.removeAll { $0.epoch <= durable }
                return ready
            }
            for item in items { item.deliver(error.map { .failure($0) } ?? .success(())) }
            for deliver in released { deliver(error) }
        }
        if walDescriptor >= 0 {
            closeDescriptor(walDescriptor)
            walDescriptor = -1
        }
        locked {
            isFinished = true
            monitor.broadcast()
        }
    }

    /// After ``close()``: blocks until the thread has delivered everything and exited its loop.
    func waitUntilFinished() {
        locked {
            while !isFinished { monitor.wait() }
        }
    }
}

/// File-scope wrappers: inside the class, `open` and `close` name its methods.
private func openReadOnly(_ path: String) -> Int32 { open(path, O_RDONLY | O_CLOEXEC) }
private func closeDescriptor(_ fd: Int32) { _ = close(fd) }
