import Foundation
import LiveRelayMessages
import LiveRelayService
import LiveRelayWire
import NIOCore

/// A call the test service has been given and not yet answered.
struct HeldCall: @unchecked Sendable {
    var id: RequestID
    var payload: [UInt8]
    var deadline: NIODeadline?
    var cancellation: CancellationFlag
    var promise: EventLoopPromise<PingReply>
}

/// Holds every Ping until the test releases it, so tests control when work
/// finishes (deadlines, cancels, drains, backpressure). Other RPCs answer at once.
final class HoldingService: LiveRelayService, @unchecked Sendable {
    private let lock = NSLock()
    private var held: [HeldCall] = []
    private var _dispatched: [HeldCall] = []
    private var _maxHeld = 0
    /// With a value N: once N pings are held, they are all answered in reverse order.
    private let releaseInReverseAt: Int?
    private var autoRelease = false

    init(releaseInReverseAt: Int? = nil) {
        self.releaseInReverseAt = releaseInReverseAt
    }

    var dispatched: [HeldCall] { lock.withLock { _dispatched } }
    var heldCount: Int { lock.withLock { held.count } }
    var maxHeld: Int { lock.withLock { _maxHeld } }

    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        let promise = context.eventLoop.makePromise(of: PingReply.self)
        let call = HeldCall(
            id: context.requestID, payload: request.payload, deadline: context.deadline,
            cancellation: context.cancellation, promise: promise)
        let toRelease: [HeldCall] = lock.withLock {
            held.append(call)
            _dispatched.append(call)
            _maxHeld = max(_maxHeld, held.count)
            if autoRelease {
                defer { held.removeAll() }
                return held
            }
            if let n = releaseInReverseAt, held.count == n {
                defer { held.removeAll() }
                return held.reversed()
            }
            return []
        }
        if !toRelease.isEmpty {
            // After this call returns, so that every future (this one too) has its callback.
            context.eventLoop.execute {
                for call in toRelease { call.promise.succeed(PingReply(payload: call.payload)) }
            }
        }
        return promise.futureResult
    }

    /// From now on pings are answered as they arrive; the held ones are answered too.
    func setAutoRelease() {
        lock.withLock { autoRelease = true }
        releaseAll()
    }

    /// Answers every held ping (in arrival order), echoing its payload.
    func releaseAll() {
        let calls = lock.withLock {
            defer { held.removeAll() }
            return held
        }
        for call in calls { call.promise.succeed(PingReply(payload: call.payload)) }
    }

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        context.eventLoop.makeSucceededFuture(RegisterTokenReply(result: .created))
    }

    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        context.eventLoop.makeSucceededFuture(StartActivityReply())
    }

    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        context.eventLoop.makeSucceededFuture(UpdateActivityReply())
    }

    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        context.eventLoop.makeSucceededFuture(EndActivityReply())
    }
}

/// Fails in the ways a real service can: an RPCError (passed through) or any
/// other error (hidden behind INTERNAL), completed on another event loop.
struct FailingService: LiveRelayService {
    struct SecretInternalError: Error, CustomStringConvertible {
        var description: String { "database password is hunter2" }
    }

    let otherLoop: any EventLoop

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        otherLoop.makeFailedFuture(SecretInternalError())
    }

    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        otherLoop.makeFailedFuture(
            RPCError(.notFound, "no such app", details: ErrorDetails(reason: "UnknownApp")))
    }

    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        otherLoop.makeSucceededFuture(UpdateActivityReply())
    }

    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        context.fail(RPCError(.failedPrecondition, "activity has ended"))
    }

    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        otherLoop.makeSucceededFuture(PingReply(payload: request.payload, serverVersion: "other-loop"))
    }
}
