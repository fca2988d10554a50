import Foundation
import Logging
import NIOCore

/// Knows every open connection, so that shutdown can reach them all.
///
/// It sits in the listening channel's pipeline, where each accepted child
/// channel passes as a read (like NIO's `ServerQuiescingHelper`). Its state is
/// confined to the listener's event loop. Shutdown sends each connection a
/// `RPCConnectionHandler.GracefulShutdown` event (the connection's state
/// machine then sends GOAWAY and closes once drained), and force-closes
/// whatever is still open when the drain time is up.
final class ConnectionTracker: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    let eventLoop: any EventLoop
    /// Read by connections as they become active, so one accepted while
    /// shutdown starts cannot miss the event.
    let shutdownFlag = ShutdownFlag()
    private let logger: Logger
    private var channels: [ObjectIdentifier: any Channel] = [:]
    private var drained: EventLoopPromise<Void>?

    init(eventLoop: any EventLoop, logger: Logger) {
        self.eventLoop = eventLoop
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = unwrapInboundIn(data)
        register(child)
        context.fireChannelRead(data)
    }

    private func register(_ child: any Channel) {
        eventLoop.preconditionInEventLoop()
        let id = ObjectIdentifier(child)
        channels[id] = child
        child.closeFuture.whenComplete { _ in
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
