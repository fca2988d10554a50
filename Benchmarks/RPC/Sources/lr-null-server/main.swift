// LiveRelay side of the RPC ingest benchmark: the real `RPCServer` (listener,
// OpenSSL TLS handler, connection state machine, API-key authentication,
// protobuf-c decoding and validation, dispatch) in front of
// `NullLiveRelayService`, which answers every call with an empty OK reply.
//
//   lr-null-server --cert C.pem --key K.pem [--host 127.0.0.1] [--port 0] [--threads 1] [--max-seconds 900]
//
// Mints one API key allowed RegisterToken and Ping for every app and prints
//   API_KEY <key>
//   LISTENING <port>
// Stops gracefully on SIGTERM/SIGINT or after --max-seconds.
import BenchSupport
import LiveRelayMessages
import LiveRelayServer
import LiveRelayService
import LiveRelayTLS
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

let arguments = Array(CommandLine.arguments.dropFirst())
let host = argument("--host", in: arguments, default: "127.0.0.1")
let port = Int(argument("--port", in: arguments, default: "0"))!
let certificate = argument("--cert", in: arguments)
let key = argument("--key", in: arguments)
let threads = Int(argument("--threads", in: arguments, default: "1"))!
let maxSeconds = Double(argument("--max-seconds", in: arguments, default: "900"))!

var logger = Logger(label: "lr-null-server")
logger.logLevel = .warning

let tls = try TLSContext(
    configuration: .makeServerConfiguration(certificateChain: .file(certificate), privateKey: .file(key))
)
let (apiKey, record) = APIKeyAuthenticator.generateKey(
    apps: .all,
    allowedMethods: [.registerToken, .ping],
    label: "rpc benchmark"
)
let authenticator = try APIKeyAuthenticator(records: [record])

let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
let server = RPCServer(
    configuration: .init(
        host: host,
        port: port,
        tls: tls,
        eventLoopGroup: .shared(group),
        maxDrainTime: .seconds(2)
    ),
    service: NullLiveRelayService(),
    authenticator: authenticator,
    logger: logger
)

let serviceGroup = ServiceGroup(
    configuration: .init(services: [.init(service: server)], logger: logger)
)
onStopSignalOrDeadline(maxSeconds: maxSeconds) { reason in
    say("stopping: \(reason)")
    Task { await serviceGroup.triggerGracefulShutdown() }
}

try await withThrowingDiscardingTaskGroup { tasks in
    tasks.addTask { try await serviceGroup.run() }
    let address = try await server.boundAddress
    say("API_KEY \(apiKey)")
    say("LISTENING \(address.port ?? 0) (LiveRelay RPCServer + NullLiveRelayService, TLS via OpenSSL, \(threads) event-loop thread(s), pid \(currentProcessID()))")
}
try await group.shutdownGracefully()
