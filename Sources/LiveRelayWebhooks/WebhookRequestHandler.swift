import LiveRelayTLS
import NIOCore
import NIOHTTP1

/// The HTTP/1.1 exchange of one webhook POST, above TLS and NIO's HTTP codec.
///
/// It writes the request once the handshake has completed (so a handshake
/// failure is never mistaken for a write failure), reports the status as soon
/// as the response head arrives, then reads and drops at most
/// `maxDiscardedBodyBytes` of the body before closing: the status is all a
/// webhook sender needs, and a server streaming an endless body must not hold
/// the connection. Everything it reports goes to `report` exactly once, on the
/// channel's event loop.
final class WebhookRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    static let maxDiscardedBodyBytes = 64 * 1024

    private enum State {
        case awaitingHandshake
        case awaitingResponse
        case discardingBody(bytes: Int)
        case done
    }

    private let head: HTTPRequestHead
    private let body: ByteBuffer
    private let report: (WebhookHTTPResult) -> Void
    private var state = State.awaitingHandshake

    init(head: HTTPRequestHead, body: ByteBuffer, report: @escaping (WebhookHTTPResult) -> Void) {
        self.head = head
        self.body = body
        self.report = report
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .awaitingHandshake = state, event is TLSEvent {
            state = .awaitingResponse
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (unwrapInboundIn(data), state) {
        case (.head(let response), .awaitingResponse):
            // Informational (1xx) heads never get here: the decoder drops them.
            state = .discardingBody(bytes: 0)
            report(.response(status: Int(response.status.code)))
        case (.body(let part), .discardingBody(let bytes)):
            let total = bytes + part.readableBytes
            state = .discardingBody(bytes: total)
            if total > Self.maxDiscardedBodyBytes { finish(context: context) }
        case (.end, .discardingBody):
            finish(context: context)
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context: context, with: Self.failure(for: error, handshakeDone: !isAwaitingHandshake))
    }

    func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .awaitingHandshake:
            fail(context: context, with: .tls("the server closed the connection during the handshake"))
        case .awaitingResponse:
            fail(context: context, with: .protocolError("the server closed the connection without answering"))
        case .discardingBody, .done:
            state = .done
        }
        context.fireChannelInactive()
    }

    private var isAwaitingHandshake: Bool {
        if case .awaitingHandshake = state { return true }
        return false
    }

    /// Reports `failure` if nothing was reported yet, and closes.
    private func fail(context: ChannelHandlerContext, with failure: WebhookHTTPFailure) {
        switch state {
        case .awaitingHandshake, .awaitingResponse:
            state = .done
            report(.failure(failure))
            context.close(promise: nil)
        case .discardingBody:
            // The status was reported: a broken body after it changes nothing.
            finish(context: context)
        case .done:
            break
        }
    }

    private func finish(context: ChannelHandlerContext) {
        state = .done
        context.close(promise: nil)
    }

    /// What an error fired up the pipeline means for the caller.
    static func failure(for error: any Error, handshakeDone: Bool) -> WebhookHTTPFailure {
        switch error {
        case TLSError.handshakeFailed(let reason):
            return .tls(WebhookHTTPFailure.shortOpenSSLReason(reason))
        case TLSError.handshakeTimeout:
            return .tls("the handshake timed out")
        case TLSError.uncleanShutdown:
            return .protocolError("the server closed the connection without answering")
        case let error as TLSError:
            return handshakeDone ? .protocolError("\(error)") : .tls("\(error)")
        case let error as HTTPParserError:
            return .protocolError("malformed response (\(error))")
        case let error as IOError:
            return .protocolError("the connection failed: \(WebhookHTTPClient.describe(errno: error.errnoCode))")
        default:
            return .protocolError("\(error)")
        }
    }
}

@available(*, unavailable)
extension WebhookRequestHandler: Sendable {}
