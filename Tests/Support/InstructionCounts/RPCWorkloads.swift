import Dispatch
import LiveRelayComposition
import LiveRelayMessages
import LiveRelayServer
import LiveRelayService
import LiveRelayStore
import LiveRelayTestSupport
import LiveRelayWire
import Logging
import NIOCore
import NIOEmbedded

/// RegisterToken through the server's connection handler (frame decoder, connection
/// state machine, request decode and validation, dispatch to the service, reply
/// encoding) in an `EmbeddedChannel`: no socket, no TLS, no threads. One REQUEST frame
/// per read, as a client at depth 1 sends them; each call is answered before the next.
enum RPCWorkloads {
    static var all: [Workload] {
        [
            Workload(name: "rpc-register-token-null", unit: "call", iterations: 5_000) { iterations in
                try registerToken(service: builtService(.null), iterations: iterations)
            },
            Workload(name: "rpc-register-token-memory", unit: "call", iterations: 5_000) { iterations in
                try registerToken(service: builtService(.activities), iterations: iterations)
            },
        ]
    }

    /// The service `serve` runs, from the same builder, on the memory store. A fixed wall
    /// clock: what the service computes from the time does not vary between runs.
    static func builtService(_ calls: ServerDescription.Calls) throws -> any LiveRelayService {
        var description = ServerDescription()
        description.calls = calls
        description.port = 0
        description.apnsThreads = 1
        description.clock = ManualClock()
        description.logger = quietLogger
        let built = Built()
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                built.result = .success(try await ServerBuilder.build(description))
            } catch {
                built.result = .failure(error)
            }
            done.signal()
        }
        done.wait()
        return try built.result!.get().service
    }

    private final class Built: @unchecked Sendable {
        var result: Result<BuiltServer, any Error>?
    }

    static var quietLogger: Logger {
        var logger = Logger(label: "liverelay.instructions")
        logger.logLevel = .critical
        return logger
    }

    /// Every key allowed everything: authentication is not what is measured.
    struct AllowAll: Authenticator {
        func authenticate(apiKey: ByteBuffer) -> Result<Principal, AuthenticationFailure> {
            .success(Principal(keyID: "instructions", apps: .all, allowedMethods: Set(LiveRelayMethod.allCases)))
        }
    }

    /// A distinct token per call, so the memory store creates one each time (its usual work).
    static func token(_ n: Int) -> String {
        let digits = String(n, radix: 16)
        return "ab" + String(repeating: "0", count: 62 - digits.count) + digits
    }

    /// - Parameter expecting: the status every call must get; when it is not OK, the
    ///   first call may stay unanswered (admitted and held, so that the rest are refused).
    static func registerToken(service: any LiveRelayService, iterations: Int, expecting: StatusCode = .ok) throws -> () throws -> Int {
        let warmUp = 500
        let handler = RPCConnectionHandler(
            configuration: ServerConnectionStateMachine.Configuration(settings: ServerSettings(idleTimeoutMilliseconds: 0)),
            service: service, authenticator: AllowAll(), logger: quietLogger)
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 7443)).wait()

        let encoder = FrameEncoder()
        var hello = ByteBuffer()
        encoder.writePreface(into: &hello)
        _ = encoder.encode(.hello(Frame.Hello(apiKey: ByteBuffer(string: "key"), clientName: "instructions")), into: &hello)
        try channel.writeInbound(hello)
        var decoder = FrameDecoder(expectPreface: false)
        func replies() throws -> [Frame] {
            channel.embeddedEventLoop.run()
            while let written = try channel.readOutbound(as: ByteBuffer.self) { decoder.append(written) }
            var frames: [Frame] = []
            while let frame = try decoder.nextFrame() { frames.append(frame) }
            return frames
        }
        guard case .welcome = try replies().first else { throw WorkloadFailure("no WELCOME") }

        // Every request frame is encoded before the count starts.
        let requests = (0..<(warmUp + iterations)).map { n in
            let request = RegisterTokenRequest(
                appID: "com.example.sportsapp", kind: .pushToStart, token: token(n), environment: .production,
                attributesType: "MatchActivityAttributes", externalUserID: "user-8c1f2a", deviceID: "device-\(n)")
            var buffer = ByteBuffer()
            let frame = Frame.request(
                RequestID(UInt32(n + 1)),
                Frame.Request(method: LiveRelayMethod.registerToken.rawValue, payload: ByteBuffer(bytes: request.serializedBytes())))
            _ = encoder.encode(frame, into: &buffer)
            return buffer
        }
        func status(_ frames: [Frame]) -> StatusCode? {
            switch frames.first {
            case .response: return .ok
            case .error(_, let error): return error.status
            default: return nil
            }
        }
        for (n, request) in requests[..<warmUp].enumerated() {
            try channel.writeInbound(request)
            let answer = try replies()
            // Refusals need one admitted call the store holds: the first, answered never.
            let heldFirst = n == 0 && expecting != .ok && answer.isEmpty
            guard heldFirst || status(answer) == expecting else {
                throw WorkloadFailure("a warm-up call was answered \(String(describing: status(answer))), not \(expecting)")
            }
        }
        var next = warmUp
        return {
            try channel.writeInbound(requests[next])
            next += 1
            channel.embeddedEventLoop.run()
            var written = 0
            while let reply = try channel.readOutbound(as: ByteBuffer.self) { written += reply.readableBytes }
            guard written > 0 else { throw WorkloadFailure("call \(next) was not answered") }
            return 1
        }
    }
}
