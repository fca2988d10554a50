#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex that spins briefly before it sleeps: glibc's adaptive pthread mutex
/// (`PTHREAD_MUTEX_ADAPTIVE_NP`; a plain mutex elsewhere).
///
/// The in-memory store plans and applies every mutation under a lock (then
/// one for the whole state; now its app's, ``AppShards``), held for a few
/// microseconds, and every event loop takes it. With `NIOLock` (a
/// plain pthread mutex) a loop that found it taken went to sleep in the kernel
/// at once: in `bench --mix register` on 2 cores, 15% of the server's CPU was
/// `futex` waits and wakes, nearly all of them for this lock. Spinning first
/// catches the holder's release in user space. (Swift's `Mutex` spins too, but
/// needs macOS 15, above this package's floor.)
final class AdaptiveLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() {
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if canImport(Glibc)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        #endif
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0, "pthread_mutex_init failed (\(status))")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// For holds that do not nest in one scope (the memory stores' every-app
    /// hold takes a lock per app); pair each with ``unlock()``.
    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
}
