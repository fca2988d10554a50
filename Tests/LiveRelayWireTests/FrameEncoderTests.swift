import NIOCore
import Testing

@testable import LiveRelayWire

/// Every frame type's exact byte layout. These vectors are also the examples in docs/PROTOCOL.md.
@Suite struct FrameEncoderTests {
    let encoder = FrameEncoder()

    @Test func preface() {
        var out = ByteBuffer()
        encoder.writePreface(into: &out)
        #expect(Array(out.readableBytesView) == hex("4C 52 50 43 0D 0A 1A 0A"))
        #expect(String(decoding: Wire.preface, as: UTF8.self) == "LRPC\r\n\u{1a}\n")
    }

    @Test func header() {
        var out = ByteBuffer()
        out.writeFrameHeader(FrameHeader(length: 0x0102_0304, type: .error, flags: 0xAB, requestID: 0x0A0B_0C0D))
        #expect(Array(out.readableBytesView) == hex("01 02 03 04 | 05 | AB | 0A 0B 0C 0D"))
        #expect(out.readFrameHeader() == FrameHeader(length: 0x0102_0304, rawType: 5, flags: 0xAB, requestID: 0x0A0B_0C0D))
    }

    @Test func hello() {
        let frame = Frame.hello(
            Frame.Hello(
                minVersion: 1,
                maxVersion: 1,
                apiKey: buffer("k3y"),
                clientName: "cli",
                settings: [Setting(.maxFrameSize, 1_048_576)]
            )
        )
        #expect(
            encoded(frame)
                == hex(
                    """
                    00 00 00 13 | 01 | 00 | 00 00 00 00
                    00 01 | 00 01 | 00 03 | 6B 33 79 | 03 | 63 6C 69 | 00 01 00 10 00 00
                    """
                )
        )
    }

    @Test func welcome() {
        let frame = Frame.welcome(Frame.Welcome(version: 1, settings: ServerSettings(idleTimeoutMilliseconds: 300_000).settings))
        #expect(
            encoded(frame)
                == hex(
                    """
                    00 00 00 14 | 02 | 00 | 00 00 00 00
                    00 01 | 00 01 00 10 00 00 | 00 02 00 00 00 64 | 00 03 00 04 93 E0
                    """
                )
        )
    }

    @Test func requestFrame() {
        #expect(
            encoded(request(1, timeout: 5000))
                == hex(
                    """
                    00 00 00 24 | 03 | 00 | 00 00 00 01
                    00 00 13 88 | 1C
                    2F 6C 69 76 65 72 65 6C 61 79 2E 76 31 2E 4C 69 76 65 52 65 6C 61 79 2F 50 69 6E 67
                    0A 01 78
                    """
                )
        )
    }

    @Test func response() {
        #expect(encoded(.response(1, buffer([0x0A, 0x01, 0x78]))) == hex("00 00 00 03 | 04 | 00 | 00 00 00 01 | 0A 01 78"))
        #expect(encoded(.response(0xFFFF_FFFF, ByteBuffer())) == hex("00 00 00 00 | 04 | 00 | FF FF FF FF"))
    }

    @Test func errorFrameLayout() {
        let frame = Frame.error(7, Frame.RequestError(status: .notFound, message: "no", details: buffer([0x1A, 0x01, 0x78])))
        #expect(encoded(frame) == hex("00 00 00 08 | 05 | 00 | 00 00 00 07 | 05 | 00 02 | 6E 6F | 1A 01 78"))
        #expect(encoded(errorFrame(2, .unavailable, "")) == hex("00 00 00 03 | 05 | 00 | 00 00 00 02 | 0E | 00 00"))
    }

    @Test func cancel() {
        #expect(encoded(.cancel(9)) == hex("00 00 00 00 | 06 | 00 | 00 00 00 09"))
    }

    @Test func pingAndPong() {
        #expect(encoded(.ping(0x0102_0304_0506_0708)) == hex("00 00 00 08 | 07 | 00 | 00 00 00 00 | 01 02 03 04 05 06 07 08"))
        #expect(encoded(.pong(0x0102_0304_0506_0708)) == hex("00 00 00 08 | 08 | 00 | 00 00 00 00 | 01 02 03 04 05 06 07 08"))
    }

    @Test func goAway() {
        #expect(
            encoded(goAwayFrame(5, .noError, "bye"))
                == hex("00 00 00 0D | 09 | 00 | 00 00 00 00 | 00 00 00 05 | 00 00 00 00 | 00 03 | 62 79 65")
        )
        #expect(
            encoded(goAwayFrame(0, GoAwayCode(rawValue: 0xDEAD_BEEF), ""))
                == hex("00 00 00 0A | 09 | 00 | 00 00 00 00 | 00 00 00 00 | DE AD BE EF | 00 00")
        )
    }

    @Test func payloadLengthMatchesEncoding() {
        for frame in sampleFrames {
            var out = ByteBuffer()
            let written = encoder.encode(frame, into: &out)
            #expect(written == out.readableBytes)
            #expect(written == Wire.frameHeaderSize + FrameEncoder.payloadLength(of: frame))
            #expect(out.getInteger(at: 0, as: UInt32.self) == UInt32(FrameEncoder.payloadLength(of: frame)))
        }
    }

    @Test func appendsWithoutDisturbingExistingBytes() {
        var out = ByteBuffer(bytes: [0xEE])
        encoder.encode(.cancel(1), into: &out)
        encoder.encode(.cancel(2), into: &out)
        #expect(Array(out.readableBytesView) == [0xEE] + hex("00000000 06 00 00000001 00000000 06 00 00000002"))
    }

    @Test func longTextIsCutAtCharacterBoundaries() throws {
        let message = String(repeating: "a", count: 70_000)
        let error = encoded(errorFrame(1, .internal, message))
        #expect(error.count == 10 + 3 + 65_535)
        #expect(Array(error[11...12]) == [0xFF, 0xFF])

        // 200 two-byte characters: 255 would split one, so 254 bytes are kept.
        let name = String(repeating: "é", count: 200)
        let hello = Frame.hello(Frame.Hello(apiKey: buffer("k"), clientName: name))
        let bytes = encoded(hello)
        #expect(bytes[10 + 6] == 0x6B)  // key "k"
        #expect(bytes[10 + 7] == 254)  // client_name_length
        let decoded = decodeAll([bytes])
        #expect(decoded.error == nil)
        guard case .hello(let decodedHello) = decoded.frames.first else {
            Issue.record("expected HELLO")
            return
        }
        #expect(decodedHello.clientName == String(repeating: "é", count: 127))
    }
}

/// One frame of every type, with edge values, for round trips.
let sampleFrames: [Frame] = [
    .hello(
        Frame.Hello(
            minVersion: 1,
            maxVersion: 3,
            apiKey: ByteBuffer(bytes: Array(repeating: 0x41, count: 512)),
            clientName: "swift-client/1.0 ✓",
            settings: [Setting(.maxFrameSize, 16_384), Setting(SettingID(rawValue: 0x7777), 42)]
        )
    ),
    .hello(Frame.Hello(apiKey: buffer("k"), clientName: "")),
    .welcome(Frame.Welcome(version: 1, settings: ServerSettings().settings)),
    .welcome(Frame.Welcome(version: 1)),
    request(1, timeout: 0, payload: []),
    request(0xFFFF_FFFF, timeout: 0xFFFF_FFFF, method: String(repeating: "m", count: 255), payload: Array(0...255)),
    .response(2, ByteBuffer(bytes: Array(0...255))),
    .response(3, ByteBuffer()),
    .error(4, Frame.RequestError(status: .invalidArgument, message: "field “token” is not hex", details: buffer([0x1A, 0x01, 0x78]))),
    .error(5, Frame.RequestError(status: .unauthenticated, message: "")),
    .cancel(6),
    .ping(0),
    .ping(UInt64.max),
    .pong(0x0102_0304_0506_0708),
    goAwayFrame(7, .enhanceYourCalm, "calm down"),
    goAwayFrame(0, GoAwayCode(rawValue: 99), ""),
]
