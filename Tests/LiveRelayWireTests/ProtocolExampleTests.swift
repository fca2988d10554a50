import NIOCore
import Testing

@testable import LiveRelayWire

/// The example exchange of docs/PROTOCOL.md, produced by the two state machines
/// talking through the encoder and decoder. If this test changes, update the doc.
@Suite struct ProtocolExampleTests {
    static let clientToServer = hex(
        """
        4C 52 50 43 0D 0A 1A 0A
        00 00 00 1C 01 00 00 00 00 00
        00 01 00 01 00 0B 6C 72 5F 64 65 6D 6F 5F 6B 65
        79 04 64 65 6D 6F 00 01 00 10 00 00
        00 00 00 25 03 00 00 00 00 01
        00 00 13 88 1C 2F 6C 69 76 65 72 65 6C 61 79 2E
        76 31 2E 4C 69 76 65 52 65 6C 61 79 2F 50 69 6E
        67 0A 02 68 69
        """
    )

    static let serverToClient = hex(
        """
        00 00 00 14 02 00 00 00 00 00
        00 01 00 01 00 10 00 00 00 02 00 00 00 64 00 03
        00 04 93 E0
        00 00 00 10 04 00 00 00 00 01
        0A 02 68 69 10 80 D0 95 FF BC 31 1A 03 31 2E 30
        """
    )

    @Test func pingExchange() throws {
        let encoder = FrameEncoder()
        var client = ClientConnectionStateMachine(
            configuration: ClientConnectionStateMachine.Configuration(apiKey: ByteBuffer(string: "lr_demo_key"), clientName: "demo")
        )
        let serverConfiguration = ServerConnectionStateMachine.Configuration()
        var server = ServerConnectionStateMachine(configuration: serverConfiguration, now: t(0))
        var serverDecoder = serverConfiguration.makeFrameDecoder()
        var clientDecoder = FrameDecoder(expectPreface: false)

        // Client: preface, HELLO and, without waiting, the Ping call.
        var toServer = ByteBuffer()
        for action in client.connect(now: t(0)) {
            switch action {
            case .writePreface: encoder.writePreface(into: &toServer)
            case .write(let frame): encoder.encode(frame, into: &toServer)
            default: Issue.record("unexpected \(action)")
            }
        }
        let start = client.startRequest(
            method: "/liverelay.v1.LiveRelay/Ping",
            payload: ByteBuffer(bytes: [0x0A, 0x02, 0x68, 0x69]),
            timeout: .seconds(5),
            now: t(0)
        )
        guard case .send(let id, let frame) = start else {
            Issue.record("expected .send, got \(start)")
            return
        }
        #expect(id == 1)
        encoder.encode(frame, into: &toServer)
        #expect(Array(toServer.readableBytesView) == Self.clientToServer)

        // Server: decode, authenticate, dispatch, answer.
        var toClient = ByteBuffer()
        var dispatched: [ServerConnectionStateMachine.Dispatch] = []
        func perform(_ actions: [ServerConnectionStateMachine.Action]) {
            for action in actions {
                switch action {
                case .write(let frame): encoder.encode(frame, into: &toClient)
                case .dispatch(let dispatch): dispatched.append(dispatch)
                case .authenticate(let key, let name, let version):
                    #expect(key == ByteBuffer(string: "lr_demo_key") && name == "demo" && version == 1)
                default: Issue.record("unexpected \(action)")
                }
            }
        }
        serverDecoder.append(toServer)
        while let frame = try serverDecoder.nextFrame() {
            perform(server.receive(frame, now: t(1)))
        }
        #expect(dispatched.isEmpty)  // not before authentication
        perform(server.authenticationSucceeded(now: t(2)))
        #expect(dispatched.map(\.id) == [1])
        #expect(dispatched.first?.deadline == t(1) + .seconds(5))
        let reply = ByteBuffer(bytes: hex("0A 02 68 69 10 80 D0 95 FF BC 31 1A 03 31 2E 30"))
        perform(server.respond(1, payload: reply, now: t(3)))
        #expect(Array(toClient.readableBytesView) == Self.serverToClient)

        // Client: WELCOME, then the reply.
        clientDecoder.append(toClient)
        var results: [ClientConnectionStateMachine.Action] = []
        while let frame = try clientDecoder.nextFrame() {
            results += client.receive(frame, now: t(4))
        }
        #expect(results == [.connected(version: 1, ServerSettings(idleTimeoutMilliseconds: 300_000)), .succeed(1, reply)])
    }

    @Test func statusCodesAreGRPCs() {
        #expect(StatusCode.allCases.count == 17)
        #expect(StatusCode.allCases.map(\.rawValue) == Array(0...16))
        #expect(StatusCode.unauthenticated.description == "UNAUTHENTICATED")
        #expect(StatusCode.deadlineExceeded.rawValue == 4 && StatusCode.unavailable.rawValue == 14)
        #expect(StatusCode.allCases.filter(\.isSafeToRetry) == [.unavailable])
    }

    @Test func goAwayCodes() {
        let codes: [GoAwayCode] = [
            .noError, .protocolError, .internalError, .frameSizeError, .unsupportedVersion, .unauthenticated, .idleTimeout,
            .helloTimeout, .enhanceYourCalm, .tooManyConnections,
        ]
        #expect(codes.map(\.rawValue) == Array(0...9))
        #expect(codes.map(\.description).suffix(2) == ["ENHANCE_YOUR_CALM", "TOO_MANY_CONNECTIONS"])
    }

    @Test func settingsValidation() throws {
        #expect(throws: SettingsError(reason: "MAX_REQUESTS_IN_FLIGHT must be at least 1")) {
            try ServerSettings(validating: [Setting(.maxRequestsInFlight, 0)])
        }
        // Server-only settings in a HELLO are ignored.
        #expect(
            try ClientSettings(validating: [Setting(.maxRequestsInFlight, 5), Setting(.maxFrameSize, 20_000)])
                == ClientSettings(maxFrameSize: 20_000))
        // ...whatever their value: a value invalid from a server is not the client's to break.
        #expect(
            try ClientSettings(validating: [Setting(.maxRequestsInFlight, 0), Setting(.idleTimeoutMilliseconds, 0)]) == ClientSettings())
        #expect(try ServerSettings(validating: []) == ServerSettings())
        #expect(SettingID(rawValue: 0x10).description == "SETTING_0x10")
    }
}

/// The other byte examples quoted in docs/PROTOCOL.md section 12.
@Suite struct ProtocolDocVectorTests {
    @Test func errorExample() {
        let frame = Frame.error(1, Frame.RequestError(status: .notFound, message: "no such activity", details: buffer([0x1A, 0x01, 0x78])))
        #expect(
            encoded(frame)
                == hex(
                    """
                    00 00 00 16 05 00 00 00 00 01
                    05
                    00 10 6E 6F 20 73 75 63 68 20 61 63 74 69 76 69 74 79
                    1A 01 78
                    """
                )
        )
    }

    @Test func controlFrameExamples() {
        #expect(encoded(.cancel(9)) == hex("00 00 00 00 06 00 00 00 00 09"))
        #expect(encoded(.ping(0x0102_0304_0506_0708)) == hex("00 00 00 08 07 00 00 00 00 00 01 02 03 04 05 06 07 08"))
        #expect(encoded(goAwayFrame(5, .noError, "bye")) == hex("00 00 00 0D 09 00 00 00 00 00 00 00 00 05 00 00 00 00 00 03 62 79 65"))
    }
}
