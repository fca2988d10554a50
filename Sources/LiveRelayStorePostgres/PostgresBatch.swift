import LiveRelayDomain
import LiveRelayStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// One queued apply, type-erased: `plan` evaluates the mutation against the
/// batch's reader and returns its writes and how to complete its future once
/// the commit is known.
struct PostgresJob: Sendable {
    var plan: @Sendable (PostgresStateReader) -> PlannedJob
    /// Fails the future without a plan (the store gave up on the batch).
    var fail: @Sendable (any Error) -> Void
}

struct PlannedJob {
    var writes: [StoreWrite]
    /// `.success` once the batch committed (the future then gets the plan's
    /// outcome or refusal); `.failure` with the store's error otherwise.
    var complete: @Sendable (Result<Void, any Error>) -> Void
}

/// A lane's queue: `push` from any thread, `take` from the lane's task.
final class PostgresJobQueue: @unchecked Sendable {
    private let lock = NIOLock()
    private var jobs = CircularBuffer<PostgresJob>()
    private var waiter: CheckedContinuation<[PostgresJob]?, Never>?
    private var closed = false

    var isClosed: Bool { lock.withLock { closed } }

    /// False once closed. A waiting lane (its queue is empty) gets the job at once.
    func push(_ job: PostgresJob) -> Bool {
        let (accepted, waiter): (Bool, CheckedContinuation<[PostgresJob]?, Never>?) = lock.withLock {
            if closed { return (false, nil) }
            if let waiter = self.waiter {
                self.waiter = nil
                return (true, waiter)
            }
            jobs.append(job)
            return (true, nil)
        }
        waiter?.resume(returning: [job])
        return accepted
    }

    private func drain(max: Int) -> [PostgresJob] {
        let n = min(max, jobs.count)
        var batch: [PostgresJob] = []
        batch.reserveCapacity(n)
        for _ in 0..<n { batch.append(jobs.removeFirst()) }
        return batch
    }

    /// Waits for work; nil once closed and drained.
    func take(max: Int) async -> [PostgresJob]? {
        await withCheckedContinuation { (continuation: CheckedContinuation<[PostgresJob]?, Never>) in
            let ready: [PostgresJob]?? = lock.withLock {
                if !jobs.isEmpty { return .some(drain(max: max)) }
                if closed { return .some(nil) }
                waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Refuses new jobs; queued ones still run.
    func close() {
        let waiter: CheckedContinuation<[PostgresJob]?, Never>? = lock.withLock {
            closed = true
            defer { self.waiter = nil }
            return self.waiter
        }
        waiter?.resume(returning: nil)
    }
}

/// Runs one lane's batches: one SERIALIZABLE transaction per batch, retried
/// when it loses a race (see ``PostgresActivityStore``).
struct PostgresBatchRunner: Sendable {
    let client: PostgresClient
    let configuration: PostgresStoreConfiguration
    let logger: Logger
    let counters: NIOLockedValueBox<PostgresActivityStore.Statistics>
    /// The database's clock offset, for the leases the batch writes and compares.
    let clock: PostgresClock
    /// Told of the apps whose feeds a committed batch appended to.
    let eventCommits: EventCommitSignal
    /// Tells the other nodes.
    let eventRelay: PostgresEventRelay
    let metrics = StoreMetrics(store: "postgres")

    enum Failure: Equatable {
        /// Lost a race with another transaction: planning again is safe and will see the winner.
        case conflict
        /// A unique index refused a write: a race (another node took the key or
        /// slot first; planning again sees it) or a plan that is itself wrong
        /// (it repeats alone, and then fails).
        case uniqueViolation
        /// The connection failed, or a statement timed out, before COMMIT was
        /// sent: nothing committed, a new connection may retry.
        case connectionLost
        /// The connection failed, or COMMIT timed out, after COMMIT was sent:
        /// the batch may or may not have committed, so it must not be retried
        /// (it could apply twice) nor reported as failed (it may have applied).
        case outcomeUnknown
        /// The server refused a statement (not a race): some plan's writes are at fault.
        case server
        /// Anything else.
        case other
    }

    static func classify(_ error: any Error, commitSent: Bool) -> Failure {
        if error is DeadlineExceeded { return commitSent ? .outcomeUnknown : .connectionLost }
        guard let error = error as? PSQLError else { return .other }
        if let state = error.serverInfo?[.sqlState] {
            switch state {
            case "40001", "40P01": return .conflict
            case "23505": return .uniqueViolation
            case _ where state.hasPrefix("08") || state.hasPrefix("57"): return commitSent ? .outcomeUnknown : .connectionLost
            default: return .server
            }
        }
        switch error.code {
        case .serverClosedConnection, .connectionError, .uncleanShutdown, .clientClosedConnection:
            return commitSent ? .outcomeUnknown : .connectionLost
        default:
            return .other
        }
    }

    /// The error the batch's futures fail with: the caller sees an unknown
    /// outcome as such, and a timeout (ours, or the server's statement or lock
    /// timeout, SQLSTATE class 57) or a lost connection as the store being
    /// unavailable, never as an internal error: a resend may succeed.
    static func callerError(_ error: any Error, _ failure: Failure) -> any Error {
        switch failure {
        case .outcomeUnknown: ActivityStoreError.outcomeUnknown(String(describing: error))
        case .connectionLost: ActivityStoreError.unavailable(String(describing: error))
        case _ where error is DeadlineExceeded: ActivityStoreError.unavailable(String(describing: error))
        default: error
        }
    }

    /// Whether COMMIT has been sent: after that, a lost connection leaves the outcome unknown.
    private final class Progress: @unchecked Sendable {
        var commitSent = false
    }

    func run(_ batch: [PostgresJob]) async {
        counters.withLockedValue { $0.largestBatch = max($0.largestBatch, batch.count) }
        let attempts = batch.count == 1 ? configuration.soloAttempts : configuration.batchAttempts
        var attempt = 0
        var reconnects = 0
        var uniqueViolations = 0
        while true {
            attempt += 1
            let progress = Progress()
            let started = ContinuousClock.now
            do {
                let planned = try await client.withConnection { [configuration, logger, clock] connection in
                    let session = PostgresSession(
                        connection, timeout: configuration.statementTimeout, logger: logger, clockOffset: clock.offsetMilliseconds)
                    return try await transaction(batch, on: session, progress: progress)
                }
                counters.withLockedValue {
                    $0.commits += 1
                    $0.mutations += batch.count
                }
                let took = (ContinuousClock.now - started).components
                metrics.committed(calls: batch.count, nanoseconds: took.seconds * 1_000_000_000 + took.attoseconds / 1_000_000_000)
                signalEvents(of: planned)
                for job in planned { job.complete(.success(())) }
                return
            } catch {
                let failure = Self.classify(error, commitSent: progress.commitSent)
                logger.debug(
                    "batch failed",
                    metadata: [
                        "size": "\(batch.count)", "attempt": "\(attempt)", "failure": "\(failure)", "error": "\(String(reflecting: error))",
                    ])
                if error is DeadlineExceeded { counters.withLockedValue { $0.timeouts += 1 } }
                switch failure {
                case .conflict, .uniqueViolation:
                    counters.withLockedValue { $0.conflicts += 1 }
                    if failure == .uniqueViolation, batch.count == 1 {
                        uniqueViolations += 1
                        if uniqueViolations >= 3 { return fail(batch, error) }
                    }
                    if attempt < attempts {
                        await PostgresRetry.wait(PostgresRetry.batch, after: attempt)
                        continue
                    }
                    if batch.count > 1 { return await runAlone(batch) }
                    return fail(batch, ActivityStoreError.unavailable(PostgresStoreError.contention("\(attempts) attempts").description))
                case .connectionLost where reconnects < 3:
                    reconnects += 1
                    attempt -= 1
                    counters.withLockedValue { $0.reconnects += 1 }
                    await PostgresRetry.wait(PostgresRetry.batch, after: reconnects)
                    continue
                case .server where batch.count > 1:
                    // One plan's writes were refused: only its future should fail.
                    return await runAlone(batch)
                case .outcomeUnknown:
                    logger.warning(
                        "a batch's COMMIT got no answer: its calls may or may not have taken effect",
                        metadata: ["size": "\(batch.count)", "error": "\(error)"])
                    return fail(batch, Self.callerError(error, failure))
                default:
                    return fail(batch, Self.callerError(error, failure))
                }
            }
        }
    }

    /// After COMMIT returned (durable): the readers of the feeds the batch appended to, here and on other nodes.
    private func signalEvents(of planned: [PlannedJob]) {
        let appIDs = planned.reduce(into: Set<String>()) { $0.formUnion($1.writes.fedAppIDs) }
        eventCommits.committed(appIDs: appIDs)
        eventRelay.committed(appIDs: appIDs)
    }

    private func runAlone(_ batch: [PostgresJob]) async {
        for job in batch { await run([job]) }
    }

    private func fail(_ batch: [PostgresJob], _ error: any Error) {
        for job in batch { job.fail(error) }
    }

    /// Plans every job against the transaction (fetching what the plans miss,
    /// all plans at once, until none misses), writes the net changes, commits.
    /// Every statement runs in `session`, so none of them can hang the lane.
    private func transaction(_ batch: [PostgresJob], on session: PostgresSession, progress: Progress) async throws -> [PlannedJob] {
        try await session.query("BEGIN ISOLATION LEVEL SERIALIZABLE")
        do {
            let reader = PostgresStateReader()
            var planned: [PlannedJob] = []
            planned.reserveCapacity(batch.count)
            while planned.count < batch.count {
                var misses = Set<ReadKey>()
                // After a plan that missed, later plans run only to learn what
                // they will read (they cannot see its writes yet): their results are dropped.
                var speculative = false
                for job in batch[planned.count...] {
                    reader.beginPlan()
                    let plan = job.plan(reader)
                    if !reader.misses.isEmpty {
                        misses.formUnion(reader.misses)
                        speculative = true
                    } else if !speculative {
                        planned.append(plan)
                        for write in plan.writes { reader.overlay.apply(write) }
                    }
                }
                if planned.count < batch.count {
                    reader.fill(try await PostgresTables.fetch(misses, on: session))
                }
            }
            if !reader.overlay.isEmpty { try await reader.overlay.write(on: session) }
            progress.commitSent = true
            try await session.query("COMMIT")
            return planned
        } catch {
            // A session closed after a timeout has no transaction left to roll back.
            if !progress.commitSent, !session.isAbandoned { _ = try? await session.query("ROLLBACK") }
            throw error
        }
    }
}
