import NIOCore

/// Turns the flushes of one event-loop turn into one.
///
/// Every APNs push is its own HTTP/2 stream, opened from its own event-loop task,
/// and each stream flushes when it has written its HEADERS and DATA. Without this
/// handler each of those flushes reaches the TLS handler, which seals a TLS record
/// and makes a `write` system call per push; a dispatcher sending thousands of
/// pushes per second then spends most of its time there. Placed below the HTTP/2
/// handler, it lets the frames of every stream opened in the same turn leave in
/// one flush at the end of the turn (after the tasks already queued), which costs
/// no latency worth the name. (Inside a read, swift-nio-http2 already coalesces.)
final class FlushCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    private var flushPending = false

    func flush(context: ChannelHandlerContext) {
        guard !flushPending else { return }
        flushPending = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            guard handler.flushPending else { return }  // a close already flushed
            handler.flushPending = false
            context.flush()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // What is written goes out before a graceful close (the TLS handler's close_notify follows it).
        if flushPending {
            flushPending = false
            context.flush()
        }
        context.close(mode: mode, promise: promise)
    }
}
