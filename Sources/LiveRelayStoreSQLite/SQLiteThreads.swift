import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A FIFO of jobs for dedicated threads, with a condition variable to wait on.
///
/// The writer takes everything queued at once (that is the group commit: all
/// the applies that arrived during the previous fsync go into the next
/// transaction); readers take one job each.
final class SQLiteJobQueue<Job>: @unchecked Sendable {
    private let monitor = SQLiteMonitor()
    private var jobs = CircularBuffer<Job>(initialCapacity: 64)
    private var isClosed = false
    /// Set by ``poke()``; makes a `take(max:orWhenPoked: true)` return early.
    private var poked = false

    init() {}

    /// Queues `job`; false once the queue is closed (the job will never run).
    func push(_ job: Job) -> Bool {
        monitor.lock()
        defer { monitor.unlock() }
        guard !isClosed else { return false }
        jobs.append(job)
        if jobs.count == 1 { monitor.signal() }
        return true
    }

    /// Waits for at least one job and takes up to `max`; nil once the queue is
    /// closed and drained (jobs queued before `close()` still run). With
    /// `orWhenPoked`, returns an empty array if ``poke()`` was called since the
    /// last such take (the writer waits for jobs *or* for the durability
    /// thread, whichever comes first, without a second condition variable).
    func take(max: Int, orWhenPoked: Bool = false) -> [Job]? {
        monitor.lock()
        defer { monitor.unlock() }
        while jobs.isEmpty {
            if isClosed { return nil }
            if orWhenPoked && poked {
                poked = false
                return []
            }
            monitor.wait()
        }
        let count = Swift.min(max, jobs.count)
        var taken: [Job] = []
        taken.reserveCapacity(count)
        for _ in 0..<count { taken.append(jobs.removeFirst()) }
        // More left (a reader pool, or a writer capped by `max`): wake another taker.
        if !jobs.isEmpty { monitor.signal() }
        return taken
    }

    /// Wakes a `take(max:orWhenPoked: true)` (or makes the next one return at once).
    func poke() {
        monitor.lock()
        poked = true
        monitor.broadcast()
        monitor.unlock()
    }

    /// Refuses new jobs and wakes every waiting thread so that each can drain and exit.
    func close() {
        monitor.lock()
        isClosed = true
        monitor.broadcast()
        monitor.unlock()
    }
}

/// Counts running store threads down to zero and then resumes whoever waits in `close()`.
final class SQLiteExitLatch: @unchecked Sendable {
    private let lock = NIOLock()
    private var running: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(count: Int) { running = count }

    func threadExited() {
        let resume: [CheckedContinuation<Void, Never>] = lock.withLock {
            running -= 1
            guard running == 0 else { return [] }
            defer { waiters = [] }
            return waiters
        }
        for waiter in resume { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done: Bool = lock.withLock {
                if running == 0 { return true }
                waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}

/// Starts a detached POSIX thread running `body` (`name` is for errors).
///
/// Plain threads rather than Dispatch or the Swift concurrency pool: the
/// store's threads block in fsync and in SQLite's busy handler, which must not
/// starve a shared pool (on Linux the concurrency pool runs on Dispatch).
func startSQLiteThread(name: String, _ body: @escaping @Sendable () -> Void) throws(SQLiteError) {
    final class Box {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let box = Unmanaged.passRetained(Box(name: name, body: body)).toOpaque()
    #if canImport(Glibc)
    var thread = pthread_t()
    #else
    var thread: pthread_t?
    #endif
    let rc = pthread_create(
        &thread, nil,
        { argument in
            let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
            nameCurrentThread(box.name)
            box.body()
            return nil
        }, box)
    guard rc == 0 else {
        Unmanaged<Box>.fromOpaque(box).release()
        throw SQLiteError(code: 1, message: "pthread_create failed (\(rc))", context: name)
    }
    #if canImport(Glibc)
    pthread_detach(thread)
    #else
    pthread_detach(thread!)
    #endif
}

/// Names the calling thread (`top -H`, `perf`, `/proc/PID/task/*/comm`), cut to the
/// kernel's 15 bytes; without it a thread inherits its creator's name, usually a
/// concurrency pool thread's, and the store's threads cannot be told apart.
private func nameCurrentThread(_ name: String) {
    #if canImport(Glibc)
    // pthread_setname_np does not import from Glibc; this is what it does on Linux.
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    #endif
}

/// CLOCK_MONOTONIC in nanoseconds, for the store's time counters.
func sqliteMonotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
