import LiveRelayAPNs
import NIOCore

/// One APNs connection's handlers as the pool builds them (flush coalescing,
/// the connection handler with its HTTP/2 session), without the socket and
/// TLS below them and without a pool above: so that the instruction-count gate
/// (`Tests/Support/InstructionCounts`) can count what a push costs the client,
/// both ways through HTTP/2, on an `EmbeddedChannel`.
package final class APNsConnectionProbe {
    /// In pipeline order, after whatever carries the bytes.
    package let handlers: [any ChannelHandler]
    private let connection: APNsConnectionHandler

    package init(tokenSource: ProviderTokenSource, authority: String) throws {
        connection = try APNsConnectionHandler(
            id: 0, timeouts: .init(), tickInterval: .hours(1), authority: authority, tokenSource: tokenSource,
            delegate: NoPool())
        handlers = APNsConnectionPool.handlers(above: connection)
    }

    /// Opens a stream for each request, as the pool does with the requests it hands
    /// a connection; their answers go to `sink`. On the channel's event loop.
    package func send(_ requests: [APNsTaggedRequest], to sink: any APNsAnswerSink) {
        connection.send(requests.map { APNsPendingRequest(request: $0.request, sink: sink, tag: $0.tag) })
    }

    /// Without a pool: what a connection tells its pool goes nowhere.
    private final class NoPool: APNsConnectionDelegate {
        func connectionUpdated(_ id: Int, phase: APNsPoolStateMachine<APNsPendingRequest>.ConnectionPhase, streamLimit: Int) {}
        func connectionClosed(_ id: Int, connectError: String?) {}
        func requestsFinished(on id: Int, results: [Result<APNsResponse, APNsTransportError>]) {}
        func bounced(_ pending: APNsPendingRequest, from id: Int) {}
    }
}
