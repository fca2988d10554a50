import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayStore
import LiveRelayTestSupport
import NIOConcurrencyHelpers
import NIOCore

/// RegisterToken refused by admission, through the same connection handler as
/// ``RPCWorkloads``: what a flooding app costs per call once it is over its share
/// (frame, request decode and validation, the admission decision, the refusal's
/// reply). The app's one admitted call is held by the store for the whole run, so
/// every measured call is refused `AppOverloaded`.
enum RefusalWorkload {
    static var all: [Workload] {
        [
            Workload(name: "rpc-register-token-refused", unit: "call", iterations: 5_000) { iterations in
                let service = ActivityService(
                    store: WriteHoldingStore(), clock: ManualClock(), logger: RPCWorkloads.quietLogger, sink: RecordingPushSink(),
                    admission: AdmissionGate(limits: AdmissionLimits(maxInFlightPerApp: 1, maxInFlight: 2)))
                return try RPCWorkloads.registerToken(service: service, iterations: iterations, expecting: .resourceExhausted)
            }
        ]
    }
}

/// A memory store whose writes never complete: the calls that reach it stay in flight.
final class WriteHoldingStore: MemoryReadsStore {
    let reads = InMemoryActivityStore()
    private let held = NIOLockedValueBox<[any Sendable]>([])

    func apply<M: StoreMutation>(_ mutation: M, now: UnixTime, on eventLoop: any EventLoop) -> EventLoopFuture<M.Outcome> {
        let promise = eventLoop.makePromise(of: M.Outcome.self)
        held.withLockedValue { $0.append(promise) }
        return promise.futureResult
    }

    func apply<M: StoreMutation>(
        _ mutation: M, now: UnixTime, on eventLoop: any EventLoop, then body: @escaping @Sendable (Result<M.Outcome, any Error>) -> Void
    ) {
        held.withLockedValue { $0.append(body) }
    }
}
