import Foundation
import LiveRelayBench
import LiveRelayClient
import LiveRelayComposition
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayServer
import LiveRelayService
import LiveRelayTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

/// A real `RPCServer` over TLS on 127.0.0.1 in this process, so the harness is tested through
/// the same client, TLS and framing it drives in production, with a service the test controls.
final class InProcessServer: Sendable {
    /// Generating a key pair is the slow part: one certificate for the whole suite.
    static let certificate: (certificatePEM: String, privateKeyPEM: String) = {
        try! SelfSignedCertificate.generate(commonName: "localhost", subjectAltNames: ["localhost", "127.0.0.1"])
    }()
    static let key = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: Set(LiveRelayMethod.allCases))

    let group: ServiceGroup
    let task: Task<Void, any Error>
    let port: Int

    private init(group: ServiceGroup, task: Task<Void, any Error>, port: Int) {
        self.group = group
        self.task = task
        self.port = port
    }

    static func start(_ service: any LiveRelayService) async throws -> InProcessServer {
        var logger = Logger(label: "bench.tests.server")
        logger.logLevel = .critical
        var description = ServerDescription()
        description.port = 0
        description.tls = try TLSContext(
            configuration: .makeServerConfiguration(
                certificateChain: .string(certificate.certificatePEM), privateKey: .string(certificate.privateKeyPEM)))
        description.drainTime = .seconds(5)
        description.calls = .custom(service)
        description.seedKeys = [try RegisteredAPIKey(seed: key.record)]
        description.logger = logger
        let built = try await ServerBuilder.build(description)
        let group = built.serviceGroup(gracefulShutdownSignals: [], logger: logger)
        let task = Task { try await group.run() }
        let address = try await built.server.boundAddress
        return InProcessServer(group: group, task: task, port: address.port!)
    }

    var clientConfiguration: LiveRelayClient.Configuration {
        LiveRelayClient.Configuration(
            host: "127.0.0.1", port: port,
            tls: TLSConfiguration(
                trustRoots: .pem(.string(Self.certificate.certificatePEM)), certificateVerification: .fullVerification,
                serverHostname: "127.0.0.1"),
            apiKey: Self.key.plaintext)
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }

    /// Runs `scenario` against `service` and stops the server, whatever happens.
    static func run(_ scenario: Scenario, against service: any LiveRelayService, endReserve: Int? = nil) async throws -> BenchReport {
        let server = try await start(service)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var logger = Logger(label: "bench.tests.client")
        logger.logLevel = .critical
        let runner = BenchRunner(
            scenario: scenario, client: server.clientConfiguration, eventLoopGroup: group, logger: logger, endReserve: endReserve)
        let result: Result<BenchReport, any Error>
        do { result = .success(try await runner.run()) } catch { result = .failure(error) }
        try await server.stop()
        try await group.shutdownGracefully()
        return try result.get()
    }
}

/// Answers every call at once, except that the `stallAt`-th call starts a stall of
/// `stallSeconds`: it and every call arriving before the stall ends are answered together
/// when it ends, as a server blocked by a long GC pause or a stuck disk would.
final class StallingService: LiveRelayService, @unchecked Sendable {
    private let lock = NIOLock()
    private let stallAt: Int
    private let stallNanos: UInt64
    private var calls = 0
    private var stallEnds: UInt64?
    private var held: [EventLoopPromise<PingReply>] = []

    init(stallAt: Int, stallSeconds: Double) {
        self.stallAt = stallAt
        self.stallNanos = UInt64(stallSeconds * 1e9)
    }

    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        let now = NIODeadline.now().uptimeNanoseconds
        let promise = context.eventLoop.makePromise(of: PingReply.self)
        let (hold, startStall): (Bool, Bool) = lock.withLock {
            calls += 1
            if calls == stallAt {
                stallEnds = now + stallNanos
                held.append(promise)
                return (true, true)
            }
            if let end = stallEnds, now < end {
                held.append(promise)
                return (true, false)
            }
            return (false, false)
        }
        if startStall {
            context.eventLoop.scheduleTask(in: .nanoseconds(Int64(stallNanos))) {
                let release = self.lock.withLock {
                    defer { self.held.removeAll() }
                    return self.held
                }
                for p in release { p.succeed(PingReply()) }
            }
        }
        if !hold { promise.succeed(PingReply()) }
        return promise.futureResult
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

/// Every RPC answers at once with a fixed outcome: Start NOT_FOUND, End FAILED_PRECONDITION,
/// the rest OK; so the counts per status of a run are known in advance. Counts what it saw.
final class FixedOutcomeService: LiveRelayService, @unchecked Sendable {
    private let lock = NIOLock()
    private var seen = [String: Int]()

    func count(_ rpc: String) -> Int { lock.withLock { seen[rpc] ?? 0 } }
    private func note(_ rpc: String) { lock.withLock { seen[rpc, default: 0] += 1 } }

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        note("RegisterToken")
        return context.eventLoop.makeSucceededFuture(RegisterTokenReply(result: .created))
    }
    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        note("StartActivity")
        return context.fail(RPCError(.notFound, "no such app"))
    }
    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        note("UpdateActivity")
        return context.eventLoop.makeSucceededFuture(UpdateActivityReply())
    }
    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        note("EndActivity")
        return context.fail(RPCError(.failedPrecondition, "activity has ended"))
    }
    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        note("Ping")
        return context.eventLoop.makeSucceededFuture(PingReply())
    }
}

/// Answers Start, Update and End with a final delivery summary whose outcomes depend on
/// whether the caller asked to wait: asked, 5 targeted = 3 delivered + 1 failed
/// (BadTopic) + 1 pruned; not asked, 5 still queued. Counts the calls that asked.
final class DeliveringService: LiveRelayService, @unchecked Sendable {
    private let lock = NIOLock()
    private var waiting = 0
    var callsThatWaited: Int { lock.withLock { waiting } }

    private func summary(_ wait: Bool?) -> DeliverySummary {
        guard wait == true else { return DeliverySummary(targeted: 5, queued: 5) }
        lock.withLock { waiting += 1 }
        return DeliverySummary(
            targeted: 5, delivered: 3, failed: 1, failures: [FailureCount(reason: "BadTopic", count: 1)],
            pruned: 1, complete: true)
    }

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        context.eventLoop.makeSucceededFuture(RegisterTokenReply(result: .created))
    }
    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        context.eventLoop.makeSucceededFuture(StartActivityReply(summary: summary(request.waitForDelivery)))
    }
    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        context.eventLoop.makeSucceededFuture(UpdateActivityReply(summary: summary(request.waitForDelivery)))
    }
    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        context.eventLoop.makeSucceededFuture(EndActivityReply(summary: summary(request.waitForDelivery)))
    }
    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        context.eventLoop.makeSucceededFuture(PingReply())
    }
}
