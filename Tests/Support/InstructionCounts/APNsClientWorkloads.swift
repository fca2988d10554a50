import LiveRelayAPNs
import LiveRelayAPNsClient
import LiveRelayTLS
import NIOCore
import NIOEmbedded

/// The APNs client's side of a push: the connection handler and its HTTP/2
/// session, libnghttp2 (`APNsConnectionProbe`, the pool's pipeline without TLS),
/// on an `EmbeddedChannel`. Each iteration opens 100 streams (HEADERS and DATA out),
/// then reads their answers (a HEADERS frame `:status 200` each, and the
/// connection window given back) and hands them to a sink. Counted per push.
/// The server's frames are made outside the count, and what the client writes
/// is dropped below it, so only the client is counted.
enum APNsClientWorkloads {
    static let batchSize = 100

    static var all: [Workload] {
        [Workload(name: "apns-client-push", unit: "push", iterations: 50) { iterations in try pushes(iterations: iterations) }]
    }

    /// Counts the answers; every one should be a 200.
    final class CountingSink: APNsAnswerSink, @unchecked Sendable {
        var ok = 0
        var other = 0
        func received(_ answers: [APNsAnswer]) {
            for answer in answers {
                if case .success(let response) = answer.result, response.status == 200 { ok += 1 } else { other += 1 }
            }
        }
    }

    /// Takes the place of the socket: every write succeeds at once and goes nowhere.
    final class DroppingHead: ChannelOutboundHandler {
        typealias OutboundIn = Any
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) { promise?.succeed(()) }
        func flush(context: ChannelHandlerContext) {}
    }

    /// An HTTP/2 frame: the 9-byte header, then `payload`.
    static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8], into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt32(payload.count) << 8 | UInt32(type))  // 24-bit length, then the type
        buffer.writeInteger(flags)
        buffer.writeInteger(stream)
        buffer.writeBytes(payload)
    }

    static func request(_ n: Int) -> APNsRequest {
        let digits = String(n, radix: 16)
        return APNsRequest(
            deviceToken: String(repeating: "a", count: 64 - digits.count) + digits,
            headers: APNsHeaders(bundleID: "com.example.app-a", expiration: 0),
            payload: APNsPayload(bytes: Array(#"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":"2-1"}}}"#.utf8)),
            apnsID: "00000000-0000-0000-0000-" + String(repeating: "0", count: 12 - digits.count) + digits)
    }

    static func pushes(iterations: Int) throws -> () throws -> Int {
        let warmUp = 3
        let key = try APNsSigningKey.generate(keyID: "BENCHKEY01", teamID: "BENCHTEAM1")
        let probe = try APNsConnectionProbe(tokenSource: ProviderTokenSource(key: key), authority: "api.push.apple.com")
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(DroppingHead())
        try channel.pipeline.syncOperations.addHandlers(probe.handlers)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        channel.pipeline.fireUserInboundEventTriggered(TLSEvent.handshakeCompleted(negotiatedProtocol: "h2"))
        // The server's SETTINGS (1,000 concurrent streams) and its ACK of the client's.
        var preface = ByteBuffer()
        frame(type: 4, flags: 0, stream: 0, payload: [0, 3, 0, 0, 0x03, 0xE8], into: &preface)
        frame(type: 4, flags: 1, stream: 0, payload: [], into: &preface)
        try channel.writeInbound(preface)

        let requests = (0..<batchSize).map { APNsTaggedRequest(tag: UInt64($0), request: request($0)) }
        let bodyBytes = UInt32(requests.map(\.request.payload.count).reduce(0, +))
        // Iteration k's answers: stream 1 + 2 (k * batch + j) for each push j, then the
        // connection's send window given back for the batch's bodies.
        let answers = (0..<(warmUp + iterations)).map { k in
            var buffer = ByteBuffer()
            for j in 0..<batchSize {
                frame(type: 1, flags: 0x5, stream: UInt32(1 + 2 * (k * batchSize + j)), payload: [0x88], into: &buffer)
            }
            frame(
                type: 8, flags: 0, stream: 0,
                payload: [
                    UInt8(bodyBytes >> 24), UInt8(truncatingIfNeeded: bodyBytes >> 16), UInt8(truncatingIfNeeded: bodyBytes >> 8),
                    UInt8(truncatingIfNeeded: bodyBytes),
                ],
                into: &buffer)
            return buffer
        }
        let sink = CountingSink()
        var next = 0
        func run() throws -> Int {
            let before = sink.ok
            probe.send(requests, to: sink)
            channel.embeddedEventLoop.run()  // the coalesced flush
            try channel.writeInbound(answers[next])
            next += 1
            return sink.ok - before
        }
        for _ in 0..<warmUp {
            guard try run() == batchSize else {
                throw WorkloadFailure("a warm-up batch was not answered whole (\(sink.other) other answers)")
            }
        }
        return {
            let answered = try run()
            guard answered == batchSize, sink.other == 0 else { throw WorkloadFailure("\(answered) of \(batchSize) answered 200") }
            return answered
        }
    }
}
