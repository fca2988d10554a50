import Foundation
import LiveRelayWire
import NIOCore
import NIOPosix

/// A plaintext server that follows a script per connection, for the races a
/// real server only hits by chance: a GOAWAY that crosses requests, a
/// connection that drops with calls outstanding.
///
/// Requests are Ping calls; replies echo the request bytes (a PingRequest's
/// payload field encodes exactly like a PingReply's).
final class ScriptedServer: @unchecked Sendable {
    enum Script: Sendable {
        /// Answer every request at once.
        case echo
        /// After `requests` REQUESTs: GOAWAY with `lastID`, answer the ids up to it, close.
        case goAwayAfter(requests: Int, lastID: UInt32)
        /// After `requests` REQUESTs: close without answering or GOAWAY.
        case dropAfter(requests: Int)
        /// After `requests` REQUESTs: GOAWAY covering all of them, answer the ids up to
        /// `answerUpTo` and refuse the rest with ERROR UNAVAILABLE, then close.
        case refuseAbove(requests: Int, answerUpTo: UInt32)
    }

    private let lock = NSLock()
    private let scripts: [Script]
    private var connections = 0
    /// (connection number from 1, request payload) for every request answered.
    private var _answered: [(connection: Int, payload: [UInt8])] = []
    private var channel: (any Channel)?

    var answered: [(connection: Int, payload: [UInt8])] { self.lock.withLock { self._answered } }
    var connectionCount: Int { self.lock.withLock { self.connections } }
    var port: Int { self.channel!.localAddress!.port! }

    init(scripts: [Script]) {
        self.scripts = scripts
    }

    func start() async throws {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let number = self.lock.withLock { () -> Int in
                        self.connections += 1
                        return self.connections
                    }
                    let script = number <= self.scripts.count ? self.scripts[number - 1] : .echo
                    try channel.pipeline.syncOperations.addHandler(ScriptedHandler(server: self, number: number, script: script))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        self.channel = channel
    }

    func stop() async {
        try? await self.channel?.close()
    }

    fileprivate func recordAnswer(connection: Int, payload: ByteBuffer) {
        self.lock.withLock { self._answered.append((connection, Array(payload.readableBytesView))) }
    }
}

private final class ScriptedHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let server: ScriptedServer
    private let number: Int
    private let script: ScriptedServer.Script
    private var decoder = FrameDecoder(expectPreface: true)
    private var received: [(RequestID, ByteBuffer)] = []
    private var done = false

    init(server: ScriptedServer, number: Int, script: ScriptedServer.Script) {
        self.server = server
        self.number = number
        self.script = script
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.done else { return }
        self.decoder.append(self.unwrapInboundIn(data))
        var out = context.channel.allocator.buffer(capacity: 256)
        let encoder = FrameEncoder()
        while !self.done, let frame = try? self.decoder.nextFrame() {
            switch frame {
            case .hello:
                encoder.encode(.welcome(Frame.Welcome(version: 1, settings: ServerSettings().settings)), into: &out)
            case .request(let id, let request):
                self.received.append((id, request.payload))
                switch self.script {
                case .echo:
                    self.answer(id, request.payload, encoder: encoder, into: &out)
                case .goAwayAfter(let count, let lastID):
                    guard self.received.count == count else { break }
                    let goAway = Frame.GoAway(lastRequestID: RequestID(lastID), code: .noError, reason: "scripted shutdown")
                    encoder.encode(.goAway(goAway), into: &out)
                    for (id, payload) in self.received where id.rawValue <= lastID {
                        self.answer(id, payload, encoder: encoder, into: &out)
                    }
                    self.finish(context: context, out)
                    return
                case .refuseAbove(let count, let answerUpTo):
                    guard self.received.count == count else { break }
                    let goAway = Frame.GoAway(lastRequestID: id, code: .noError, reason: "scripted shutdown")
                    encoder.encode(.goAway(goAway), into: &out)
                    for (id, payload) in self.received {
                        if id.rawValue <= answerUpTo {
                            self.answer(id, payload, encoder: encoder, into: &out)
                        } else {
                            encoder.encode(
                                .error(id, Frame.RequestError(status: .unavailable, message: "server is going away")), into: &out)
                        }
                    }
                    self.finish(context: context, out)
                    return
                case .dropAfter(let count):
                    guard self.received.count == count else { break }
                    self.finish(context: context, out)
                    return
                }
            case .goAway:
                self.finish(context: context, out)
                return
            default:
                break
            }
        }
        if out.readableBytes > 0 {
            context.writeAndFlush(self.wrapOutboundOut(out), promise: nil)
        }
    }

    private func answer(_ id: RequestID, _ payload: ByteBuffer, encoder: FrameEncoder, into out: inout ByteBuffer) {
        encoder.encode(.response(id, payload), into: &out)
        self.server.recordAnswer(connection: self.number, payload: payload)
    }

    private func finish(context: ChannelHandlerContext, _ out: ByteBuffer) {
        self.done = true
        context.writeAndFlush(self.wrapOutboundOut(out)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
