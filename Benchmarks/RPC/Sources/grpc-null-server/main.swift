// grpc-swift-2 peer for the RPC ingest benchmark: the LiveRelay service over
// HTTP/2 + TLS (grpc-swift-nio-transport, NIOSSL), with RegisterToken as a null
// method: the request is decoded by swift-protobuf, the reply is an empty
// RegisterTokenReply. Only RegisterToken and Ping are served.
//
//   grpc-null-server --cert C.pem --key K.pem [--host 127.0.0.1] [--port 0] [--threads 1] [--max-seconds 900]
//
// Prints "LISTENING <port>" once it accepts connections; stops on SIGTERM/SIGINT
// or after --max-seconds.
import BenchSupport
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import GRPCProtobuf
import LiveRelayGRPC
import NIOPosix

struct NullLiveRelayGRPCService: Liverelay_V1_LiveRelay.SimpleServiceProtocol {
    func registerToken(
        request: Liverelay_V1_RegisterTokenRequest,
        context: ServerContext
    ) async throws -> Liverelay_V1_RegisterTokenReply {
        Liverelay_V1_RegisterTokenReply()
    }

    func ping(request: Liverelay_V1_PingRequest, context: ServerContext) async throws -> Liverelay_V1_PingReply {
        var reply = Liverelay_V1_PingReply()
        reply.payload = request.payload
        return reply
    }

    func startActivity(
        request: Liverelay_V1_StartActivityRequest,
        context: ServerContext
    ) async throws -> Liverelay_V1_StartActivityReply {
        throw RPCError(code: .unimplemented, message: "null benchmark server: RegisterToken and Ping only")
    }

    func updateActivity(
        request: Liverelay_V1_UpdateActivityRequest,
        context: ServerContext
    ) async throws -> Liverelay_V1_UpdateActivityReply {
        throw RPCError(code: .unimplemented, message: "null benchmark server: RegisterToken and Ping only")
    }

    func endActivity(
        request: Liverelay_V1_EndActivityRequest,
        context: ServerContext
    ) async throws -> Liverelay_V1_EndActivityReply {
        throw RPCError(code: .unimplemented, message: "null benchmark server: RegisterToken and Ping only")
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let host = argument("--host", in: arguments, default: "127.0.0.1")
let port = Int(argument("--port", in: arguments, default: "0"))!
let certificate = argument("--cert", in: arguments)
let key = argument("--key", in: arguments)
let threads = Int(argument("--threads", in: arguments, default: "1"))!
let maxSeconds = Double(argument("--max-seconds", in: arguments, default: "900"))!

let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
let server = GRPCServer(
    transport: .http2NIOPosix(
        address: .ipv4(host: host, port: port),
        transportSecurity: .tls(
            certificateChain: [.file(path: certificate, format: .pem)],
            privateKey: .file(path: key, format: .pem)
        ),
        config: .defaults,
        eventLoopGroup: group
    ),
    services: [NullLiveRelayGRPCService()]
)

onStopSignalOrDeadline(maxSeconds: maxSeconds) { reason in
    say("stopping: \(reason)")
    server.beginGracefulShutdown()
}

try await withThrowingDiscardingTaskGroup { tasks in
    tasks.addTask { try await server.serve() }
    guard let address = try await server.listeningAddress, let ipv4 = address.ipv4 else {
        fail("server did not start listening")
    }
    say("LISTENING \(ipv4.port) (grpc-swift-2, HTTP/2 + TLS, \(threads) event-loop thread(s), pid \(currentProcessID()))")
}
try await group.shutdownGracefully()
