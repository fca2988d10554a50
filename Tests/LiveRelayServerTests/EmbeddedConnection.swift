import LiveRelayMessages
import LiveRelayService
import LiveRelayTestSupport
import LiveRelayWire
import Logging
import NIOCore
import NIOEmbedded

@testable import LiveRelayServer

/// `RPCConnectionHandler` alone in an `EmbeddedChannel`: no TLS, no socket,
/// no threads, and the loop's virtual time as the handler's clock, so a test
/// steps every timeout itself instead of sleeping and hoping.
///
/// Single-threaded: an `EmbeddedEventLoop` must be used from the thread that
/// made it, so the tests using this are synchronous.
final class EmbeddedConnection {
    let channel: EmbeddedChannel
    let reads: ReadCounter
    private var decoder = FrameDecoder(expectPreface: false, maxFrameSize: 16_777_215)

    var loop: EmbeddedEventLoop { channel.embeddedEventLoop }

    init(
        service: any LiveRelayService,
        authenticator: any Authenticator = TestKeys.authenticator,
        settings: ServerSettings = ServerSettings(idleTimeoutMilliseconds: 300_000),
        helloTimeout: TimeAmount = .seconds(10),
        limiter: ConnectionLimiter? = nil,
        logger: Logger = testLogger
    ) throws {
        let loop = EmbeddedEventLoop()
        let handler = RPCConnectionHandler(
            configuration: ServerConnectionStateMachine.Configuration(settings: settings, helloTimeout: helloTimeout),
            service: service,
            authenticator: authenticator,
            logger: logger,
            metrics: ServerMetrics(),
            limiter: limiter,
            clock: { loop.now }
        )
        reads = ReadCounter()
        // The counter sits on the socket side of the handler, where the handler's reads go.
        channel = EmbeddedChannel(handlers: [reads, handler], loop: loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 7443)).wait()
    }

    /// Bytes as one socket read (channelRead, then channelReadComplete, where the handler flushes).
    func receive(_ bytes: ByteBuffer) throws {
        try channel.writeInbound(bytes)
    }

    func send(_ frames: [Frame], preface: Bool = false) throws {
        try receive(RawClient.encode(frames, preface: preface))
    }

    /// Preface + HELLO (+ pipelined frames) in one read; returns what the handler wrote back.
    func hello(apiKey: String = TestKeys.all.plaintext, clientName: String = "embedded", then frames: [Frame] = []) throws -> [Frame] {
        let hello = Frame.hello(Frame.Hello(apiKey: ByteBuffer(string: apiKey), clientName: clientName))
        try send([hello] + frames, preface: true)
        return try writtenFrames()
    }

    /// Each write the handler made and flushed since the last call, once the
    /// tasks already queued on the loop (its deferred flushes) have run.
    func writtenBuffers() throws -> [ByteBuffer] {
        loop.run()
        var buffers: [ByteBuffer] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            buffers.append(buffer)
        }
        return buffers
    }

    func writtenBytes() throws -> ByteBuffer {
        var all = ByteBuffer()
        for var buffer in try writtenBuffers() { all.writeBuffer(&buffer) }
        return all
    }

    func writtenFrames() throws -> [Frame] {
        try frames(in: writtenBuffers())
    }

    /// Decodes the server's bytes; a frame cut between flushes fails the test.
    func frames(in buffers: [ByteBuffer]) throws -> [Frame] {
        for buffer in buffers { decoder.append(buffer) }
        var frames: [Frame] = []
        while let frame = try decoder.nextFrame() { frames.append(frame) }
        guard decoder.bufferedBytes == 0 else {
            throw TestFailure("the handler flushed part of a frame (\(decoder.bufferedBytes) bytes)")
        }
        return frames
    }

    /// Answers what the service still holds (NIO traps on a promise dropped
    /// unfulfilled) and closes, if the handler has not.
    func finish(_ service: ManualService) throws {
        service.releaseAll()
        _ = try channel.finish(acceptAlreadyClosed: true)
    }
}

/// Counts the reads that get past the handler, which are the reads a real
/// channel would make from its socket: under backpressure the handler must
/// hold them back, and this is where that shows.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer

    private(set) var count = 0

    func read(context: ChannelHandlerContext) {
        count += 1
        context.read()
    }
}

/// A service the test answers by hand: each Ping is held until the test
/// names its id, so the test decides completion order and what is in flight
/// when something else happens. The other RPCs answer at once, each in one of
/// the ways a service can (reply, `RPCError`, any other error).
///
/// Touched only from the embedded loop's thread, hence unchecked.
final class ManualService: LiveRelayService, @unchecked Sendable {
    struct HeldPing {
        var request: PingRequest
        var promise: EventLoopPromise<PingReply>
    }

    struct LeakedSecret: Error, CustomStringConvertible {
        var description: String { "database password is hunter2" }
    }

    /// Every call the service was given, in order.
    private(set) var calls: [CallContext] = []
    private var held: [RequestID: HeldPing] = [:]

    var dispatchedIDs: [RequestID] { calls.map(\.requestID) }

    func context(_ id: RequestID) -> CallContext? {
        calls.first { $0.requestID == id }
    }

    func ping(_ request: PingRequest, context: CallContext) -> EventLoopFuture<PingReply> {
        calls.append(context)
        let promise = context.eventLoop.makePromise(of: PingReply.self)
        held[context.requestID] = HeldPing(request: request, promise: promise)
        return promise.futureResult
    }

    /// Answers a held Ping, echoing its payload.
    func succeed(_ id: RequestID) {
        guard let call = held.removeValue(forKey: id) else { preconditionFailure("ping \(id) is not held") }
        call.promise.succeed(PingReply(payload: call.request.payload))
    }

    /// Answers every held Ping: no promise may be left unfulfilled when a test ends.
    func releaseAll() {
        for id in held.keys.sorted() { succeed(id) }
    }

    func registerToken(_ request: RegisterTokenRequest, context: CallContext) -> EventLoopFuture<RegisterTokenReply> {
        calls.append(context)
        return context.eventLoop.makeSucceededFuture(RegisterTokenReply(result: .created))
    }

    func startActivity(_ request: StartActivityRequest, context: CallContext) -> EventLoopFuture<StartActivityReply> {
        calls.append(context)
        return context.fail(RPCError(.notFound, "no such app", details: ErrorDetails(reason: "UnknownApp")))
    }

    func updateActivity(_ request: UpdateActivityRequest, context: CallContext) -> EventLoopFuture<UpdateActivityReply> {
        calls.append(context)
        return context.eventLoop.makeFailedFuture(LeakedSecret())
    }

    func endActivity(_ request: EndActivityRequest, context: CallContext) -> EventLoopFuture<EndActivityReply> {
        calls.append(context)
        return context.eventLoop.makeSucceededFuture(EndActivityReply())
    }
}
