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

    @Test func aLongTurnFlushesEveryBatchInsteadOfHoldingAllToItsEnd() throws {
        let channel = EmbeddedChannel()
        let counter = FlushCounter()
        try channel.pipeline.syncOperations.addHandler(counter)
        try channel.pipeline.syncOperations.addHandler(FlushCoalescingHandler(maximumWritesPerFlush: 4))
        // Ten streams of two frames each in one turn.
        for i in 0..<10 {
            channel.write(ByteBuffer(string: "headers \(i)"), promise: nil)
            channel.write(ByteBuffer(string: "data \(i)"), promise: nil)
            channel.flush()
        }
        #expect(counter.writesAtFlush == [4, 8, 12, 16, 20], "every fourth write goes at once")
        channel.embeddedEventLoop.run()
        #expect(counter.flushes == 5, "the deferred flush found nothing left to send")
        // A short turn after it is coalesced as before.
        channel.write(ByteBuffer(string: "one"), promise: nil)
        channel.flush()
        #expect(counter.flushes == 5)
        channel.embeddedEventLoop.run()
        #expect(counter.writesAtFlush.last == 21)
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
