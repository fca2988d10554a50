import LiveRelayMessages
import LiveRelayWire
import NIOCore
import NIOEmbedded
import Testing

@testable import LiveRelayClient

/// `ClientConnectionHandler` alone in an `EmbeddedChannel`: no socket, no TLS,
/// no threads. The test plays the server, frame by frame, and a recording
/// delegate stands in for the pool; deadlines move with the loop's virtual clock.
@Suite struct ClientConnectionHandlerTests {
    static let ping = LiveRelayMethod.ping.rawValue

    @Test func connectingWritesThePrefaceAndHello() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }

        let frames = try connection.writtenFrames()
        guard case .hello(let hello)? = frames.first, frames.count == 1 else {
            Issue.record("expected HELLO alone, got \(frames)")
            return
        }
        #expect(hello.apiKey == ByteBuffer(string: EmbeddedClientConnection.apiKey))
        #expect(hello.clientName == "embedded")
        #expect(connection.delegate.events == [.usable])
    }

    @Test func aRequestBecomesAFrameAndItsReplyCompletesTheCall() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }
        try connection.welcome(maxRequestsInFlight: 8)
        #expect(connection.delegate.events == [.usable, .established(maxRequestsInFlight: 8)])

        let payload = ByteBuffer(message: PingRequest(payload: [1, 2, 3]))
        let call = connection.start(payload: payload)
        #expect(try connection.writtenFrames() == [.request(1, Frame.Request(method: Self.ping, payload: payload))])
        #expect(connection.result(of: call) == nil)

        let reply = ByteBuffer(message: PingReply(payload: [1, 2, 3], serverVersion: "embedded"))
        try connection.receive(.response(1, reply))
        #expect(connection.result(of: call) == .success(reply))
        #expect(connection.delegate.events.last == .released(calls: 1, succeeded: 1))
        #expect(connection.delegate.failures.isEmpty)
    }

    @Test func anErrorFrameFailsTheCallWithTheServersStatusAndDetails() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }
        try connection.welcome()
        let call = connection.start()
        _ = try connection.writtenFrames()

        var details = ByteBuffer()
        ErrorDetails(reason: "ActivityNotFound").serialize(into: &details)
        try connection.receive(.error(1, Frame.RequestError(status: .notFound, message: "no such activity", details: details)))
        let error = try #require(connection.failure(of: call))
        #expect(error.status == .notFound)
        #expect(error.message == "no such activity")
        #expect(error.details.reason == "ActivityNotFound")
        #expect(error.processing == .answered)
    }

    @Test func callsBeyondTheServersLimitWaitForAFreeSlot() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }
        try connection.welcome(maxRequestsInFlight: 1)

        let first = connection.start(payload: ByteBuffer(bytes: [1]))
        let second = connection.start(payload: ByteBuffer(bytes: [2]))
        #expect(try connection.writtenFrames() == [.request(1, Frame.Request(method: Self.ping, payload: ByteBuffer(bytes: [1])))])

        try connection.receive(.response(1, ByteBuffer()))
        #expect(connection.result(of: first) == .success(ByteBuffer()))
        #expect(connection.result(of: second) == nil)
        #expect(try connection.writtenFrames() == [.request(2, Frame.Request(method: Self.ping, payload: ByteBuffer(bytes: [2])))])
    }

    @Test func goAwayFailsTheCallsAboveItsLastIDAsNotProcessedAndLetsTheRestFinish() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }
        try connection.welcome()
        let calls = (0..<3).map { _ in connection.start() }
        #expect(try connection.writtenFrames().count == 3)

        try connection.receive(.goAway(Frame.GoAway(lastRequestID: 1, code: .noError, reason: "draining")))
        #expect(connection.delegate.events.contains(.goingAway(.noError)))
        for call in calls[1...] {
            let error = try #require(connection.failure(of: call))
            #expect(error.status == .unavailable)
            // Not processed: the pool may resend these on another connection.
            #expect(error.processing == .notProcessed)
            #expect(error.message.contains("draining"))
        }
        #expect(connection.result(of: calls[0]) == nil)

        // Nothing new goes out on a connection that is going away.
        let late = connection.start()
        #expect(connection.failure(of: late)?.processing == .notProcessed)
        #expect(try connection.writtenFrames() == [])

        try connection.receive(.response(1, ByteBuffer(bytes: [9])))
        #expect(connection.result(of: calls[0]) == .success(ByteBuffer(bytes: [9])))
    }

    @Test func goAwayUnauthenticatedSaysTheKeyWasRefused() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }
        let call = connection.start()
        try connection.receive(.goAway(Frame.GoAway(lastRequestID: 0, code: .unauthenticated, reason: "unknown key")))

        let error = try #require(connection.failure(of: call))
        #expect(error.status == .unauthenticated)
        #expect(error.message == "the server refused the API key: unknown key")
    }

    @Test func aDeadlineFailsTheCallAndCancelsItAtTheServer() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }
        try connection.welcome()
        let call = connection.start(deadline: connection.loop.now + .milliseconds(250))
        #expect(
            try connection.writtenFrames() == [
                .request(1, Frame.Request(timeoutMilliseconds: 250, method: Self.ping, payload: ByteBuffer()))
            ])

        connection.loop.advanceTime(by: .milliseconds(249))
        #expect(connection.result(of: call) == nil)

        connection.loop.advanceTime(by: .milliseconds(1))
        let error = try #require(connection.failure(of: call))
        #expect(error.status == .deadlineExceeded)
        #expect(error.processing == .mayHaveBeenProcessed)
        #expect(try connection.writtenFrames() == [.cancel(1)])

        // A reply that crosses the CANCEL is dropped: the call stays failed, once.
        try connection.receive(.response(1, ByteBuffer()))
        #expect(connection.failure(of: call)?.status == .deadlineExceeded)
        #expect(connection.delegate.failures.count == 1)
    }

    @Test func aCallWaitingForASlotFailsAtItsDeadlineWithoutBeingSent() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }
        try connection.welcome(maxRequestsInFlight: 1)
        _ = connection.start()
        let parked = connection.start(deadline: connection.loop.now + .seconds(1))
        #expect(try connection.writtenFrames().count == 1)

        connection.loop.advanceTime(by: .seconds(1))
        let error = try #require(connection.failure(of: parked))
        #expect(error.status == .deadlineExceeded)
        #expect(error.processing == .notProcessed)
        #expect(try connection.writtenFrames() == [])
    }

    @Test func cancellingASentCallWritesCancelAndFailsItAsCancelled() throws {
        let connection = try EmbeddedClientConnection()
        defer { connection.finish() }
        try connection.welcome()
        let call = connection.start()
        _ = try connection.writtenFrames()

        connection.handler.cancel(call)
        #expect(try connection.writtenFrames() == [.cancel(1)])
        #expect(connection.failure(of: call)?.status == .cancelled)
    }

    @Test func aQuietConnectionIsPingedAndClosedWhenNoPongComesInTime() throws {
        let connection = try EmbeddedClientConnection(keepaliveInterval: .seconds(30))
        defer { connection.finish() }
        try connection.welcome()
        let call = connection.start()
        _ = try connection.writtenFrames()

        connection.loop.advanceTime(by: .seconds(30))
        guard case .ping(let first)? = try connection.writtenFrames().first else {
            Issue.record("expected a PING after 30 s without a frame from the server")
            return
        }
        try connection.receive(.pong(first))
        connection.loop.advanceTime(by: .seconds(10))
        #expect(connection.result(of: call) == nil)
        #expect(connection.channel.isActive)

        // The PONG counts as traffic: the next PING is due 30 s after it, then 10 s to answer.
        connection.loop.advanceTime(by: .seconds(20))
        guard case .ping? = try connection.writtenFrames().first else {
            Issue.record("expected a second PING")
            return
        }
        connection.loop.advanceTime(by: .seconds(10))
        let error = try #require(connection.failure(of: call))
        #expect(error.status == .unavailable)
        #expect(error.processing == .mayHaveBeenProcessed)
        #expect(error.message.contains("keepalive timeout"))
        #expect(!connection.channel.isActive)
    }

    @Test func aClosedConnectionFailsSentCallsAsMaybeProcessedAndWaitingOnesAsNotProcessed() throws {
        let connection = try EmbeddedClientConnection()
        try connection.welcome(maxRequestsInFlight: 1)
        let sent = connection.start()
        let waiting = connection.start()
        #expect(try connection.writtenFrames().count == 1)

        connection.finish()
        let sentError = try #require(connection.failure(of: sent))
        #expect(sentError.status == .unavailable)
        #expect(sentError.processing == .mayHaveBeenProcessed)
        #expect(sentError.message == "connection closed")
        let waitingError = try #require(connection.failure(of: waiting))
        #expect(waitingError.status == .unavailable)
        #expect(waitingError.processing == .notProcessed)
        #expect(waitingError.message == "connection closed before the call was sent")
        #expect(connection.delegate.events.contains(.closed(wasUsable: true)))
    }
}

/// The handler under test, its channel, and the delegate that records what it reported.
///
/// Single-threaded: an `EmbeddedEventLoop` must be used from the thread that made it.
final class EmbeddedClientConnection {
    static let apiKey = "embedded-test-key"

    let channel: EmbeddedChannel
    let delegate = RecordingDelegate()
    let handler: ClientConnectionHandler
    private let connection: PooledConnection
    private var decoder = FrameDecoder(expectPreface: true, maxFrameSize: 16_777_215)
    private let encoder = FrameEncoder()

    var loop: EmbeddedEventLoop { self.channel.embeddedEventLoop }

    init(keepaliveInterval: TimeAmount? = nil) throws {
        let loop = EmbeddedEventLoop()
        self.connection = PooledConnection(id: 0, eventLoop: loop)
        self.handler = ClientConnectionHandler(
            configuration: ClientConnectionStateMachine.Configuration(
                apiKey: ByteBuffer(string: Self.apiKey), clientName: "embedded", keepaliveInterval: keepaliveInterval),
            pool: self.delegate, connection: self.connection, usesTLS: false, logger: testLogger
        )
        self.connection.handler = self.handler
        self.channel = EmbeddedChannel(handler: self.handler, loop: loop)
        try self.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 7443)).wait()
    }

    /// The server's WELCOME, after the test has read the client's HELLO.
    func welcome(maxRequestsInFlight: UInt32 = 100) throws {
        _ = try self.writtenFrames()
        try self.receive(.welcome(Frame.Welcome(version: 1, settings: [Setting(.maxRequestsInFlight, maxRequestsInFlight)])))
    }

    /// One Ping call handed to the handler, as the pool would.
    func start(payload: ByteBuffer = ByteBuffer(), deadline: NIODeadline? = nil) -> ClientCall {
        let call = ClientCall(
            method: ClientConnectionHandlerTests.ping, payload: payload, deadline: deadline, idempotent: true,
            promise: self.loop.makePromise())
        self.handler.start(call)
        return call
    }

    /// Frames from the server as one socket read.
    func receive(_ frames: Frame...) throws {
        var buffer = ByteBuffer()
        for frame in frames { self.encoder.encode(frame, into: &buffer) }
        try self.channel.writeInbound(buffer)
        self.loop.run()
    }

    /// What the handler wrote and flushed since the last call, once its deferred flushes ran.
    func writtenFrames() throws -> [Frame] {
        self.loop.run()
        while let buffer = try self.channel.readOutbound(as: ByteBuffer.self) {
            self.decoder.append(buffer)
        }
        var frames: [Frame] = []
        while let frame = try self.decoder.nextFrame() { frames.append(frame) }
        return frames
    }

    /// The call's outcome, nil while it is outstanding.
    func result(of call: ClientCall) -> Result<ByteBuffer, LiveRelayClientError>? {
        self.loop.run()
        var result: Result<ByteBuffer, LiveRelayClientError>?
        call.promise.futureResult.whenComplete { outcome in
            result = outcome.mapError {
                $0 as? LiveRelayClientError ?? LiveRelayClientError(status: .unknown, message: "\($0)", processing: .answered)
            }
        }
        return result
    }

    func failure(of call: ClientCall) -> LiveRelayClientError? {
        guard case .failure(let error)? = self.result(of: call) else { return nil }
        return error
    }

    /// Closes the channel: whatever is outstanding fails, so no promise is left unfulfilled.
    func finish() {
        _ = try? self.channel.finish(acceptAlreadyClosed: true)
        self.loop.run()
    }
}

/// Stands in for the pool: records each report, and fails the calls handed back (the pool would resend some).
final class RecordingDelegate: ClientConnectionDelegate, @unchecked Sendable {
    enum Event: Hashable {
        case usable
        case established(maxRequestsInFlight: Int)
        case goingAway(GoAwayCode)
        case closed(wasUsable: Bool)
        case released(calls: Int, succeeded: Int)
    }

    private(set) var events: [Event] = []
    private(set) var failures: [LiveRelayClientError] = []

    func connectionUsable(_ connection: PooledConnection) {
        self.events.append(.usable)
    }

    func connectionEstablished(_ connection: PooledConnection, maxRequestsInFlight: Int) {
        self.events.append(.established(maxRequestsInFlight: maxRequestsInFlight))
    }

    func connectionGoingAway(_ connection: PooledConnection, code: GoAwayCode) {
        self.events.append(.goingAway(code))
    }

    func connectionClosed(_ connection: PooledConnection, error: (any Error)?, wasUsable: Bool) {
        self.events.append(.closed(wasUsable: wasUsable))
        connection.closePromise.succeed(())
    }

    func connectionReleased(_ connection: PooledConnection, calls: Int, succeeded: Int) {
        self.events.append(.released(calls: calls, succeeded: succeeded))
    }

    func callFailed(_ call: ClientCall, _ error: LiveRelayClientError) {
        self.failures.append(error)
        call.fail(error)
    }
}
