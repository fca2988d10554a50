import LiveRelayTLS
import LiveRelayTestSupport
import LiveRelayWire
import NIOCore
import NIOPosix

/// A protocol client with no protocol logic: it writes exactly the bytes and
/// frames a test gives it, and collects every frame the server sends, so
/// tests can check the server's answers byte for byte.
final class RawClient: Sendable {
    let channel: any Channel
    private let inbox: NIOLoopBound<FrameInbox>

    private init(channel: any Channel, inbox: NIOLoopBound<FrameInbox>) {
        self.channel = channel
        self.inbox = inbox
    }

    static func connect(
        to address: SocketAddress,
        tls: TLSContext?,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> RawClient {
        // The inbox is captured when it is added: a server may answer and close
        // (a HELLO timeout) before a later pipeline lookup could find it.
        let inboxPromise = group.any().makePromise(of: NIOLoopBound<FrameInbox>.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        if let tls {
                            try sync.addHandler(OpenSSLHandler(context: tls, role: .client))
                        }
                        let inbox = FrameInbox()
                        try sync.addHandler(inbox)
                        inboxPromise.succeed(NIOLoopBound(inbox, eventLoop: channel.eventLoop))
                    }
                }
                .connect(to: address).get()
        } catch {
            inboxPromise.fail(error)
            throw error
        }
        let inbox = try await inboxPromise.futureResult.get()
        return RawClient(channel: channel, inbox: inbox)
    }

    /// Writes raw bytes (and flushes), completing when they are handed to the socket.
    func write(_ bytes: ByteBuffer) async throws {
        try await channel.writeAndFlush(bytes).get()
    }

    /// Encodes the frames (after the preface if asked) into one write.
    func send(_ frames: [Frame], preface: Bool = false) async throws {
        try await write(Self.encode(frames, preface: preface))
    }

    static func encode(_ frames: [Frame], preface: Bool = false) -> ByteBuffer {
        var buffer = ByteBuffer()
        let encoder = FrameEncoder()
        if preface { encoder.writePreface(into: &buffer) }
        for frame in frames { encoder.encode(frame, into: &buffer) }
        return buffer
    }

    /// Preface + HELLO, then the server's first frame (WELCOME or GOAWAY).
    func hello(apiKey: String, clientName: String = "test", then frames: [Frame] = []) async throws -> Frame {
        let hello = Frame.hello(Frame.Hello(apiKey: ByteBuffer(string: apiKey), clientName: clientName))
        try await send([hello] + frames, preface: true)
        return try await nextFrame()
    }

    /// The next frame from the server; fails after `timeout` or if the connection closed first.
    func nextFrame(timeout: TimeAmount = .seconds(10)) async throws -> Frame {
        let inbox = self.inbox
        return try await channel.eventLoop.flatSubmit { inbox.value.next(timeout: timeout) }.get()
    }

    func nextFrames(_ count: Int, timeout: TimeAmount = .seconds(20)) async throws -> [Frame] {
        var frames: [Frame] = []
        for _ in 0..<count { frames.append(try await nextFrame(timeout: timeout)) }
        return frames
    }

    /// Waits for the server to close the connection; returns frames received and not yet read.
    @discardableResult
    func waitForClose(timeout: TimeAmount = .seconds(10)) async throws -> [Frame] {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.channel.closeFuture.get() }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(timeout.nanoseconds))
                throw TestFailure("connection still open after \(timeout)")
            }
            try await group.next()
            group.cancelAll()
        }
        let inbox = self.inbox
        return try await channel.eventLoop.submit { inbox.value.drain() }.get()
    }

    /// Whether the server closed (or the client closed) the connection.
    var isClosed: Bool { !channel.isActive }

    func close() async {
        try? await channel.close().get()
    }
}

/// Decodes the server's frames and hands them to waiting tests. Loop-confined.
final class FrameInbox: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private var decoder = FrameDecoder(expectPreface: false, maxFrameSize: 16_777_215)
    private var frames = CircularBuffer<Frame>()
    private var waiter: (promise: EventLoopPromise<Frame>, timer: Scheduled<Void>)?
    private var failure: (any Error)?
    private var eventLoop: (any EventLoop)?

    func handlerAdded(context: ChannelHandlerContext) {
        eventLoop = context.eventLoop
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.append(unwrapInboundIn(data))
        do {
            while let frame = try decoder.nextFrame() {
                frames.append(frame)
            }
        } catch {
            failure = error
        }
        deliver()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS close details do not matter to these tests; closure does.
    }

    func channelInactive(context: ChannelHandlerContext) {
        if failure == nil { failure = TestFailure("connection closed") }
        deliver()
        context.fireChannelInactive()
    }

    func next(timeout: TimeAmount) -> EventLoopFuture<Frame> {
        let loop = eventLoop!
        precondition(waiter == nil, "one reader at a time")
        let promise = loop.makePromise(of: Frame.self)
        let timer = loop.assumeIsolated().scheduleTask(in: timeout) {
            self.waiter = nil
            promise.fail(TestFailure("no frame within \(timeout)"))
        }
        waiter = (promise, timer)
        deliver()
        return promise.futureResult
    }

    func drain() -> [Frame] {
        defer { frames.removeAll() }
        return Array(frames)
    }

    private func deliver() {
        guard let waiter else { return }
        if let frame = frames.popFirst() {
            self.waiter = nil
            waiter.timer.cancel()
            waiter.promise.succeed(frame)
        } else if let failure {
            self.waiter = nil
            waiter.timer.cancel()
            waiter.promise.fail(failure)
        }
    }
}
