import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// Whether this node should be sent traffic, as `GET /readyz` reports it.
///
/// A reason rather than a bare flag: an operator reading a failing probe (or
/// `curl /readyz`) learns which part is not ready without reading the logs.
public enum Readiness: Sendable, Equatable {
    case ready
    case notReady(String)
}

/// What `GET /readyz` asks. The server parts feed it; the ops server only reads it,
/// so tests can drive readiness without a store or a listener.
public protocol ReadinessSource: Sendable {
    func readiness() async -> Readiness
    /// What `GET /healthz` asks: whether the process still works at all (a store that failed
    /// for good does not, until a restart). Alive unless a source says otherwise.
    func liveness() -> Readiness
}

extension ReadinessSource {
    public func liveness() -> Readiness { .ready }
}

/// The readiness of a serving node: the RPC listener is bound, the store answers
/// a cheap read, and graceful shutdown has not begun.
///
/// Draining is checked first and needs no I/O: once shutdown begins the answer
/// is 503 at once, so a load balancer stops sending new connections while the
/// RPC server still finishes the calls it has.
public final class ServingReadiness: ReadinessSource {
    /// A cheap read through the store's normal read path; throws when the store
    /// cannot answer (closed, a SQLite store poisoned by a failed fsync, PostgreSQL unreachable).
    public typealias Probe = @Sendable () async throws -> Void

    private struct State {
        var listening = false
        var draining = false
    }

    /// The last store probe's answer, and the probe under way: `/readyz` runs at
    /// most one probe per ``probeEvery``, however often it is asked.
    private struct ProbeCache {
        var checkedAt: Duration?
        var failure: String?
        var running: Task<String?, Never>?
    }

    private let state = NIOLockedValueBox(State())
    private let cache = NIOLockedValueBox(ProbeCache())
    private let storeProbe: Probe?
    private let storeFailure: (@Sendable () -> String?)?
    private let probeTimeout: Duration
    private let probeEvery: Duration
    private let uptime: @Sendable () -> Duration

    /// - Parameters:
    ///   - storeProbe: nil when there is nothing to probe (tests, a setup without a store).
    ///   - probeTimeout: a store that does not answer within it is reported not
    ///     ready: a probe that hangs would otherwise hang the load balancer's
    ///     check, which then times out without saying why.
    ///   - probeEvery: an answer younger than this is given again without a new
    ///     probe: a client hammering `/readyz` does not become store load.
    ///   - uptime: the monotonic clock; tests pass one they move.
    ///   - storeFailure: the store's failure that only a restart recovers, if any: `/healthz` fails with it.
    public init(
        storeProbe: Probe?, probeTimeout: Duration = .seconds(2), probeEvery: Duration = .seconds(1),
        uptime: @escaping @Sendable () -> Duration = { .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds)) },
        storeFailure: (@Sendable () -> String?)? = nil
    ) {
        self.storeProbe = storeProbe
        self.storeFailure = storeFailure
        self.probeTimeout = probeTimeout
        self.probeEvery = probeEvery
        self.uptime = uptime
    }

    /// The RPC listener is bound: the node can take connections.
    public func listenerBound() {
        state.withLockedValue { $0.listening = true }
    }

    /// Graceful shutdown began: from now on `/readyz` answers 503.
    public func beginDraining() {
        state.withLockedValue { $0.draining = true }
    }

    public var isDraining: Bool { state.withLockedValue { $0.draining } }

    public func liveness() -> Readiness {
        if let failure = storeFailure?() { return .notReady("store: \(failure)") }
        return .ready
    }

    public func readiness() async -> Readiness {
        let current = state.withLockedValue { $0 }
        if case let .notReady(reason) = liveness() { return .notReady(reason) }
        if current.draining { return .notReady("draining") }
        if !current.listening { return .notReady("RPC listener not bound yet") }
        if let storeProbe, let failure = await storeFailure(storeProbe) {
            return .notReady("store: \(failure)")
        }
        return .ready
    }

    /// The store probe's answer: the cached one while it is younger than ``probeEvery``, else
    /// the answer of the probe under way, or of a new one (one at a time).
    private func storeFailure(_ probe: @escaping Probe) async -> String? {
        enum Next {
            case cached(String?)
            case wait(Task<String?, Never>)
        }
        let now = uptime()
        let next: Next = cache.withLockedValue { cache in
            if let at = cache.checkedAt, now - at < probeEvery { return .cached(cache.failure) }
            if let running = cache.running { return .wait(running) }
            let timeout = probeTimeout
            let task = Task { await Self.run(probe, timeout: timeout) }
            cache.running = task
            return .wait(task)
        }
        switch next {
        case let .cached(failure):
            return failure
        case let .wait(task):
            let failure = await task.value
            let at = uptime()
            cache.withLockedValue { cache in
                cache.running = nil
                cache.checkedAt = at
                cache.failure = failure
            }
            return failure
        }
    }

    /// Runs `probe`, answering its failure or a timeout, whichever comes first.
    /// The probe is not awaited past the timeout: an EventLoopFuture-based read
    /// does not stop when its task is cancelled, and the answer must not wait for it.
    private static func run(_ probe: @escaping Probe, timeout: Duration) async -> String? {
        let pending = NIOLockedValueBox<CheckedContinuation<String?, Never>?>(nil)
        let finish: @Sendable (String?) -> Void = { answer in
            pending.withLockedValue { continuation in
                defer { continuation = nil }
                return continuation
            }?.resume(returning: answer)
        }
        return await withCheckedContinuation { continuation in
            pending.withLockedValue { $0 = continuation }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                finish("no answer within \(timeout)")
            }
            Task {
                do {
                    try await probe()
                    finish(nil)
                } catch {
                    finish("\(error)")
                }
                timer.cancel()
            }
        }
    }

    /// A service to list LAST in the `ServiceGroup`: graceful shutdown runs the
    /// services down in reverse order, so this one hears of it before the RPC
    /// server starts its drain, marks the node draining and ends.
    public var drainSignal: some Service { DrainSignal(readiness: self) }
}

/// See ``ServingReadiness/drainSignal``.
struct DrainSignal: Service {
    let readiness: ServingReadiness

    func run() async throws {
        // Throws CancellationError when the group is cancelled instead: the node is going away then too.
        try? await gracefulShutdown()
        readiness.beginDraining()
    }
}
