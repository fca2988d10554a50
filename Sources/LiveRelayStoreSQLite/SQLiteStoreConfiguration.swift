import LiveRelayStore
import NIOConcurrencyHelpers

extension SQLiteActivityStore {
    /// How an acknowledged write is made durable; both survive SIGKILL and power loss.
    public enum Durability: Sendable, Hashable {
        /// `synchronous=FULL`: SQLite fsyncs the WAL inside every `COMMIT`, on the
        /// writer thread; the writer plans nothing while it waits.
        case fullSync
        /// `synchronous=NORMAL` plus an `fdatasync` of the WAL on the durability
        /// thread before anything is acknowledged or read (``SQLiteDurability``):
        /// the writer plans and executes the next batch during the fsync.
        case pipelined
    }

    public struct Configuration: Sendable {
        /// Reader threads (and read connections) for the lookups outside mutations.
        public var readers: Int
        /// The most mutations committed in one transaction.
        public var maxBatch: Int
        /// How long a connection waits for a lock held by another process before SQLITE_BUSY.
        public var busyTimeoutMilliseconds: Int32
        /// SQLite's page cache per connection, in KiB.
        public var cacheKiB: Int
        public var durability: Durability
        /// The WAL size (in frames, one page each) at which the checkpoint thread
        /// runs a PASSIVE checkpoint; 0 keeps SQLite's automatic checkpoint
        /// (1,000 frames, on the writer thread inside `COMMIT`).
        public var checkpointFrames: Int
        /// The WAL's bound in frames: there the writer waits for a RESTART
        /// checkpoint before its next transaction (``SQLiteCheckpointer``).
        public var walLimitFrames: Int
        /// `page_size` for a new file (SQLite cannot change it on a file in WAL
        /// mode; an existing file keeps its own, see ``SQLiteSchema``).
        public var pageSize: Int
        /// `mmap_size` for the read connections, in bytes (0: plain reads).
        public var readerMmapBytes: Int

        public init(
            readers: Int = 2, maxBatch: Int = 4096, busyTimeoutMilliseconds: Int32 = 5000, cacheKiB: Int = 16 * 1024,
            durability: Durability = .pipelined, checkpointFrames: Int = 8192, walLimitFrames: Int = 65536,
            pageSize: Int = 4096, readerMmapBytes: Int = 0
        ) {
            self.readers = max(1, readers)
            self.maxBatch = max(1, maxBatch)
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
            self.cacheKiB = cacheKiB
            self.durability = durability
            self.checkpointFrames = max(0, checkpointFrames)
            self.walLimitFrames = max(self.checkpointFrames, walLimitFrames)
            self.pageSize = pageSize
            self.readerMmapBytes = max(0, readerMmapBytes)
        }
    }

    /// Counters for tests and diagnostics.
    public struct Statistics: Hashable, Sendable {
        /// Transactions the writer committed that wrote something.
        public var commits: Int
        /// Transactions (batches) the writer ran, with or without writes.
        public var batches: Int
        /// Mutations planned (successful or refused).
        public var mutations: Int
        /// The largest batch so far.
        public var largestBatch: Int
        /// `fdatasync`s of the WAL by the durability thread (pipelined mode; in
        /// full-sync mode SQLite syncs inside each commit instead).
        public var syncs: Int = 0
        /// Checkpoints run by the checkpoint thread (PASSIVE and RESTART).
        public var checkpoints: Int = 0
        /// Times the WAL reached ``Configuration/walLimitFrames`` and the writer
        /// waited for a RESTART checkpoint.
        public var walRestarts: Int = 0
        /// The largest WAL (in frames) seen after a commit (0 without the checkpoint thread).
        public var largestWALFrames: Int = 0
        /// Writer time in BEGIN and planning/executing the jobs.
        public var executeSeconds: Double = 0
        /// Writer time in COMMIT (including SQLite's fsync in full-sync mode).
        public var commitSeconds: Double = 0
        /// Writer time waiting for the durability thread (the previous sync) before a commit.
        public var waitSeconds: Double = 0
        /// Writer time waiting for RESTART checkpoints.
        public var restartWaitSeconds: Double = 0
        /// Durability-thread time in `fdatasync`.
        public var syncSeconds: Double = 0
        /// Checkpoint-thread time in checkpoints.
        public var checkpointSeconds: Double = 0
    }
}

/// The writer's counters, shared with its thread (which must not hold the store).
final class SQLiteCounters: @unchecked Sendable {
    private let lock = NIOLock()
    private var value = SQLiteActivityStore.Statistics(commits: 0, batches: 0, mutations: 0, largestBatch: 0)
    private let metrics = StoreMetrics(store: "sqlite")

    /// One batch: its size, whether it committed writes, and the writer's time split in nanoseconds.
    func count(batch: Int, committedWrites: Bool, execute: UInt64, wait: UInt64, commit: UInt64, restartWait: UInt64, walFrames: Int) {
        if committedWrites { metrics.committed(calls: batch, nanoseconds: Int64(execute + wait + commit)) }
        lock.withLock {
            value.batches += 1
            value.mutations += batch
            if committedWrites { value.commits += 1 }
            value.largestBatch = max(value.largestBatch, batch)
            value.executeSeconds += Double(execute) / 1e9
            value.waitSeconds += Double(wait) / 1e9
            value.commitSeconds += Double(commit) / 1e9
            value.restartWaitSeconds += Double(restartWait) / 1e9
            value.largestWALFrames = max(value.largestWALFrames, walFrames)
        }
    }

    /// The writer's counters plus the durability and checkpoint threads' own.
    func snapshot(durability: SQLiteDurability, checkpointer: SQLiteCheckpointer?) -> SQLiteActivityStore.Statistics {
        var stats = lock.withLock { value }
        let (syncs, syncNanoseconds) = durability.syncTotals
        stats.syncs = syncs
        stats.syncSeconds = Double(syncNanoseconds) / 1e9
        if let checkpointer {
            let totals = checkpointer.totals
            stats.checkpoints = totals.checkpoints
            stats.walRestarts = totals.restarts
            stats.checkpointSeconds = Double(totals.nanoseconds) / 1e9
        }
        return stats
    }
}
