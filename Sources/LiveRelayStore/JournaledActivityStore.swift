import Dispatch
import LiveRelayAPNs
import LiveRelayDomain
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store of `liverelay serve --store journal`: the memory store's state
/// and speed, made durable by an append-only journal and periodic snapshots.
///
/// ## Why
/// The SQLite store writes every registration into random B-tree pages (the
/// token's key, its slot, its user), about 19.6 KB reaching the disk per
/// durable registration on the project's VM; that, not the code, held it
/// under 30,000 registrations/s (docs/BENCHMARKS.md, "Stores"). Here a
/// registration costs its journal record, about 200 bytes appended to one
/// file, and one `fdatasync` is shared by every call that arrived during the
/// previous one (``JournalAppender``). Reads never touch the disk.
///
/// ## What it costs
/// The whole state lives in memory (about 280 bytes per token, the memory
/// store's table), and it is a single-node store: several nodes share
/// PostgreSQL. Opening replays the newest snapshot and the journals after it.
///
/// ## Durability
/// An answer (success, refusal, replay, read) is given only once every write
/// it may have seen is synced, as the SQLite store does. The state is kept
/// per app, each app's behind its own lock (``AppShards``), and a call's
/// records are appended under its app's lock: each app's records are in the
/// order its state changed, and apps' records are independent of each other.
/// A snapshot is written from a copy of the state taken with every app's
/// lock held (a value copy: the live state then copies only the chunks it
/// writes) when the journals since the last one reach
/// ``Configuration/compactAfterBytes`` and the last snapshot's size, on a
/// thread of its own; the journals it replaces are deleted only once it
/// is synced and renamed into place (``JournalFile``, ``JournalRecovery``).
public final class JournaledActivityStore: InMemoryStateStore, @unchecked Sendable {
    public struct Configuration: Sendable {
        /// The store's own directory (created, owner-only).
        public var directory: String
        /// Journal bytes since the last snapshot before the next one is
        /// written (at least; the last snapshot's size when that is larger,
        /// so a recovery replays at most about twice the state).
        public var compactAfterBytes: Int

        public init(directory: String, compactAfterBytes: Int = 64 << 20) {
            self.directory = directory
            self.compactAfterBytes = compactAfterBytes
        }
    }

    /// What the store has done since it opened.
    public struct Statistics: Sendable {
        /// What opening found: the snapshot it started from, the journal records replayed, the tail cut off.
        public var openedFromSnapshot: UInt64
        public var recordsReplayed: Int
        public var tailBytesCut: Int
        public var openMilliseconds: Double
        /// `write` + `fdatasync` rounds of the journal, their total time, bytes appended.
        public var syncs: Int
        public var syncMilliseconds: Double
        public var journalBytes: Int
        public var snapshots: Int
        public var lastSnapshotBytes: Int
        public var lastSnapshotMilliseconds: Double
        /// The last snapshot that failed (the journal then keeps growing; the next compaction tries again).
        public var lastSnapshotError: String?
    }

    private let configuration: Configuration
    private let shards: AppShards
    private let appender: JournalAppender
    /// Guards the compaction's state below.
    private let lock = AdaptiveLock()
    /// Under `lock`.
    private var isClosed = false
    private var compacting = false
    private var lastSnapshotBytes: Int
    private var snapshots = 0
    private var lastSnapshotMilliseconds = 0.0
    private var lastSnapshotError: String?
    private let opened: (snapshot: UInt64, records: Int, cut: Int, milliseconds: Double)
    /// `<directory>/lock`, held (`flock`) while the store is open.
    private let lockDescriptor: Int32

    /// Two processes appending to one journal would interleave their records
    /// and each replay only its own: the second is refused. The kernel drops
    /// the lock when its holder dies, so a crashed server's restart gets it.
    private static func lockExclusively(_ directory: String) throws -> Int32 {
        let path = directory + "/lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw JournalOpenError("cannot open \(path): \(JournalFile.errnoText())") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            closeFile(fd)
            throw JournalOpenError(
                code == EWOULDBLOCK
                    ? "\(directory) is open in another store (another server on the same data directory?)"
                    : "cannot lock \(path): \(JournalFile.errnoText(code))")
        }
        return fd
    }

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        let directory = configuration.directory
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw JournalOpenError("cannot create \(directory): \(JournalFile.errnoText())")
        }
        let lockFile = try Self.lockExclusively(directory)
        lockDescriptor = lockFile
        let start = sqliteMonotonicNanoseconds()
        let recovery: JournalRecovery
        do {
            recovery = try JournalRecovery(directory: directory)
        } catch {
            closeFile(lockFile)
            throw error
        }
        shards = AppShards(recovery.states)
        lastSnapshotBytes = recovery.snapshotBytes
        do {
            appender = try JournalAppender(
                directory: directory, number: recovery.lastJournal + 1, bytesSinceRotation: recovery.journalBytes)
        } catch {
            closeFile(lockFile)
            throw error
        }
        opened = (
            recovery.snapshot, recovery.recordsReplayed, recovery.cutBytes,
            Double(sqliteMonotonicNanoseconds() - start) / 1e6
        )
        appender.onFlushed = { [weak self] bytes in self?.compactIfDue(journalBytes: bytes) }
        let appender = self.appender
        do {
            try startSQLiteThread(name: "journal") { appender.run() }
        } catch {
            closeFile(lockFile)
            throw JournalOpenError("cannot start the journal's thread: \(error)")
        }
        compactIfDue(journalBytes: recovery.journalBytes)
    }

    public var statistics: Statistics {
        let totals = appender.totals
        return lock.withLock {
            Statistics(
                openedFromSnapshot: opened.snapshot, recordsReplayed: opened.records, tailBytesCut: opened.cut,
                openMilliseconds: opened.milliseconds, syncs: totals.syncs, syncMilliseconds: Double(totals.syncNanoseconds) / 1e6,
                journalBytes: totals.bytes, snapshots: snapshots, lastSnapshotBytes: lastSnapshotBytes,
                lastSnapshotMilliseconds: lastSnapshotMilliseconds, lastSnapshotError: lastSnapshotError)
        }
    }

    /// Tests only: the journal's next round fails as a disk error would.
    func failNextJournalRoundForTesting(_ failure: JournalIOError) { appender.failNextRoundForTesting(failure) }

    /// One state holding every app's, for tests and diagnostics.
    public var snapshot: InMemoryState { AppShards.merged(shards.copies() ?? [:]) }

    /// The memory store's: a pass holds an app's lock for its part.
    public var sweepLimit: Int { 1_000 }

    // MARK: Mutations

    public func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        let promise = eventLoop.makePromise(of: M.Outcome.self)
        apply(mutation, now: now, on: eventLoop) { promise.completeWith($0) }
        return promise.futureResult
    }

    @_specialize(where M == RegisterToken)
    public func apply<M: StoreMutation>(
        _ mutation: M, now: UnixTime, on eventLoop: any EventLoop,
        then body: @escaping @Sendable (Result<M.Outcome, any Error>) -> Void
    ) {
        apply(mutation, scope: mutation.scope, now: now, on: eventLoop, then: body)
    }

    @_specialize(where M == RegisterToken)
    private func apply<M: StoreMutation>(
        _ mutation: M, scope: MutationScope, now: UnixTime, on eventLoop: any EventLoop,
        then body: @escaping @Sendable (Result<M.Outcome, any Error>) -> Void
    ) {
        if let parts = shards.parts(of: mutation, scope: scope) {
            let join = PartsJoin(parts.count) { result in
                let answered = result.map { AppShards.partsOutcome(of: M.self) }
                if eventLoop.inEventLoop { body(answered) } else { eventLoop.execute { body(answered) } }
            }
            for (appID, part) in parts {
                apply(part, scope: .app(appID), now: now, on: eventLoop) { join.done($0.map { _ in () }) }
            }
            return
        }
        @Sendable func commit(_ writes: [StoreWrite], _ decided: Result<M.Outcome, any Error>) -> Result<M.Outcome, any Error>? {
            let durable = appender.commit(writes, on: eventLoop) { synced in body(synced.flatMap { decided }) }
            return durable.map { $0.flatMap { decided } }
        }
        let answered: Result<M.Outcome, any Error>??
        // A poll is applied app by app, each app's records appended under its lock, and is
        // answered once everything appended up to its last part is synced (an idle poll as a
        // read is: once what it saw is).
        if let polled = shards.pollAppByApp(mutation, scope: scope, now: now, commit: { _ = appender.commit($0, on: eventLoop) { _ in } }) {
            if case .failure = polled {
                answered = polled
            } else {
                answered = commit([], polled)
            }
        } else {
            switch shards.applyOrQueue(mutation, scope: scope, now: now, commit: commit) {
            case let .applied(applied)?:
                answered = applied
            case nil:
                answered = nil
            case let .queued(shard)?:
                // A call that reads many tokens, or one behind it: planned and appended on the app's queue.
                shard.queue.async { [shards] in
                    let applied = shards.applyQueued(mutation, in: shard, now: now, commit: commit)
                    guard let answered = applied ?? .failure(ActivityStoreError.closed) else { return }
                    eventLoop.execute { body(answered) }
                }
                return
            }
        }
        guard let answered = answered ?? .failure(ActivityStoreError.closed) else { return }
        if eventLoop.inEventLoop {
            body(answered)
        } else {
            eventLoop.execute { body(answered) }
        }
    }

    // MARK: Reads

    /// `body` on the app's state under its lock; answered once what it saw is durable.
    public func read<T: Sendable>(app appID: String, on eventLoop: any EventLoop, _ body: (InMemoryState) -> T) -> EventLoopFuture<T> {
        let promise = eventLoop.makePromise(of: T.self)
        let answered: Result<T, any Error>?? = shards.read(appID) { state in
            let value = body(state)
            let durable = appender.commit([], on: eventLoop) { synced in promise.completeWith(synced.map { value }) }
            return durable.map { $0.map { value } }
        }
        if let answered = answered ?? .failure(ActivityStoreError.closed) { promise.completeWith(answered) }
        return promise.futureResult
    }

    /// As the memory store counts (in slices, off the event loop). Not gated on
    /// the journal: quotas read it every few seconds, and a count a moment
    /// ahead of the disk decides nothing durable.
    public func usage(of appIDs: [String], now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<[String: AppUsage]> {
        InMemoryActivityStore.usage(of: appIDs, now: now, on: eventLoop, in: shards)
    }

    /// Syncs and answers everything appended, waits for a running snapshot, and stops the journal's thread.
    public func close() async throws {
        guard shards.close() else { return }
        lock.withLock { isClosed = true }
        let appender = self.appender
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                while self.lock.withLock({ self.compacting }) { usleep(1_000) }
                appender.finish()
                appender.waitUntilFinished()
                _ = flock(self.lockDescriptor, LOCK_UN)
                closeFile(self.lockDescriptor)
                done.resume()
            }
        }
        if let failure = appender.currentFailure { throw failure }
    }

    // MARK: Snapshots

    private func compactIfDue(journalBytes: Int) {
        let due = lock.withLock {
            guard !isClosed, !compacting, journalBytes >= max(configuration.compactAfterBytes, lastSnapshotBytes) else { return false }
            compacting = true
            return true
        }
        guard due else { return }
        // Every app's lock held: no call is between its state's change and its journal record.
        let started = shards.withAllApps { all in (all.states, appender.rotate()) }
        if started == nil { lock.withLock { compacting = false } }
        guard let (copy, number) = started else { return }
        do {
            try startSQLiteThread(name: "journal snapshot") { self.writeSnapshot(copy, number: number) }
        } catch {
            lock.withLock {
                compacting = false
                lastSnapshotError = "\(error)"
            }
        }
    }

    /// Writes `copy` as `snapshot-number` once `journal-number` exists, then deletes what it replaces.
    private func writeSnapshot(_ copy: [String: InMemoryState], number: UInt64) {
        let start = sqliteMonotonicNanoseconds()
        var failure: String?
        var bytes = 0
        if appender.waitForRotation(to: number) {
            do {
                bytes = try JournalSnapshotWriter.write(copy.values, directory: configuration.directory, number: number)
            } catch {
                failure = "\(error)"
            }
        } else {
            failure = appender.currentFailure.map { "\($0)" } ?? "the store closed before the snapshot's journal was created"
        }
        let elapsed = Double(sqliteMonotonicNanoseconds() - start) / 1e6
        lock.withLock {
            compacting = false
            lastSnapshotError = failure
            if failure == nil {
                snapshots += 1
                lastSnapshotBytes = bytes
                lastSnapshotMilliseconds = elapsed
            }
        }
    }
}

/// Answers a call applied in parts (``SplitsByApp``, ``AppliesToEachApp``) once every part is
/// answered: with the first failure, or success.
private final class PartsJoin: @unchecked Sendable {
    private let lock = AdaptiveLock()
    private var left: Int
    private var failure: (any Error)?
    private let body: (Result<Void, any Error>) -> Void

    init(_ parts: Int, _ body: @escaping (Result<Void, any Error>) -> Void) {
        left = parts
        self.body = body
        if parts == 0 { body(.success(())) }
    }

    func done(_ result: Result<Void, any Error>) {
        let finished: Result<Void, any Error>? = lock.withLock {
            if case let .failure(error) = result, failure == nil { failure = error }
            left -= 1
            guard left == 0 else { return nil }
            return failure.map { .failure($0) } ?? .success(())
        }
        if let finished { body(finished) }
    }
}

/// File scope: inside the store, `close` names its method.
private func closeFile(_ fd: Int32) { _ = close(fd) }
