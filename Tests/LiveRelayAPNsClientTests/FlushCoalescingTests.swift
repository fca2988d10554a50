import NIOCore
import NIOEmbedded
import Testing

@testable import LiveRelayAPNsClient

/// Counts the flushes that get past the coalescer and what was written before each.
private final class FlushCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    var flushes = 0
    var writesAtFlush: [Int] = []
    var writes = 0

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        writes += 1
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        flushes += 1
        writesAtFlush.append(writes)
        context.flush()
    }
}

@Suite("Flush coalescing below the HTTP/2 handler")
struct FlushCoalescingTests {
    @Test func theFlushesOfOneTurnBecomeOneAfterTheQueuedTasks() throws {
        let channel = EmbeddedChannel()
        let counter = FlushCounter()
        try channel.pipeline.syncOperations.addHandler(counter)
        try channel.pipeline.syncOperations.addHandler(FlushCoalescingHandler())
        // Three streams each write and flush in the same turn.
        for i in 0..<3 {
            channel.write(ByteBuffer(string: "frame \(i)"), promise: nil)
            channel.flush()
        }
        #expect(counter.flushes == 0, "nothing leaves before the turn ends")
        channel.embeddedEventLoop.run()
        #expect(counter.flushes == 1)
        #expect(counter.writesAtFlush == [3])
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "frame 0"))
        // A later turn gets its own flush.
        channel.write(ByteBuffer(string: "frame 3"), promise: nil)
        channel.flush()
        channel.embeddedEventLoop.run()
        #expect(counter.flushes == 2)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test func closeSendsWhatAPendingFlushHeld() throws {
        let channel = EmbeddedChannel()
        let counter = FlushCounter()
        try channel.pipeline.syncOperations.addHandler(counter)
        try channel.pipeline.syncOperations.addHandler(FlushCoalescingHandler())
        channel.write(ByteBuffer(string: "last"), promise: nil)
        channel.flush()
        channel.close(promise: nil)
        #expect(counter.flushes == 1, "flushed before the close, not after")
        channel.embeddedEventLoop.run()
        #expect(counter.flushes == 1, "and the deferred flush is not repeated")
    }
}
