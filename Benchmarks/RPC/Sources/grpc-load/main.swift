// Closed-loop load against grpc-null-server through grpc-swift-2's client:
// C connections (one GRPCClient, hence one HTTP/2 connection, each) and D
// concurrent unary RegisterToken calls per connection (D HTTP/2 streams), each
// caller sending its next call when the previous one completes.
//
//   grpc-load --port P --ca cert.pem [-c C] [-d D] [--warmup 3] [--duration 10] [--server-pid PID] [--threads 1]
//
// The request is RequestFixture.bytes sent as-is (a pass-through serializer),
// exactly the bytes lr-load sends; the reply is not decoded on this side.
import BenchSupport
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import LiveRelayGRPC
import NIOPosix

struct RawSerializer: MessageSerializer {
    typealias Message = [UInt8]
    func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }
}

/// Counts the reply's bytes without copying them.
struct CountingDeserializer: MessageDeserializer {
    typealias Message = Int
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> Int {
        serializedMessageBytes.count
    }
}

let options = LoadOptions(arguments: Array(CommandLine.arguments.dropFirst()))
let group = MultiThreadedEventLoopGroup(numberOfThreads: options.threads)
let descriptor = Liverelay_V1_LiveRelay.Method.RegisterToken.descriptor
let request = ClientRequest(message: RequestFixture.bytes)
var callOptions = CallOptions.defaults
callOptions.timeout = .milliseconds(Int64(options.timeoutMilliseconds))
let finalCallOptions = callOptions

@inline(__always)
func call(_ client: GRPCClient<HTTP2ClientTransport.Posix>) async throws -> Int {
    try await client.unary(
        request: request,
        descriptor: descriptor,
        serializer: RawSerializer(),
        deserializer: CountingDeserializer(),
        options: finalCallOptions
    ) { response in
        try response.message
    }
}

let ca = options.caFile
let clients: [GRPCClient<HTTP2ClientTransport.Posix>] = try (0..<options.connections).map { _ in
    GRPCClient(
        transport: try .http2NIOPosix(
            target: .ipv4(host: options.host, port: options.port),
            transportSecurity: .tls { tls in
                tls.trustRoots = .certificates([.file(path: ca, format: .pem)])
            },
            config: .defaults,
            eventLoopGroup: group
        )
    )
}

say(
    "grpc-load: \(options.connections) connection(s) x \(options.depth) in flight, warm-up \(options.warmupSeconds) s, "
        + "measure \(options.durationSeconds) s; request \(RequestFixture.bytes.count) bytes, fnv \(RequestFixture.fingerprint)")

let callers = (0..<(options.connections * options.depth)).map { _ in CallerStats() }
let phase = PhaseFlag()

let window: MeasuredWindow = try await withThrowingTaskGroup(of: Void.self) { connections in
    for client in clients {
        connections.addTask { try await client.runConnections() }
    }
    // Open every connection (TLS + HTTP/2 handshakes) before the clock starts.
    for client in clients {
        _ = try await call(client)
    }
    let window = try await withThrowingTaskGroup(of: Void.self) { workers in
        for (index, stats) in callers.enumerated() {
            let client = clients[index / options.depth]
            workers.addTask {
                while phase.current != .stopping {
                    let start = monotonicNanos()
                    do {
                        _ = try await call(client)
                        stats.finished(startNanos: start, ok: true, phase: phase.current)
                    } catch {
                        stats.finished(startNanos: start, ok: false, phase: phase.current, error: "\(error)")
                    }
                }
            }
        }
        let window = try await runWindow(options: options, phase: phase)
        try await workers.waitForAll()
        return window
    }
    for client in clients { client.beginGracefulShutdown() }
    try await connections.waitForAll()
    return window
}

LoadReport(target: "grpc-swift-2", options: options, window: window, callers: callers).printReport()
try await group.shutdownGracefully()
