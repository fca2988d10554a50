import NIOCore

/// Turns the flushes of one event-loop turn into one.
///
/// The connection handler writes once per batch the pool hands it and once per
/// read (the acknowledgements and window updates the HTTP/2 session owes), each
/// followed by a flush. Without this handler each of those flushes reaches the
/// TLS handler, which seals a TLS record and makes a `write` system call; a
/// dispatcher handing over many small batches per turn would spend most of its
/// time there. Placed below the connection handler, it lets every write of a turn
/// leave in one flush at the end of the turn (after the tasks already queued),
/// which costs no latency worth the name.
///
/// Except when the turn is long: a burst of a thousand pushes handed over at once
/// would keep the first one in memory until the last was encoded, hundreds of
/// milliseconds on a loaded machine, long enough for a push checked against its
/// send-by time to leave after it. So once ``maximumWritesPerFlush`` writes are
/// held, they go at once.
final class FlushCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    /// Writes held before a flush goes at once: each is a batch of pushes or a read's replies.
    static let defaultMaximumWritesPerFlush = 64

    let maximumWritesPerFlush: Int
    private var flushPending = false
    private var writesHeld = 0

    init(maximumWritesPerFlush: Int = FlushCoalescingHandler.defaultMaximumWritesPerFlush) {
        self.maximumWritesPerFlush = max(1, maximumWritesPerFlush)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        writesHeld += 1
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        if writesHeld >= maximumWritesPerFlush {
            // The deferred flush, if one is queued, then finds nothing held.
            flushPending = false
            writesHeld = 0
            context.flush()
            return
        }
        guard !flushPending else { return }
        flushPending = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            guard handler.flushPending else { return }  // a close or a full batch already flushed
            handler.flushPending = false
            handler.writesHeld = 0
            context.flush()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // What is written goes out before a graceful close (the TLS handler's close_notify follows it).
        if flushPending {
            flushPending = false
            writesHeld = 0
            context.flush()
        }
        context.close(mode: mode, promise: promise)
    }
}
