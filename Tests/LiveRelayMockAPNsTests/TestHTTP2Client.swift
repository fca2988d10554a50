import LiveRelayTLS
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix

/// A minimal APNs-style client for the socket tests: our OpenSSLHandler in
/// client mode (ALPN h2, the mock's certificate as the only trust root) under
/// swift-nio-http2, one stream per request. Deliberately not the project's
/// APNs client, so the mock is tested on its own.
struct TestResponse: Sendable {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

struct TestStreamClosed: Error {}

/// Connection-level frames the client saw (stream 0 is forwarded to the parent pipeline).
final class FrameLog: Sendable {
    private let frames = NIOLockedValueBox<[HTTP2Frame.FramePayload]>([])

    func append(_ payload: HTTP2Frame.FramePayload) { frames.withLockedValue { $0.append(payload) } }

    var goAways: [(lastStreamID: Int, reason: String)] {
        frames.withLockedValue { frames in
            frames.compactMap {
                guard case let .goAway(last, _, data) = $0 else { return nil }
                return (Int(last), data.map { String(buffer: $0) } ?? "")
            }
        }
    }

    /// Every SETTINGS_MAX_CONCURRENT_STREAMS value the server announced, in order.
    var maxConcurrentStreams: [Int] {
        frames.withLockedValue { frames in
            frames.flatMap { payload -> [Int] in
                guard case let .settings(.settings(settings)) = payload else { return [] }
                return settings.filter { $0.parameter == .maxConcurrentStreams }.map(\.value)
            }
        }
    }
}

final class FrameLogHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    let log: FrameLog
    init(log: FrameLog) { self.log = log }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        log.append(unwrapInboundIn(data).payload)
    }
}

final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    private let promise: EventLoopPromise<TestResponse>
    private var response = TestResponse(status: 0, headers: [], body: [])
    private var done = false

    init(promise: EventLoopPromise<TestResponse>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            for field in frame.headers {
                if field.name == ":status" {
                    response.status = Int(field.value) ?? -1
                } else {
                    response.headers.append((field.name, field.value))
                }
            }
            if frame.endStream { finish() }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data { response.body += buffer.readableBytesView }
            if frame.endStream { finish() }
        default:
            break
        }
    }

    private func finish() {
        guard !done else { return }
        done = true
        promise.succeed(response)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done { done = true; promise.fail(TestStreamClosed()) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if !done { done = true; promise.fail(error) }
    }
}

final class TestAPNsConnection: Sendable {
    let channel: Channel
    let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    let frames: FrameLog

    private init(channel: Channel, multiplexer: NIOHTTP2Handler.StreamMultiplexer, frames: FrameLog) {
        self.channel = channel
        self.multiplexer = multiplexer
        self.frames = frames
    }

    static func connect(port: Int, certificatePEM: String, group: EventLoopGroup) async throws -> TestAPNsConnection {
        let tls = try TLSContext(
            configuration: TLSConfiguration(
                trustRoots: .pem(.string(certificatePEM)), certificateVerification: .fullVerification,
                applicationProtocols: ["h2"], serverHostname: "localhost"))
        let frames = FrameLog()
        let (channel, multiplexer) = try await ClientBootstrap(group: group)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(OpenSSLHandler(context: tls, role: .client))
                    let multiplexer = try sync.configureHTTP2Pipeline(
                        mode: .client, connectionConfiguration: .init(), streamConfiguration: .init()
                    ) { stream in stream.eventLoop.makeSucceededVoidFuture() }
                    try sync.addHandler(FrameLogHandler(log: frames))
                    return (channel, multiplexer)
                }
            }
        return TestAPNsConnection(channel: channel, multiplexer: multiplexer, frames: frames)
    }

    /// Sends one request on a new stream and waits for the whole answer.
    func send(
        method: String = "POST", path: String, headers: [(name: String, value: String)], body: [UInt8]
    ) async throws -> TestResponse {
        let promise = channel.eventLoop.makePromise(of: TestResponse.self)
        let stream = try await multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(ResponseCollector(promise: promise))
            }
        }.get()
        var fields = HPACKHeaders([(":method", method), (":scheme", "https"), (":path", path), (":authority", "localhost")])
        for header in headers { fields.add(name: header.name, value: header.value) }
        stream.write(HTTP2Frame.FramePayload.headers(.init(headers: fields, endStream: body.isEmpty)), promise: nil)
        if !body.isEmpty {
            let buffer = stream.allocator.buffer(bytes: body)
            stream.write(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(buffer), endStream: true)), promise: nil)
        }
        stream.flush()
        return try await promise.futureResult.get()
    }

    func close() async {
        try? await channel.close()
    }
}
