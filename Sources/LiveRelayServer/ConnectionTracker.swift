import Foundation
import Logging
import NIOCore

/// Knows every open connection, so that shutdown can reach them all, and
/// refuses new ones over the server's connection limit.
///
/// It sits in the listening channel's pipeline, where each accepted child
/// channel passes as a read (like NIO's `ServerQuiescingHelper`). Its state is
/// confined to the listener's event loop. Shutdown sends each connection a
/// `RPCConnectionHandler.GracefulShutdown` event (the connection's state
/// machine then sends GOAWAY and closes once drained), and force-closes
/// whatever is still open when the drain time is up.
///
/// The global limit is enforced here because this is the cheapest place: a
/// child refused before the read goes on to NIO's accept handler is never
/// registered with a loop and never gets a pipeline, so it costs no TLS
/// handshake, no handler and no timer, only an accept and a close.
final class ConnectionTracker: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    /// At most one log line per interval about refused connections: a flood
    /// over the limit would otherwise turn every refusal into a line, and
    /// the logs would cost more than the refusals.
    static let refusalLogInterval = TimeAmount.seconds(10)

    let eventLoop: any EventLoop
    /// Read by connections as they become active, so one accepted while
    /// shutdown starts cannot miss the event.
    let shutdownFlag = ShutdownFlag()
    private let logger: Logger
    private let limiter: ConnectionLimiter
    private let metrics: ServerMetrics
    private var channels: [ObjectIdentifier: any Channel] = [:]
    private var drained: EventLoopPromise<Void>?
    /// Refusals not yet reported in a log line, and when the last line went out.
    private var refusedSinceLog = 0
    private var lastRefusalLog: NIODeadline?

    init(eventLoop: any EventLoop, logger: Logger, limiter: ConnectionLimiter, metrics: ServerMetrics) {
        self.eventLoop = eventLoop
        self.logger = logger
        self.limiter = limiter
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = unwrapInboundIn(data)
        guard limiter.acquireConnection() else {
            refuse(child)
            return
        }
        register(child)
        context.fireChannelRead(data)
    }

    /// Over the global limit: closed at once, not passed on. The peer sees the
    /// connection closed before the TLS handshake, with no GOAWAY (nothing
    /// speaks the protocol on it yet), and retries like after a refused connect.
    private func refuse(_ child: any Channel) {
        child.close(promise: nil)
        metrics.connectionsRefusedOverGlobalLimit.increment()
        refusedSinceLog += 1
        let now = NIODeadline.now()
        if let last = lastRefusalLog, now - last < Self.refusalLogInterval { return }
        lastRefusalLog = now
        logger.warning(
            "at the connection limit, refusing new connections",
            metadata: ["max_connections": "\(limiter.maxConnections)", "refused_since_last_report": "\(refusedSinceLog)"]
        )
        refusedSinceLog = 0
    }

    private func register(_ child: any Channel) {
        eventLoop.preconditionInEventLoop()
        let id = ObjectIdentifier(child)
        channels[id] = child
        // Every accepted child's close future completes, however it closes
        // (including a failed registration), so its slot always comes back.
        child.closeFuture.whenComplete { _ in
            self.limiter.releaseConnection()
            self.eventLoop.execute { self.unregister(id) }
        }
        if shutdownFlag.isSet {
            child.pipeline.fireUserInboundEventTriggered(RPCConnectionHandler.GracefulShutdown())
        }
    }

    private func unregister(_ id: ObjectIdentifier) {
        channels.removeValue(forKey: id)
        if channels.isEmpty, let drained {
            self.drained = nil
            drained.succeed(())
        }
    }

    var count: EventLoopFuture<Int> {
        eventLoop.submit { self.channels.count }
    }

    /// Asks every connection to drain; succeeds when all are closed. After
    /// `drainTime` the remaining ones are closed without waiting further.
    func shutdown(drainTime: TimeAmount) -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            self.shutdownFlag.set()
            if self.channels.isEmpty { return self.eventLoop.makeSucceededVoidFuture() }
            let promise = self.drained ?? self.eventLoop.makePromise()
            self.drained = promise
            for child in self.channels.values {
                child.pipeline.fireUserInboundEventTriggered(RPCConnectionHandler.GracefulShutdown())
            }
            let timer = self.eventLoop.scheduleTask(in: drainTime) {
                if !self.channels.isEmpty {
                    self.logger.notice("drain time is up, closing connections", metadata: ["connections": "\(self.channels.count)"])
                }
                self.closeAll()
            }
            promise.futureResult.whenComplete { _ in timer.cancel() }
            return promise.futureResult
        }
    }

    /// Hands `event` to every open connection's pipeline (``RPCConnectionHandler/KeysRevoked``).
    func broadcast(_ event: some Sendable) {
        eventLoop.execute {
            for child in self.channels.values { child.pipeline.fireUserInboundEventTriggered(event) }
        }
    }

    /// Closes every connection now (task cancellation during shutdown).
    func forceCloseAll() {
        eventLoop.execute {
            self.shutdownFlag.set()
            self.closeAll()
        }
    }

    private func closeAll() {
        for child in channels.values {
            child.close(promise: nil)
        }
    }
}

/// Set once, read from any connection's loop.
final class ShutdownFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    var isSet: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value
    }

    func set() {
        lock.lock()
        value = true
        lock.unlock()
    }
}
