import LiveRelayTLS
import LiveRelayWire
import Logging
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One connection of the pool, from its first connect attempt to its close.
///
/// Shared between the pool (any thread, under the pool's lock) and the
/// connection's handler (its event loop); each field says which.
final class PooledConnection: @unchecked Sendable {
    let id: Int
    let eventLoop: any EventLoop
    /// Confined to `eventLoop`; set by the channel initializer.
    var handler: ClientConnectionHandler?
    /// Under the pool's lock: the close was reported (reports can come from the connect future and the handler).
    var closed = false
    let closePromise: EventLoopPromise<Void>

    init(id: Int, eventLoop: any EventLoop) {
        self.id = id
        self.eventLoop = eventLoop
        self.closePromise = eventLoop.makePromise()
    }

    /// Runs `body` with the handler on the connection's loop, without a hop when already there.
    func withHandler(_ body: @escaping @Sendable (ClientConnectionHandler?) -> Void) {
        if self.eventLoop.inEventLoop {
            body(self.handler)
        } else {
            self.eventLoop.execute { body(self.handler) }
        }
    }
}

extension ConnectionPool {
    /// Opens `connection`: TCP, then TLS when configured, then the handler,
    /// which writes the preface and HELLO once the transport is up.
    func connect(_ connection: PooledConnection) {
        guard let machineConfiguration else { return }
        let tlsContext = self.tlsContext
        let host = self.configuration.host
        let logger = self.logger
        let bootstrap = ClientBootstrap(group: connection.eventLoop)
            .connectTimeout(TimeAmount(self.configuration.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    var connectionLogger = logger
                    connectionLogger[metadataKey: "connection"] = "\(connection.id)"
                    let handler = ClientConnectionHandler(
                        configuration: machineConfiguration, pool: self, connection: connection,
                        usesTLS: tlsContext != nil, logger: connectionLogger
                    )
                    connection.handler = handler
                    if let tlsContext {
                        try channel.pipeline.syncOperations.addHandler(
                            OpenSSLHandler(context: tlsContext, role: .client, serverHostname: host)
                        )
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        bootstrap.connect(host: host, port: self.configuration.port).whenComplete { [self] result in
            if case .failure(let error) = result {
                self.connectionClosed(connection, error: error, wasUsable: false)
            }
        }
    }

    /// A connect failure in words an operator can act on ("connection refused", "certificate verify failed").
    static func describe(_ error: any Error) -> String {
        if let error = error as? TLSError { return error.description }
        if let error = error as? TLSContextError { return error.description }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return Self.describe(first.error) }
            return "could not resolve the host name"
        }
        if let error = error as? IOError {
            return String(cString: strerror(error.errnoCode)).lowercased()
        }
        if let error = error as? ChannelError, case .connectTimeout(let amount) = error {
            return "connect timed out after \(amount.nanoseconds / 1_000_000) ms"
        }
        return "\(error)"
    }
}
