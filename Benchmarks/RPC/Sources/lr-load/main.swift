// Closed-loop load against the null service (`liverelay serve` with "null_service") through LiveRelayClient's low-level
// `call(_:payload:timeout:)`: C clients of one connection each, and D callers
// per connection, each sending its next RegisterToken as soon as the previous
// reply arrives (D requests pipelined per connection). Replies complete on the
// connection's event loop; no Swift-concurrency hop per call.
//
//   lr-load --port P --api-key K --ca cert.pem [-c C] [-d D] [--warmup 3] [--duration 10] [--server-pid PID] [--threads 1]
//
// The request is RequestFixture.bytes, exactly the bytes grpc-load sends.
import BenchSupport
import LiveRelayClient
import LiveRelayMessages
import Logging
import NIOCore
import NIOPosix

let options = LoadOptions(arguments: Array(CommandLine.arguments.dropFirst()))
guard !options.apiKey.isEmpty else { fail("--api-key is required") }
let group = MultiThreadedEventLoopGroup(numberOfThreads: options.threads)
var logger = Logger(label: "lr-load")
logger.logLevel = .warning
let payload = ByteBuffer(bytes: RequestFixture.bytes)
let timeout = TimeAmount.milliseconds(Int64(options.timeoutMilliseconds))

// The server decodes and validates with protobuf-c: check here that the fixture passes.
do {
    let request = try RegisterTokenRequest(serializedBytes: payload)
    try request.validate()
} catch {
    fail("the request fixture does not decode or validate as a LiveRelay RegisterTokenRequest: \(error)")
}

let clients: [LiveRelayClient] = (0..<options.connections).map { _ in
    LiveRelayClient(
        configuration: .init(
            host: options.host,
            port: options.port,
            tls: .trusting(caFile: options.caFile),
            apiKey: options.apiKey,
            clientName: "lr-load",
            connections: 1,
            defaultTimeout: Duration(timeout),
            maxPendingCalls: Swift.max(10_000, options.depth * 2)
        ),
        eventLoopGroup: group,
        logger: logger
    )
}

say(
    "lr-load: \(options.connections) connection(s) x \(options.depth) in flight, warm-up \(options.warmupSeconds) s, "
        + "measure \(options.durationSeconds) s; request \(RequestFixture.bytes.count) bytes, fnv \(RequestFixture.fingerprint)")

/// One closed-loop caller: its calls are strictly sequential, so its stats need no lock.
final class Caller: @unchecked Sendable {
    let client: LiveRelayClient
    let stats = CallerStats()
    let phase: PhaseFlag
    let done: EventLoopPromise<Void>

    init(client: LiveRelayClient, phase: PhaseFlag, done: EventLoopPromise<Void>) {
        self.client = client
        self.phase = phase
        self.done = done
    }

    func issue() {
        let start = monotonicNanos()
        let future = client.call(.registerToken, payload: payload, timeout: timeout, idempotent: true)
        future.whenComplete { result in
            let phase = self.phase.current
            switch result {
            case .success:
                self.stats.finished(startNanos: start, ok: true, phase: phase)
                if phase == .stopping { self.done.succeed() } else { self.issue() }
            case .failure(let error):
                self.stats.finished(startNanos: start, ok: false, phase: phase, error: "\(error)")
                if phase == .stopping {
                    self.done.succeed()
                } else {
                    // Never recurse on a failure that may complete synchronously; back off a little.
                    future.eventLoop.scheduleTask(in: .milliseconds(1)) { self.issue() }
                }
            }
        }
    }
}

// Open every connection (TLS handshake, HELLO/WELCOME) before the clock starts.
for client in clients {
    _ = try await client.call(.registerToken, payload: payload, timeout: .seconds(10), idempotent: true).get()
}

let phase = PhaseFlag()
var callers: [Caller] = []
for client in clients {
    for _ in 0..<options.depth {
        callers.append(Caller(client: client, phase: phase, done: group.next().makePromise()))
    }
}
for caller in callers { caller.issue() }
let window = try await runWindow(options: options, phase: phase)
try await EventLoopFuture.andAllSucceed(callers.map(\.done.futureResult), on: group.next()).get()
for client in clients { await client.shutdown() }

LoadReport(target: "liverelay", options: options, window: window, callers: callers.map(\.stats)).printReport()
try await group.shutdownGracefully()
