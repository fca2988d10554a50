/// The writer thread's loop: batches in, commits out to ``SQLiteDurability``.
///
/// Per batch: wait for a RESTART checkpoint if the WAL is at its bound,
/// `BEGIN`, plan and write the jobs taken; in pipelined mode, while the
/// durability thread is still syncing the previous commit, keep taking the
/// jobs that arrive into the same transaction (they would otherwise wait a
/// whole extra cycle), then announce the epoch, `COMMIT`, count, and hand the
/// batch to the durability thread, which acknowledges it after its fsync.
final class SQLiteWriter {
    let session: SQLiteWriteSession
    let writes: SQLiteJobQueue<WriteJob>
    let durability: SQLiteDurability
    let checkpointer: SQLiteCheckpointer?
    let counters: SQLiteCounters
    let maxBatch: Int
    let pipelined: Bool

    init(
        session: SQLiteWriteSession, writes: SQLiteJobQueue<WriteJob>, durability: SQLiteDurability,
        checkpointer: SQLiteCheckpointer?, counters: SQLiteCounters, maxBatch: Int, pipelined: Bool
    ) {
        self.session = session
        self.writes = writes
        self.durability = durability
        self.checkpointer = checkpointer
        self.counters = counters
        self.maxBatch = maxBatch
        self.pipelined = pipelined
    }

    func run() {
        let wal = SQLiteWALFrames()
        if checkpointer != nil { wal.install(on: session.db) }
        while let batch = writes.take(max: maxBatch) {
            if let failure = durability.currentFailure {
                // A failed fsync: nothing after it can be acknowledged (see SQLiteDurability).
                for job in batch { job.fail(failure) }
                continue
            }
            var restartWait: UInt64 = 0
            if let checkpointer, wal.frames >= checkpointer.hardFrames {
                let start = sqliteMonotonicNanoseconds()
                checkpointer.restartAndWait()
                restartWait = sqliteMonotonicNanoseconds() - start
                wal.frames = 0  // the next commit's hook reports the restarted (or not) WAL
            }
            let start = sqliteMonotonicNanoseconds()
            guard session.begin(batch) else { continue }
            session.execute(batch)
            var executed = sqliteMonotonicNanoseconds() - start
            if pipelined && session.wrote {
                while !durability.hasRoom && session.jobCount < maxBatch && !session.isAborted {
                    guard let more = writes.take(max: maxBatch - session.jobCount, orWhenPoked: true) else { break }
                    if more.isEmpty { continue }
                    let t = sqliteMonotonicNanoseconds()
                    session.execute(more)
                    executed += sqliteMonotonicNanoseconds() - t
                }
                durability.waitForRoom()
            }
            let commitStart = sqliteMonotonicNanoseconds()
            let wrote = session.wrote
            let epoch = wrote ? durability.beginCommit() : durability.lastEpoch
            let (committedWrites, deliver) = session.commit()
            let end = sqliteMonotonicNanoseconds()
            counters.count(
                batch: session.jobCount, committedWrites: committedWrites, execute: executed,
                wait: commitStart - start - executed, commit: end - commitStart, restartWait: restartWait,
                walFrames: wal.frames)
            durability.submit(SQLiteDurability.Item(epoch: epoch, needsSync: pipelined && wrote, deliver: deliver))
            if let checkpointer, committedWrites { checkpointer.walHas(frames: wal.frames) }
        }
        // Everything queued before close() is committed: sync and deliver it, then stop the helpers.
        durability.close()
        durability.waitUntilFinished()
        checkpointer?.close()
        if checkpointer != nil { wal.uninstall(from: session.db) }
        session.db.close()
    }
}
