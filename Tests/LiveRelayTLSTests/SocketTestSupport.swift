import Foundation
import LiveRelayTLS
import LiveRelayTestSupport
import NIOCore
import NIOPosix

/// A thread-safe log the server's connections write to and the test waits on.
final class EventLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var entries: [String] = []

    func append(_ entry: String) {
        condition.lock()
        entries.append(entry)
        condition.broadcast()
        condition.unlock()
    }

    var snapshot: [String] {
        condition.lock()
        defer { condition.unlock() }
        return entries
    }

    /// Waits (bounded) until `predicate` holds for the log; returns the log either way.
    @discardableResult
    func wait(seconds: Double = 20, until predicate: ([String]) -> Bool) -> [String] {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(entries) {
            if !condition.wait(until: deadline) { break }
        }
        return entries
    }
}

/// Records TLS outcomes of one server connection into the shared log.
final class LoggingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let log: EventLog
    /// Close the channel on any error, as the RPC server's connection handler does.
    let closeOnError: Bool

    init(log: EventLog, closeOnError: Bool = false) {
        self.log = log
        self.closeOnError = closeOnError
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let alpn)? = event as? TLSEvent {
            let handler = try? context.pipeline.syncOperations.handler(type: OpenSSLHandler.self)
            log.append(
                "handshake alpn=\(alpn ?? "none") version=\(handler?.negotiatedTLSVersion ?? "?") peer=\(handler?.peerCertificate?.subject ?? "none")"
            )
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        log.append("error \(error)")
        if closeOnError { context.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        log.append("inactive")
        context.fireChannelInactive()
    }
}

/// Echoes every byte; closes (with close_notify) after echoing a read that contains "BYE".
final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var closeAfterFlush = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if buffer.readableBytesView.firstRange(of: Array("BYE".utf8)) != nil { closeAfterFlush = true }
        context.write(data, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        if closeAfterFlush { context.close(promise: nil) }
    }
}

/// A TLS echo server on 127.0.0.1 with an ephemeral port.
final class TestTLSServer {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let log = EventLog()
    private(set) var channel: Channel?

    var port: Int { channel?.localAddress?.port ?? 0 }

    /// - Parameter closeOnError: the handler behind TLS closes the channel on
    ///   any error, as LiveRelayServer's RPCConnectionHandler does.
    init(configuration: TLSConfiguration, closeOnError: Bool = false) throws {
        let context = try TLSContext(configuration: configuration)
        let log = self.log
        do {
            channel = try ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(OpenSSLHandler(context: context, role: .server))
                        try sync.addHandler(LoggingHandler(log: log, closeOnError: closeOnError))
                        try sync.addHandler(EchoHandler())
                    }
                }
                .bind(host: "127.0.0.1", port: 0).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw error
        }
    }

    func shutdown() {
        try? channel?.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// Waits for a future, failing after `timeout` instead of hanging the suite.
func wait<T: Sendable>(_ future: EventLoopFuture<T>, timeout: TimeAmount = .seconds(20)) throws -> T {
    let promise = future.eventLoop.makePromise(of: T.self)
    let timer = future.eventLoop.scheduleTask(in: timeout) {
        promise.fail(TestFailure("timed out after \(timeout)"))
    }
    future.whenComplete { result in
        timer.cancel()
        promise.completeWith(result)
    }
    return try promise.futureResult.wait()
}

/// A client that sends a payload once the handshake completes and waits for it to be echoed back.
final class EchoClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    struct Result: Sendable {
        var negotiatedProtocol: String?
        var intact: Bool
    }

    private let payload: ByteBuffer
    private let expected: ByteBuffer
    private let done: EventLoopPromise<Result>
    private var received: ByteBuffer
    private var negotiatedProtocol: String?

    init(payload: ByteBuffer, expected: ByteBuffer, done: EventLoopPromise<Result>) {
        self.payload = payload
        self.expected = expected
        self.done = done
        self.received = ByteBufferAllocator().buffer(capacity: expected.readableBytes)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let alpn)? = event as? TLSEvent {
            negotiatedProtocol = alpn
            context.writeAndFlush(wrapOutboundOut(payload), promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        received.writeBuffer(&buffer)
        if received.readableBytes >= expected.readableBytes {
            done.succeed(Result(negotiatedProtocol: negotiatedProtocol, intact: received == expected))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        done.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        done.fail(TestFailure("connection closed after \(received.readableBytes) bytes"))
    }
}

/// Connects an `OpenSSLHandler` client to 127.0.0.1:`port`, sends `payload`, waits for `expected`
/// (the payload itself by default), then closes cleanly.
func runEchoClient(
    configuration: TLSConfiguration, port: Int, payload: ByteBuffer, expected: ByteBuffer? = nil, group: EventLoopGroup
) throws -> EchoClientHandler.Result {
    let context = try TLSContext(configuration: configuration)
    let done = group.next().makePromise(of: EchoClientHandler.Result.self)
    let channel = try ClientBootstrap(group: group)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(OpenSSLHandler(context: context, role: .client))
                try sync.addHandler(EchoClientHandler(payload: payload, expected: expected ?? payload, done: done))
            }
        }
        .connect(host: "127.0.0.1", port: port).wait()
    defer { channel.close(promise: nil) }
    let result = try wait(done.futureResult)
    try wait(channel.close())
    return result
}

/// Runs Tests/Support/tls/tls_client.py and decodes the JSON line it prints. It runs in the Python
/// of ``LiveRelayPython`` (the one with the `liverelay` package, whose TLS settings it uses).
func runPythonClient(_ arguments: [String]) throws -> (status: Int32, result: [String: Any], stderr: String) {
    let script = tlsSupportDirectory + "/tls_client.py"
    let run = try runProcess([try LiveRelayPython.executable(), script] + arguments, timeoutSeconds: 60)
    let line = run.stdout.split(separator: "\n").last.map(String.init) ?? ""
    guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
        throw TestFailure("tls_client.py printed no JSON (status \(run.status)): \(run.stdout) \(run.stderr)")
    }
    return (run.status, object, run.stderr)
}
