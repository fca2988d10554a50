import LiveRelayDomain
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The journaled store's durability stage: appends each mutation's writes to
/// the current journal file and tells callers only once they are on stable
/// storage.
///
/// ## Group commit
/// Mutations append their record to an in-memory buffer under their app's
/// lock (so each app's records are in the order its state changed in) and go
/// on; this stage's thread takes everything buffered, writes it with one
/// `write`, one `fdatasync`, and only then releases the callers waiting for
/// those records, in one task per event loop. Everything that arrives during
/// a sync goes out with the next one, so the sync rate stays bounded by the
/// disk while a registration costs the bytes of its record, not a page.
///
/// ## What a caller waits for
/// Every answer waits for everything appended before it was decided, not only
/// for its own record: a refusal, a replay, a read all saw a state that may
/// contain records still in the buffer, and must not be told to anyone while
/// a crash could still take it back (the SQLite store gates its answers the
/// same way, ``SQLiteDurability``).
///
/// ## Failure
/// A failed `write` or `fdatasync` leaves the memory ahead of the disk (and
/// Linux may report the next sync as clean), so it poisons the stage: the
/// waiting callers and every later one get ``JournalIOError``; the process
/// must restart, and recovery keeps exactly what reached the disk.
final class JournalAppender: @unchecked Sendable {
    /// A caller waiting for `sequence` to be durable.
    struct Waiter: Sendable {
        var sequence: UInt64
        var deliver: @Sendable (Result<Void, any Error>) -> Void
    }

    /// The waiters of one event loop, in the state's order; `deliver` runs on `loop`.
    /// Kept per loop (a server has a few) so that a round hands each loop its
    /// ready waiters in one task without sorting them, and without a retain of
    /// the loop per waiter (the loop's reference count is touched by every call
    /// on its own thread). Under a registration load the per-waiter retains had
    /// shown as 7% of the server's samples in `swift_retain` on this thread;
    /// this took them off the profile, though calls/s and CPU per call did not
    /// move beyond the machine's noise (docs/BENCHMARKS.md, "The journaled store").
    struct LoopWaiters: Sendable {
        var id: ObjectIdentifier
        var loop: any EventLoop
        var waiters: [Waiter]
    }

    private let monitor = SQLiteMonitor()
    private let directory: String
    /// Records appended and not yet handed to the thread.
    private var pending = JournalEncoder()
    /// Where in `pending` the next journal file starts (a compaction's rotation).
    private var rotation: (offset: Int, number: UInt64)?
    private var appended: UInt64 = 0
    private var durable: UInt64 = 0
    private var waiting: [LoopWaiters] = []
    private var failure: JournalIOError?
    private var isClosed = false
    private var isFinished = false
    /// The journal file being appended to.
    private(set) var number: UInt64
    private var descriptor: Int32
    /// Bytes in journal files since the last rotation: what a recovery replays on top of the newest snapshot.
    private var bytesSinceRotation: Int

    /// Told (on the stage's thread, without its lock) how many journal bytes a recovery would replay.
    var onFlushed: @Sendable (_ bytesSinceRotation: Int) -> Void = { _ in }

    /// `liverelay_store_commit_duration` and `_batch_size` with `store="journal"`: one
    /// write-and-sync round and the records it carried.
    private let metrics = StoreMetrics(store: "journal")

    /// Tests only: the next round fails with this instead of writing (a disk
    /// error, as `write` or `fdatasync` would report it). Under the lock.
    private var injectedFailure: JournalIOError?
    func failNextRoundForTesting(_ failure: JournalIOError) { locked { injectedFailure = failure } }

    /// Totals for ``JournaledActivityStore/Statistics``; under the lock.
    private var syncs = 0
    private var syncNanoseconds: UInt64 = 0
    private var bytesWritten = 0

    /// Creates `journal-number` (it must not exist) and syncs the directory.
    init(directory: String, number: UInt64, bytesSinceRotation: Int) throws {
        self.directory = directory
        self.number = number
        self.bytesSinceRotation = bytesSinceRotation
        self.descriptor = try Self.create(directory: directory, number: number)
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    private static func create(directory: String, number: UInt64) throws(JournalIOError) -> Int32 {
        let path = directory + "/" + JournalFile.name(.journal, number)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw JournalIOError("cannot create \(path): \(JournalFile.errnoText())") }
        let header = JournalFile.header(.journal, number)
        let failed = header.withUnsafeBytes { JournalFile.writeAll(fd, $0) } ?? (fdatasync(fd) == 0 ? nil : errno)
        if let failed {
            close(fd)
            throw JournalIOError("cannot write the header of \(path): \(JournalFile.errnoText(failed))")
        }
        if let failed = JournalFile.syncDirectory(directory) {
            close(fd)
            throw JournalIOError("cannot sync \(directory): \(JournalFile.errnoText(failed))")
        }
        return fd
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T { try monitor.locked(body) }

    // MARK: The store's side (called with the app's lock held, so in the order its state changed)

    /// Appends one mutation's writes (none: nothing appended) and returns how
    /// its caller is answered: at once if everything appended so far is
    /// already durable (or the stage has failed), or nil, and `deliver` will
    /// run on `eventLoop` once it is.
    func commit(
        _ writes: [StoreWrite], on eventLoop: any EventLoop, deliver: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> Result<Void, any Error>? {
        locked {
            if let failure { return .failure(failure) }
            if !writes.isEmpty {
                JournalFile.appendRecord(to: &pending) { JournalCodec.encode(writes, into: &$0) }
                appended += 1
                monitor.signal()
            }
            if appended <= durable { return .success(()) }
            let id = ObjectIdentifier(eventLoop)
            let waiter = Waiter(sequence: appended, deliver: deliver)
            if let i = waiting.firstIndex(where: { $0.id == id }) {
                waiting[i].waiters.append(waiter)
            } else {
                waiting.append(LoopWaiters(id: id, loop: eventLoop, waiters: [waiter]))
            }
            return nil
        }
    }

    /// The stage's failure, if it has failed.
    var currentFailure: JournalIOError? { locked { failure } }

    /// Starts the next journal file at this point of the order; returns its
    /// number. Records appended from now on go to it. One at a time: the
    /// store starts no compaction while one runs.
    func rotate() -> UInt64 {
        locked {
            precondition(rotation == nil, "a rotation is already pending")
            let next = number + 1
            rotation = (pending.bytes.count, next)
            monitor.signal()
            return next
        }
    }

    /// Blocks until the rotation to `next` has created its file (or the stage failed or closed); true if it did.
    func waitForRotation(to next: UInt64) -> Bool {
        locked {
            while number < next && failure == nil && !isFinished { monitor.wait() }
            return number >= next
        }
    }

    /// No more appends: the thread writes and syncs what is buffered, delivers, and exits.
    func finish() {
        locked {
            isClosed = true
            monitor.broadcast()
        }
    }

    func waitUntilFinished() {
        locked {
            while !isFinished { monitor.wait() }
        }
    }

    var totals: (syncs: Int, syncNanoseconds: UInt64, bytes: Int) { locked { (syncs, syncNanoseconds, bytesWritten) } }

    // MARK: The thread

    func run() {
        var spare: [UInt8] = []
        while true {
            let taken: (bytes: [UInt8], rotation: (offset: Int, number: UInt64)?, sequence: UInt64)? = locked {
                while pending.bytes.isEmpty && rotation == nil && !isClosed { monitor.wait() }
                if isClosed && pending.bytes.isEmpty && rotation == nil { return nil }
                var bytes = spare
                swap(&bytes, &pending.bytes)
                defer { rotation = nil }
                return (bytes, rotation, appended)
            }
            guard var taken else { break }
            var error = locked {
                defer { injectedFailure = nil }
                return failure ?? injectedFailure
            }
            let start = sqliteMonotonicNanoseconds()
            if error == nil { error = write(taken.bytes, rotatingAt: taken.rotation) }
            let elapsed = sqliteMonotonicNanoseconds() - start
            let records = Int(taken.sequence - locked { durable })
            if records > 0, error == nil { metrics.committed(calls: records, nanoseconds: Int64(elapsed)) }
            let (released, sinceRotation): ([LoopWaiters], Int) = locked {
                syncs += 1
                syncNanoseconds += elapsed
                bytesWritten += taken.bytes.count
                if let rotation = taken.rotation, error == nil {
                    bytesSinceRotation = taken.bytes.count - rotation.offset
                } else {
                    bytesSinceRotation += taken.bytes.count
                }
                monitor.broadcast()  // a compaction waiting for its rotation
                if let error {
                    failure = failure ?? error
                    defer { waiting = [] }
                    return (waiting, bytesSinceRotation)
                }
                durable = taken.sequence
                return (takeReady(), bytesSinceRotation)
            }
            deliver(released, error.map { .failure($0) } ?? .success(()))
            taken.bytes.removeAll(keepingCapacity: true)
            spare = taken.bytes
            if error == nil { onFlushed(sinceRotation) }
        }
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        locked {
            isFinished = true
            monitor.broadcast()
        }
    }

    /// Under the lock: the waiters `durable` covers, per loop. Each loop's
    /// waiters joined in the state's order, so its ready ones are a prefix,
    /// usually all of them: those are moved out whole, not copied.
    private func takeReady() -> [LoopWaiters] {
        var ready: [LoopWaiters] = []
        for i in waiting.indices {
            let count = waiting[i].waiters.prefix { $0.sequence <= durable }.count
            guard count > 0 else { continue }
            var group = LoopWaiters(id: waiting[i].id, loop: waiting[i].loop, waiters: [])
            if count == waiting[i].waiters.count {
                swap(&group.waiters, &waiting[i].waiters)
            } else {
                group.waiters = Array(waiting[i].waiters[..<count])
                waiting[i].waiters.removeFirst(count)
            }
            ready.append(group)
        }
        return ready
    }

    /// One task per event loop for all of its waiters.
    private func deliver(_ released: [LoopWaiters], _ result: Result<Void, any Error>) {
        for group in released where !group.waiters.isEmpty {
            let waiters = group.waiters
            group.loop.execute {
                for waiter in waiters { waiter.deliver(result) }
            }
        }
    }

    /// Writes `bytes` to the journal, switching files at the rotation, and syncs.
    private func write(_ bytes: [UInt8], rotatingAt rotation: (offset: Int, number: UInt64)?) -> JournalIOError? {
        bytes.withUnsafeBytes { all -> JournalIOError? in
            let cut = rotation?.offset ?? all.count
            if cut > 0, let failed = JournalFile.writeAll(descriptor, UnsafeRawBufferPointer(rebasing: all[..<cut])) {
                return JournalIOError("write to \(JournalFile.name(.journal, number)) failed: \(JournalFile.errnoText(failed))")
            }
            if let rotation {
                if fdatasync(descriptor) != 0 {
                    return JournalIOError("fdatasync of \(JournalFile.name(.journal, number)) failed: \(JournalFile.errnoText())")
                }
                do throws(JournalIOError) {
                    let next = try Self.create(directory: directory, number: rotation.number)
                    close(descriptor)
                    descriptor = next
                    locked { number = rotation.number }
                } catch {
                    return error
                }
            }
            if cut < all.count,
                let failed = JournalFile.writeAll(descriptor, UnsafeRawBufferPointer(rebasing: all[cut...]))
            {
                return JournalIOError("write to \(JournalFile.name(.journal, number)) failed: \(JournalFile.errnoText(failed))")
            }
            if cut < all.count || rotation == nil, fdatasync(descriptor) != 0 {
                return JournalIOError("fdatasync of \(JournalFile.name(.journal, number)) failed: \(JournalFile.errnoText())")
            }
            return nil
        }
    }
}

/// The journal could not be written or synced: nothing the store answered
/// after it is durable, so every call fails until the process restarts.
public struct JournalIOError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
