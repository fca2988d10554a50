import LiveRelayClient
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// What the calls of a soak add up to, from their replies alone: the caller's
/// side of the account, which the soak compares with the dispatcher's.
public struct SoakCalls: Sendable, Codable, Equatable {
    public var registrations = 0
    public var starts = 0
    public var updates = 0
    public var ends = 0
    public var lifecycles = 0
    /// The summaries of every Start, Update and End, added up.
    public var pushes = PushAccount()
    /// Start, Update and End replies that were not final or whose account did not add up.
    public var notAddingUp = 0
    /// Failed calls by "RPC STATUS": every call of a soak should succeed.
    public var errors: [String: Int] = [:]
    /// Calls the server turned away before doing anything (RESOURCE_EXHAUSTED: its
    /// admission bounds, or a full app queue), by reason, and sent again after the
    /// retry hint, as a client should: not failures, the figure of the server's backpressure.
    public var refusals: [String: Int] = [:]
    /// The first problems, word for word.
    public var samples: [String] = []
    /// From the first call to the last reply.
    public var seconds: Double = 0

    public init() {}

    public var errorCount: Int { errors.values.reduce(0, +) }

    static let maxSamples = 10

    mutating func note(_ problem: String) {
        if samples.count < Self.maxSamples { samples.append(problem) }
    }

    /// Why a Start, Update or End reply does not prove its call's account, or nil
    /// when it does: it must be final (`complete`, nothing `queued`), and every
    /// targeted push must have exactly one outcome, the failures by reason adding
    /// up to `failed`.
    public static func problem(with summary: DeliverySummary) -> String? {
        let outcomes =
            UInt64(summary.delivered) + UInt64(summary.failed) + UInt64(summary.pruned) + UInt64(summary.superseded)
            + UInt64(summary.expired)
        let byReason = summary.failures.reduce(UInt64(0)) { $0 + UInt64($1.count) }
        var problems: [String] = []
        if !summary.complete || summary.queued != 0 {
            problems.append("not final (complete \(summary.complete), queued \(summary.queued))")
        }
        if outcomes != UInt64(summary.targeted) {
            problems.append(
                "targeted \(summary.targeted) != delivered \(summary.delivered) + failed \(summary.failed) + pruned \(summary.pruned)"
                    + " + superseded \(summary.superseded) + expired \(summary.expired)")
        }
        if byReason != UInt64(summary.failed) { problems.append("failures by reason add up to \(byReason), not \(summary.failed)") }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }
}

/// Runs a ``SoakPlan`` against a server through `LiveRelayClient`: `activitiesInFlight`
/// workers each take the next lifecycle while the pushes targeted so far (counted
/// from replies, plus what the running lifecycles still plan) are short of the
/// target. Checks every Start, Update and End reply as it arrives; the server's side
/// of the account is the caller's to collect (``SoakServerFigures``).
public final class SoakDriver: Sendable {
    public let plan: SoakPlan
    private let client: LiveRelayClient
    private let timeout: Duration
    private let progress: (@Sendable (SoakCalls) -> Void)?
    private let state = NIOLockedValueBox(State())

    private struct State {
        var calls = SoakCalls()
        var next = 0
        /// Pushes targeted by answered calls plus those planned by calls not answered yet.
        var committed = 0
    }

    /// Registrations of one lifecycle in flight at once.
    static let registrationConcurrency = 16
    /// Sends of one call refused by admission before it counts as failed.
    static let maxRefusals = 200

    /// - Parameters:
    ///   - client: where the server is; the driver sets the connection count and the timeout.
    ///   - progress: called every 5 s with the figures so far.
    public init(
        plan: SoakPlan, client: LiveRelayClient.Configuration, eventLoopGroup: any EventLoopGroup, logger: Logger,
        progress: (@Sendable (SoakCalls) -> Void)? = nil
    ) {
        self.plan = plan
        self.timeout = .nanoseconds(Int64(plan.callTimeoutSeconds * 1e9))
        var configuration = client
        configuration.connections = 4
        configuration.defaultTimeout = timeout
        self.client = LiveRelayClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
        self.progress = progress
    }

    /// Every lifecycle to the end, every call answered; then the client shuts down.
    public func run() async -> SoakCalls {
        let started = ContinuousClock.now
        let ticker = Task { [progress, state] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(5))
                if !Task.isCancelled { progress?(state.withLockedValue { $0.calls }) }
            }
        }
        await withTaskGroup(of: Void.self) { workers in
            for _ in 0..<plan.activitiesInFlight {
                workers.addTask {
                    while let n = self.claim() { await self.lifecycle(n) }
                }
            }
        }
        ticker.cancel()
        await client.shutdown()
        let elapsed = ContinuousClock.now - started
        return state.withLockedValue { state in
            state.calls.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            return state.calls
        }
    }

    /// The next lifecycle, while the target is not reached. A worker that finds the
    /// target reached stops; the last one to finish looks again, so prunes that
    /// shrank the running lifecycles' fan-outs cannot leave the run short. Never
    /// more than ``SoakPlan/lifecycleBound``: a server that fails every call must
    /// not keep the run going forever.
    private func claim() -> Int? {
        state.withLockedValue { state in
            guard state.committed < plan.targetPushes, state.next < plan.lifecycleBound else { return nil }
            defer { state.next += 1 }
            state.committed += plan.plannedPushes(state.next)
            return state.next
        }
    }

    private func lifecycle(_ n: Int) async {
        let registrations =
            (0..<plan.startTokens).map { plan.registerStartToken(n, $0) } + (0..<plan.tokens(n)).map { plan.registerUpdateToken(n, $0) }
        await forEach(registrations.indices, concurrency: Self.registrationConcurrency) { i in
            do {
                _ = try await self.admitted("RegisterToken") { try await $0.registerToken(registrations[i], timeout: $1) }
                self.state.withLockedValue { $0.calls.registrations += 1 }
            } catch {
                self.failed("RegisterToken", error, lifecycle: n, planned: 0)
            }
        }
        let fanOut = plan.tokens(n)
        await activityCall("StartActivity", lifecycle: n, planned: plan.startTokens) { client, timeout in
            try await client.startActivity(self.plan.start(n), timeout: timeout).summary
        }
        await forEach(1..<(plan.updates + 1), concurrency: plan.updatesInFlight(n)) { step in
            await self.activityCall("UpdateActivity", lifecycle: n, planned: fanOut) { client, timeout in
                try await client.updateActivity(self.plan.update(n, step: step), timeout: timeout).summary
            }
        }
        await activityCall("EndActivity", lifecycle: n, planned: fanOut) { client, timeout in
            try await client.endActivity(self.plan.end(n), timeout: timeout).summary
        }
        state.withLockedValue { $0.calls.lifecycles += 1 }
    }

    /// One Start, Update or End: its reply's account is checked and added up, and
    /// what it targeted replaces what it planned in the running total.
    private func activityCall(
        _ rpc: String, lifecycle n: Int, planned: Int,
        _ call: @Sendable (LiveRelayClient, Duration) async throws -> DeliverySummary?
    ) async {
        do {
            let summary = try await admitted(rpc) { try await call($0, $1) } ?? DeliverySummary()
            let problem = SoakCalls.problem(with: summary)
            state.withLockedValue { state in
                switch rpc {
                case "StartActivity": state.calls.starts += 1
                case "UpdateActivity": state.calls.updates += 1
                default: state.calls.ends += 1
                }
                state.calls.pushes.add(summary)
                state.committed += Int(summary.targeted) - planned
                if let problem {
                    state.calls.notAddingUp += 1
                    state.calls.note("\(rpc) of \(plan.activityID(n)): \(problem)")
                }
            }
        } catch {
            failed(rpc, error, lifecycle: n, planned: planned)
        }
    }

    /// Runs `call`, sending it again after the retry hint while the server refuses it
    /// with RESOURCE_EXHAUSTED (a refused call has no effect: nothing was stored).
    private func admitted<T: Sendable>(
        _ rpc: String, _ call: @Sendable (LiveRelayClient, Duration) async throws -> T
    ) async throws -> T {
        var refusals = 0
        while true {
            do {
                return try await call(client, timeout)
            } catch let error as LiveRelayClientError where error.status == .resourceExhausted && refusals < Self.maxRefusals {
                refusals += 1
                let reason = error.details.reason.isEmpty ? "unspecified" : error.details.reason
                state.withLockedValue { $0.calls.refusals["\(rpc) \(reason)", default: 0] += 1 }
                let hint = Int64(error.details.retryAfterMS)
                try? await Task.sleep(for: .milliseconds(min(max(hint, 5), 1_000)))
            }
        }
    }

    private func failed(_ rpc: String, _ error: any Error, lifecycle n: Int, planned: Int) {
        let status = (error as? LiveRelayClientError).map { "\($0.status)" } ?? "\(type(of: error))"
        state.withLockedValue { state in
            state.calls.errors["\(rpc) \(status)", default: 0] += 1
            state.committed -= planned
            state.calls.note("\(rpc) of \(plan.activityID(n)): \(error)")
        }
    }

    /// Runs `body` for every element, at most `concurrency` at once.
    private func forEach<C: Collection & Sendable>(
        _ elements: C, concurrency: Int, _ body: @escaping @Sendable (C.Element) async -> Void
    ) async where C.Element: Sendable {
        await withTaskGroup(of: Void.self) { group in
            var iterator = elements.makeIterator()
            for _ in 0..<concurrency {
                guard let element = iterator.next() else { break }
                group.addTask { await body(element) }
            }
            while await group.next() != nil {
                if let element = iterator.next() { group.addTask { await body(element) } }
            }
        }
    }
}
