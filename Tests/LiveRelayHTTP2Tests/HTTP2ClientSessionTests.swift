import LiveRelayTestSupport
import NIOCore
import NIOHPACK
import NIOHTTP2
import Testing

@testable import LiveRelayHTTP2

/// The nghttp2 session against swift-nio-http2 as the server: two independent
/// implementations, bytes passed between them by hand, no socket.
@Suite struct HTTP2ClientSessionTests {
    let session: HTTP2ClientSession
    let server: HTTP2ServerPeer

    init() throws {
        try self.init(serverSettings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: 100)])
    }

    init(serverSettings: HTTP2Settings) throws {
        session = try HTTP2ClientSession()
        server = try HTTP2ServerPeer(settings: serverSettings)
    }

    /// Client bytes to the server; the frames the server decoded.
    @discardableResult
    func clientToServer() throws -> [HTTP2Frame] {
        var bytes = ByteBuffer()
        try session.write(into: &bytes)
        return try server.receive(bytes)
    }

    /// Server frames (and whatever else it wrote) to the client; the client's events.
    @discardableResult
    func serverToClient(_ frames: [HTTP2Frame] = []) throws -> [HTTP2SessionEvent] {
        try session.receive(try server.send(frames))
        return session.takeEvents()
    }

    /// Preface and SETTINGS both ways, acknowledged both ways.
    func handshake() throws {
        try clientToServer()
        #expect(try serverToClient() == [.settings(maxConcurrentStreams: 100)])
        try clientToServer()
        _ = try server.output()
    }

    static func request(path: String) -> HTTP2HeaderList {
        var headers = HTTP2HeaderList()
        headers.append(name: ":method", value: "POST")
        headers.append(name: ":scheme", value: "https")
        headers.append(name: ":path", value: path, indexable: false)
        headers.append(name: ":authority", value: "api.push.apple.com")
        headers.append(name: "apns-topic", value: "com.example.app.push-type.liveactivity")
        return headers
    }

    @Test func theFirstBytesAreThePrefaceAndOurSettings() throws {
        let frames = try clientToServer()
        guard case .settings(.settings(let settings)) = frames.first?.payload else {
            Issue.record("expected SETTINGS first, got \(frames.map(\.payload))")
            return
        }
        #expect(settings.contains(HTTP2Setting(parameter: .enablePush, value: 0)))
        #expect(settings.contains(HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20)))
        #expect(settings.contains(HTTP2Setting(parameter: .maxHeaderListSize, value: 1 << 14)))
        // The connection's window raised to 1 MiB.
        #expect(frames.map(Self.summary).contains("WINDOW_UPDATE 0 \((1 << 20) - 65_535)"))
    }

    @Test func aRequestGoesAsHeadersAndDataAndItsAnswerComesBackAsEvents() throws {
        try handshake()
        let streamID = try session.submitRequest(Self.request(path: "/3/device/ab"), body: ByteBuffer(string: #"{"aps":{}}"#))
        #expect(streamID == 1)
        let frames = try clientToServer()
        #expect(session.takeEvents().isEmpty)
        #expect(session.headersSentThrough == 1)
        guard frames.count == 2, case .headers(let headers) = frames[0].payload, case .data(let data) = frames[1].payload,
            case .byteBuffer(let body) = data.data
        else {
            Issue.record("expected HEADERS and DATA, got \(frames.map(\.payload))")
            return
        }
        #expect(headers.headers.first(name: ":path") == "/3/device/ab")
        #expect(headers.headers.first(name: "apns-topic") == "com.example.app.push-type.liveactivity")
        #expect(!headers.endStream && data.endStream)
        #expect(String(buffer: body) == #"{"aps":{}}"#)

        let events = try serverToClient(
            HTTP2ServerPeer.answer(1, status: "400", fields: [("apns-id", "id-1")], body: #"{"reason":"BadDeviceToken"}"#))
        #expect(
            events == [
                .headerField(streamID: 1, name: ":status", value: "400"),
                .headerField(streamID: 1, name: "apns-id", value: "id-1"),
                .data(streamID: 1, Array(#"{"reason":"BadDeviceToken"}"#.utf8)),
                .endOfStream(streamID: 1),
                .streamClosed(streamID: 1, errorCode: 0),
            ])
        #expect(session.bodiesWaiting == 0)
    }

    @Test func aRequestWithoutABodyEndsTheStreamWithItsHeaders() throws {
        try handshake()
        _ = try session.submitRequest(Self.request(path: "/1/apps/x/all-channels"), body: ByteBuffer())
        let frames = try clientToServer()
        guard frames.count == 1, case .headers(let headers) = frames[0].payload else {
            Issue.record("expected one HEADERS, got \(frames.map(\.payload))")
            return
        }
        #expect(headers.endStream)
    }

    @Test func aPingIsAcknowledgedWithItsDataAndTheServersPingIsAnswered() throws {
        try handshake()
        try session.submitPing(0x0102_0304_0506_0708)
        let frames = try clientToServer()
        #expect(frames.map(Self.summary) == ["PING \(0x0102_0304_0506_0708)"])
        // nio-http2 acknowledges by itself.
        #expect(try serverToClient() == [.pingAcknowledged(0x0102_0304_0506_0708)])
        // And the other way: nghttp2 acknowledges the server's.
        try serverToClient([HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 42), ack: false))])
        #expect(try clientToServer().map(Self.summary) == ["PING 42 ack"])
    }

    @Test func aChangedStreamLimitIsReportedAndEnforced() throws {
        try handshake()
        let events = try serverToClient([
            HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 1)])))
        ])
        #expect(events == [.settings(maxConcurrentStreams: 1)])
        #expect(session.remoteMaxConcurrentStreams == 1)
        // The acknowledgement goes back.
        #expect(try clientToServer().map(Self.summary) == ["SETTINGS ack"])
    }

    @Test func goAwayClosesTheStreamsAboveItsLastIDAsRefused() throws {
        try handshake()
        let first = try session.submitRequest(Self.request(path: "/3/device/a"), body: ByteBuffer(string: "{}"))
        let second = try session.submitRequest(Self.request(path: "/3/device/b"), body: ByteBuffer(string: "{}"))
        try clientToServer()
        _ = session.takeEvents()
        let events = try serverToClient([
            HTTP2Frame(
                streamID: .rootStream, payload: .goAway(lastStreamID: HTTP2StreamID(Int(first)), errorCode: .noError, opaqueData: nil))
        ])
        #expect(events == [.goAway(lastStreamID: first, errorCode: 0), .streamClosed(streamID: second, errorCode: 7)])
        // A request submitted after the GOAWAY is never sent: closed as refused.
        let late = try session.submitRequest(Self.request(path: "/3/device/c"), body: ByteBuffer(string: "{}"))
        #expect(try clientToServer().isEmpty)
        #expect(session.takeEvents() == [.streamClosed(streamID: late, errorCode: 7)])
        // The one kept is still answered.
        let answer = try serverToClient(HTTP2ServerPeer.answer(HTTP2StreamID(Int(first)), status: "200"))
        #expect(answer.last == .streamClosed(streamID: first, errorCode: 0))
    }

    @Test func aResetFromEitherSideClosesTheStreamWithItsCode() throws {
        try handshake()
        let refused = try session.submitRequest(Self.request(path: "/3/device/a"), body: ByteBuffer(string: "{}"))
        let cancelled = try session.submitRequest(Self.request(path: "/3/device/b"), body: ByteBuffer(string: "{}"))
        try clientToServer()
        _ = session.takeEvents()
        #expect(
            try serverToClient([HTTP2Frame(streamID: HTTP2StreamID(Int(refused)), payload: .rstStream(.refusedStream))])
                == [.streamClosed(streamID: refused, errorCode: 7)])
        session.resetStream(cancelled)
        #expect(try clientToServer().map(Self.summary) == ["RST_STREAM \(cancelled) \(HTTP2ErrorCode.cancel)"])
        #expect(session.takeEvents() == [.streamClosed(streamID: cancelled, errorCode: 8)])
    }

    /// A body larger than the server's window waits inside the session until the
    /// server opens the window; nghttp2 sends what fits meanwhile.
    @Test func aBodyBeyondTheWindowWaitsForTheWindowUpdate() throws {
        let small = try HTTP2ClientSessionTests(serverSettings: [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 100), HTTP2Setting(parameter: .initialWindowSize, value: 16),
        ])
        try small.handshake()
        let streamID = try small.session.submitRequest(
            Self.request(path: "/3/device/a"), body: ByteBuffer(string: String(repeating: "x", count: 40)))
        let first = try small.clientToServer()
        #expect(first.compactMap(Self.dataLength) == [16])
        #expect(small.session.bodiesWaiting == 1)
        try small.serverToClient([
            HTTP2Frame(streamID: HTTP2StreamID(Int(streamID)), payload: .windowUpdate(windowSizeIncrement: 1000))
        ])
        let rest = try small.clientToServer()
        #expect(rest.compactMap(Self.dataLength) == [24])
        #expect(small.session.bodiesWaiting == 0)
    }

    /// The frames the tests compare, as text (nio-http2's frame payloads are not Equatable).
    static func summary(_ frame: HTTP2Frame) -> String {
        switch frame.payload {
        case .ping(let data, let ack): return "PING \(data.integer)" + (ack ? " ack" : "")
        case .settings(.ack): return "SETTINGS ack"
        case .settings(.settings(let settings)): return "SETTINGS \(settings)"
        case .windowUpdate(let increment): return "WINDOW_UPDATE \(Int(frame.streamID)) \(increment)"
        case .rstStream(let code): return "RST_STREAM \(Int(frame.streamID)) \(code)"
        default: return "\(frame.payload)"
        }
    }

    static func dataLength(_ frame: HTTP2Frame) -> Int? {
        guard case .data(let data) = frame.payload, case .byteBuffer(let bytes) = data.data else { return nil }
        return bytes.readableBytes
    }

    /// Bytes that are not HTTP/2 end the session with a GOAWAY, not a crash or a throw.
    @Test func aServerProtocolErrorIsAnsweredWithGoAwayAndEndsTheSession() throws {
        try handshake()
        #expect(!session.isFinished)
        // A DATA frame on stream 0 is a connection error (RFC 9113 §6.1).
        try session.receive(ByteBuffer(bytes: [0, 0, 1, 0, 0, 0, 0, 0, 0, 0x41]))
        var bytes = ByteBuffer()
        try session.write(into: &bytes)
        let goAway = try server.receive(bytes)
        #expect(goAway.contains { if case .goAway(_, .protocolError, _) = $0.payload { return true } else { return false } })
        #expect(session.isFinished)
    }

    @Test func oneThousandStreamsInFlightAllComplete() throws {
        let many = try HTTP2ClientSessionTests(serverSettings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000)])
        try many.clientToServer()
        #expect(try many.serverToClient() == [.settings(maxConcurrentStreams: 1000)])
        var ids: [Int32] = []
        for n in 0..<1000 {
            ids.append(try many.session.submitRequest(Self.request(path: "/3/device/\(n)"), body: ByteBuffer(string: "{}")))
        }
        let frames = try many.clientToServer()
        #expect(frames.filter { if case .headers = $0.payload { return true } else { return false } }.count == 1000)
        _ = many.session.takeEvents()
        let answers = ids.reversed().flatMap { HTTP2ServerPeer.answer(HTTP2StreamID(Int($0)), status: "200") }
        let closed = try many.serverToClient(answers).compactMap { event -> Int32? in
            if case .streamClosed(let id, 0) = event { return id } else { return nil }
        }
        #expect(Set(closed) == Set(ids))
    }
}
