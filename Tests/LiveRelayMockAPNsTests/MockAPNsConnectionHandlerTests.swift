import Foundation
import LiveRelayAPNs
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import Testing

@testable import LiveRelayMockAPNs

/// The stream plumbing of the frame-mode handler: the request assembly and the window
/// arithmetic as values, then many streams, resets, a drain and recording off over a socket.
@Suite("Mock APNs connection handler: streams as frames")
struct MockAPNsConnectionHandlerTests {
    static let group = MultiThreadedEventLoopGroup.singleton

    // MARK: Pure values

    static func headersFrame(_ fields: [(String, String)], endStream: Bool) -> HTTP2Frame.FramePayload {
        .headers(.init(headers: HPACKHeaders(fields), endStream: endStream))
    }

    static func dataFrame(_ bytes: [UInt8], endStream: Bool) -> HTTP2Frame.FramePayload {
        .data(.init(data: .byteBuffer(ByteBuffer(bytes: bytes)), endStream: endStream))
    }

    @Test("a request assembles from HEADERS and DATA frames: pseudo-headers apart, begun once, complete once")
    func assembly() {
        var request = MockAPNsStreamRequest()
        let head = Self.headersFrame(
            [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/ab"), ("apns-topic", "t"), ("apns-topic", "u")],
            endStream: false)
        #expect(request.receive(head) == .init(began: true, completed: false))
        #expect(request.receive(Self.dataFrame(Array("{\"a\"".utf8), endStream: false)) == .init())
        #expect(request.receive(Self.dataFrame(Array(":1}".utf8), endStream: true)) == .init(began: false, completed: true))
        #expect(request.method == "POST" && request.path == "/3/device/ab")
        #expect(request.headers.map(\.name) == ["apns-topic", "apns-topic"])
        #expect(request.headers.map(\.value) == ["t", "u"])
        #expect(request.request.body == Array("{\"a\":1}".utf8))
        // Trailers after END_STREAM (or any late frame) never complete it a second time.
        #expect(request.receive(Self.headersFrame([("x", "y")], endStream: true)) == .init())
        #expect(request.headers.count == 2)
        request.release()
        #expect(request.headers.isEmpty && request.body.isEmpty && request.isComplete)
    }

    @Test("a body is kept up to the recording cap; HEADERS with END_STREAM completes at once; abandon ends it")
    func bodyCapAndAbandon() {
        var long = MockAPNsStreamRequest()
        _ = long.receive(Self.headersFrame([(":method", "POST")], endStream: false))
        let chunk = [UInt8](repeating: 0x61, count: 5000)
        _ = long.receive(Self.dataFrame(chunk, endStream: false))
        #expect(long.receive(Self.dataFrame(chunk, endStream: true)).completed)
        #expect(long.body.count == MockAPNsRecorder.maxRecordedBodyBytes)

        var empty = MockAPNsStreamRequest()
        #expect(empty.receive(Self.headersFrame([(":method", "GET")], endStream: true)) == .init(began: true, completed: true))

        var dropped = MockAPNsStreamRequest()
        _ = dropped.receive(Self.headersFrame([(":method", "POST")], endStream: false))
        dropped.abandon()
        #expect(!dropped.receive(Self.dataFrame([1], endStream: true)).completed)
    }

    @Test("recording off (capacity 0, no file) keeps nothing; a record file or a capacity keeps records")
    func keepsRecords() throws {
        #expect(try !MockAPNsRecorder(capacity: 0, recordFile: nil).keepsRecords)
        #expect(try MockAPNsRecorder(capacity: 1, recordFile: nil).keepsRecords)
        let file = "/tmp/mock-apns-keeps-records-\(UInt32.random(in: 0...UInt32.max)).jsonl"
        let withFile = try MockAPNsRecorder(capacity: 0, recordFile: file)
        #expect(withFile.keepsRecords)
        withFile.close()
        _ = unlink(file)
    }

    // MARK: Over a socket

    func withMock(
        _ configure: (inout MockAPNsConfiguration) -> Void = { _ in }, _ body: (MockAPNsServer) async throws -> Void
    ) async throws {
        var configuration = MockAPNsConfiguration(apps: [Fixture.app])
        configuration.clock = MockAPNsClock { Fixture.nowMilliseconds }
        configure(&configuration)
        let server = try await MockAPNsServer.start(configuration: configuration, group: Self.group)
        do {
            try await body(server)
            try await server.shutdown()
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    func connect(_ server: MockAPNsServer) async throws -> TestAPNsConnection {
        try await TestAPNsConnection.connect(port: server.port, certificatePEM: server.certificatePEM, group: Self.group)
    }

    /// Waits (bounded) until the mock has judged `count` streams: an ordering point, not a timing assertion.
    func waitForStreams(_ server: MockAPNsServer, _ count: Int) async throws {
        for _ in 0..<2000 where server.counters.streamsReceived < count { try await Task.sleep(for: .milliseconds(5)) }
        try #require(server.counters.streamsReceived == count)
    }

    static func uuid(_ i: Int) -> String {
        let digits = String(i)
        return "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - digits.count) + digits
    }

    @Test("300 concurrent streams on one connection, answered out of order, each with its own answer; the limit holds")
    func manyStreams() async throws {
        try await withMock({
            $0.maxConcurrentStreams = 10
            $0.latency = MockAPNsLatency(random: .zero ... .milliseconds(5))
        }) { server in
            let c = try await connect(server)
            // One answer first: by then the client has the server's SETTINGS (before them it may open any number).
            let first = try await c.send(
                path: "/3/device/" + Fixture.token, headers: Fixture.headers(), body: Array(Fixture.updateBody.utf8))
            #expect(first.status == 200)
            let answers = try await withThrowingTaskGroup(of: (Int, TestResponse).self) { group in
                for i in 0..<300 {
                    group.addTask {
                        let headers = Fixture.headers(priority: i % 2 == 0 ? "10" : "7", extra: [("apns-id", Self.uuid(i))])
                        let response = try await c.send(
                            path: "/3/device/" + Fixture.token, headers: headers, body: Array(Fixture.updateBody.utf8))
                        return (i, response)
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            #expect(answers.count == 300)
            for (i, response) in answers {
                #expect(response.header("apns-id") == Self.uuid(i))
                #expect(response.status == (i % 2 == 0 ? 200 : 400))
                if i % 2 == 1 { #expect(response.bodyText == #"{"reason":"BadPriority"}"#) }
            }
            let counters = server.counters
            #expect(counters.responsesByStatus == [200: 151, 400: 150])
            // Closed streams leave the count: otherwise it would climb past the advertised limit.
            #expect((1...10).contains(counters.peakConcurrentStreams))
            let streamIDs = server.received.map(\.streamID)
            #expect(Set(streamIDs).count == 301 && streamIDs.allSatisfy { $0 % 2 == 1 })
            await c.close()
        }
    }

    @Test("RST_STREAM mid-request: no answer, no record, the stream leaves the count, the connection serves on")
    func resetMidRequest() async throws {
        try await withMock { server in
            let c = try await connect(server)
            let stream = try await c.multiplexer.createStreamChannel { $0.eventLoop.makeSucceededVoidFuture() }.get()
            var fields = HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + Fixture.token)])
            fields.add(name: ":authority", value: "localhost")
            for header in Fixture.headers() { fields.add(name: header.name, value: header.value) }
            try await stream.writeAndFlush(HTTP2Frame.FramePayload.headers(.init(headers: fields, endStream: false)))
            stream.close(promise: nil)  // RST_STREAM(CANCEL) before any DATA; written before the next stream's HEADERS

            let after = try await c.send(
                path: "/3/device/" + Fixture.token, headers: Fixture.headers(), body: Array(Fixture.updateBody.utf8))
            #expect(after.status == 200)
            #expect(server.received.map(\.streamID) == [3])
            #expect(server.counters.streamsReceived == 1)
            #expect(server.counters.peakConcurrentStreams == 1)
            await c.close()
        }
    }

    @Test("RST_STREAM while a delayed answer waits: the answer is not written, the connection serves on")
    func resetWhileAnswerDelayed() async throws {
        try await withMock({ $0.latency = MockAPNsLatency(fixed: .milliseconds(100)) }) { server in
            let c = try await connect(server)
            let stream = try await c.multiplexer.createStreamChannel { $0.eventLoop.makeSucceededVoidFuture() }.get()
            var fields = HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + Fixture.token)])
            fields.add(name: ":authority", value: "localhost")
            for header in Fixture.headers() { fields.add(name: header.name, value: header.value) }
            stream.write(HTTP2Frame.FramePayload.headers(.init(headers: fields, endStream: false)), promise: nil)
            let body = stream.allocator.buffer(string: Fixture.updateBody)
            try await stream.writeAndFlush(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(body), endStream: true)))
            try await waitForStreams(server, 1)
            stream.close(promise: nil)  // RST_STREAM(CANCEL), written before the next stream's HEADERS

            let after = try await c.send(
                path: "/3/device/" + Fixture.token, headers: Fixture.headers(), body: Array(Fixture.updateBody.utf8))
            #expect(after.status == 200)
            #expect(server.counters.responsesByStatus == [200: 2])
            #expect(server.counters.peakConcurrentStreams == 1)
            await c.close()
        }
    }

    @Test("shutdown with a stream open: GOAWAY names it, its delayed answer is still written, then the connection closes")
    func drainWithOpenStream() async throws {
        var configuration = MockAPNsConfiguration(apps: [Fixture.app])
        configuration.clock = MockAPNsClock { Fixture.nowMilliseconds }
        configuration.latency = MockAPNsLatency(fixed: .milliseconds(200))
        let server = try await MockAPNsServer.start(configuration: configuration, group: Self.group)
        let c = try await connect(server)
        async let answer = c.send(
            path: "/3/device/" + Fixture.token, headers: Fixture.headers(), body: Array(Fixture.updateBody.utf8))
        try await waitForStreams(server, 1)
        try await server.shutdown()
        #expect(try await answer.status == 200)
        #expect(c.frames.goAways.map(\.lastStreamID) == [1])
        try await c.channel.closeFuture.get()
    }

    @Test("recording off: nothing is kept, every counter still counts")
    func recordingOffCounts() async throws {
        try await withMock({ $0.recordingCapacity = 0 }) { server in
            let c = try await connect(server)
            let late = Fixture.headers().map { $0.name == "apns-expiration" ? ($0.name, "1795391000") : $0 }
            let statuses = [
                try await c.send(path: "/3/device/" + Fixture.token, headers: Fixture.headers(), body: Array(Fixture.updateBody.utf8)),
                try await c.send(path: "/3/device/" + Fixture.token, headers: late, body: Array(Fixture.updateBody.utf8)),
                try await c.send(
                    path: "/3/device/" + Fixture.token, headers: Fixture.headers(priority: "7"), body: Array(Fixture.updateBody.utf8)),
            ].map(\.status)
            #expect(statuses == [200, 200, 400])
            #expect(server.received.isEmpty)
            let counters = server.counters
            #expect(counters.streamsReceived == 3 && counters.recordsDiscarded == 3)
            #expect(counters.responsesByStatus == [200: 2, 400: 1])
            #expect(counters.receivedAfterExpiration == 1 && counters.mostMillisecondsPastExpiration == 1_000_000)
            await c.close()
        }
    }
}
