import CSQLite
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import NIOCore

/// The writer thread's connection and one transaction's worth of work.
///
/// A batch is `begin` (BEGIN IMMEDIATE), one or more `execute` calls (each job
/// plans against the transaction so far and writes its plan), then `commit`.
/// Nothing is told to callers here: `commit` returns how to deliver the batch's
/// results, which ``SQLiteDurability`` calls once the commit is durable. Keeping
/// execute and commit apart is what lets the writer keep adding jobs that arrive
/// while the previous commit is still being synced.
final class SQLiteWriteSession {
    let db: SQLiteConnection
    let tables: SQLiteTables
    let reader: SQLiteStateReader
    /// Whether the current transaction has written anything.
    private(set) var wrote = false
    /// Set when an error (I/O, disk full, out of memory) made SQLite roll back
    /// the whole transaction: the batch's earlier writes are gone, so every
    /// future of the batch fails with it and the rest of the batch does not run.
    private var aborted: SQLiteError?
    /// Completions grouped by event loop: one cross-thread `execute` per loop
    /// and batch, not one per future.
    private var completions: [ObjectIdentifier: (loop: any EventLoop, complete: [@Sendable (Result<Void, SQLiteError>) -> Void])] = [:]
    /// Jobs in the open transaction.
    private(set) var jobCount = 0
    /// Whether SQLite rolled the open transaction back (adding jobs is pointless).
    var isAborted: Bool { aborted != nil }
    /// Told, once a commit is durable, of the apps whose feeds it added events to.
    let eventCommits: EventCommitSignal
    /// The apps whose feeds the open transaction's plans added events to.
    private var fed: Set<String> = []

    init(db: SQLiteConnection, eventCommits: EventCommitSignal = EventCommitSignal()) {
        self.db = db
        self.eventCommits = eventCommits
        self.tables = SQLiteTables(db: db)
        self.reader = SQLiteStateReader(tables: tables)
    }

    /// Opens the batch's transaction; on failure fails `batch` (nothing was read) and returns false.
    func begin(_ batch: [WriteJob]) -> Bool {
        do throws(SQLiteError) {
            try db.run(SQLiteTables.SQL.begin)
        } catch {
            for job in batch { job.fail(error) }
            return false
        }
        wrote = false
        aborted = nil
        completions = [:]
        fed = []
        jobCount = 0
        return true
    }

    /// Plans and writes each job inside the open transaction.
    func execute(_ batch: [WriteJob]) {
        for job in batch {
            let complete = job.run(self)
            completions[ObjectIdentifier(job.eventLoop), default: (job.eventLoop, [])].complete.append(complete)
        }
        jobCount += batch.count
    }

    /// Commits (or ends the aborted transaction); returns whether anything was
    /// written and how to deliver every result once the durability of the
    /// commit is known (`durable`: the fsync's outcome, success when none was needed).
    func commit() -> (committedWrites: Bool, deliver: (_ durable: Result<Void, SQLiteError>) -> Void) {
        let commit: Result<Void, SQLiteError>
        if let aborted {
            commit = .failure(aborted)
        } else {
            do throws(SQLiteError) {
                try db.run(SQLiteTables.SQL.commit)
                commit = .success(())
            } catch {
                commit = .failure(error)
                // A failed COMMIT may leave the transaction open (e.g. SQLITE_BUSY); end it.
                if sqlite3_get_autocommit(db.handle) == 0 { try? db.run(SQLiteTables.SQL.rollback) }
            }
        }
        let groups = completions.values
        completions = [:]
        let committedWrites = wrote && commit.isSuccess
        let fed = self.fed
        self.fed = []
        return (
            committedWrites,
            { [eventCommits] durable in
                let outcome = commit.flatMap { durable }
                // Durable now: a reader woken by this reads what it was woken for.
                if outcome.isSuccess { eventCommits.committed(appIDs: fed) }
                for (loop, group) in groups {
                    loop.execute { for complete in group { complete(outcome) } }
                }
            }
        )
    }

    /// Plans `mutation` against the transaction so far and writes the plan in
    /// a savepoint: on any failure nothing of it stays.
    func plan<M: StoreMutation>(_ mutation: M, now: UnixTime) -> Result<M.Outcome, any Error> {
        if let aborted { return .failure(aborted) }
        reader.reset()
        let plan: MutationPlan<M.Outcome>
        do throws(DomainError) {
            plan = try mutation.plan(reader, now: now)
        } catch {
            if let failure = reader.failure { return .failure(checkAborted(failure)) }
            return .failure(error)
        }
        if let failure = reader.failure { return .failure(checkAborted(failure)) }
        guard !plan.writes.isEmpty else { return .success(plan.outcome) }
        if plan.writes.count == 1, SQLiteTables.isOneStatement(plan.writes[0]) {
            // One statement is atomic by itself (SQLite undoes a failed statement).
            do throws(SQLiteError) {
                try tables.write(plan.writes[0])
                wrote = true
                noteEvents(plan.writes)
                return .success(plan.outcome)
            } catch {
                return .failure(checkAborted(error))
            }
        }
        let written = perform { tables throws(SQLiteError) in
            for write in plan.writes { try tables.write(write) }
            return ((), true)
        }
        switch written {
        case .success:
            noteEvents(plan.writes)
            return .success(plan.outcome)
        case let .failure(error):
            return .failure(error)
        }
    }

    private func noteEvents(_ writes: [StoreWrite]) {
        fed.formUnion(writes.fedAppIDs)
    }

    /// Runs `body`, work that is not a mutation's plan (trimming the event
    /// feeds), inside the open transaction in a savepoint of its own: on any
    /// failure nothing of it stays. `body` answers its value and whether it wrote.
    func perform<T>(_ body: (SQLiteTables) throws(SQLiteError) -> (value: T, wrote: Bool)) -> Result<T, SQLiteError> {
        if let aborted { return .failure(aborted) }
        do throws(SQLiteError) {
            try db.run(SQLiteTables.SQL.savepoint)
        } catch {
            return .failure(checkAborted(error))
        }
        do throws(SQLiteError) {
            let (value, wroteSome) = try body(tables)
            try db.run(SQLiteTables.SQL.release)
            if wroteSome { wrote = true }
            return .success(value)
        } catch {
            _ = checkAborted(error)
            if aborted == nil {
                try? db.run(SQLiteTables.SQL.rollbackToSavepoint)
                try? db.run(SQLiteTables.SQL.release)
            }
            return .failure(error)
        }
    }

    /// Notes whether `error` ended the transaction (SQLite is back in autocommit).
    private func checkAborted(_ error: SQLiteError) -> SQLiteError {
        if aborted == nil, sqlite3_get_autocommit(db.handle) != 0 { aborted = error }
        return error
    }
}

extension Result {
    fileprivate var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
