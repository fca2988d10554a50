import NIOCore

/// Writes frames into a `ByteBuffer`.
///
/// Stateless: the state machines decide what to send; the encoder only lays
/// out bytes. Each frame's length is computed first, capacity is reserved
/// once, and header and fields are written straight into the caller's buffer,
/// so a frame costs one write and no intermediate buffer; a channel handler
/// can encode a burst of frames into one buffer and flush it with one syscall.
///
/// Text fields longer than their length prefix allows (an ERROR message over
/// 65,535 bytes, a client name over 255) are cut at a UTF-8 character
/// boundary rather than trapping: they are for humans, and a long message must
/// not be able to crash a server. Fields whose meaning a cut would change
/// (method, API key) are checked by the state machines before they get here.
public struct FrameEncoder: Sendable {
    public init() {}

    /// The 8-byte connection preface, which a client writes before its HELLO.
    public func writePreface(into buffer: inout ByteBuffer) {
        buffer.writeBytes(Wire.preface)
    }

    /// Writes header and payload of `frame`; returns the number of bytes written.
    @discardableResult
    public func encode(_ frame: Frame, into buffer: inout ByteBuffer) -> Int {
        let payloadLength = Self.payloadLength(of: frame)
        buffer.reserveCapacity(minimumWritableBytes: Wire.frameHeaderSize + payloadLength)
        let start = buffer.writerIndex
        buffer.writeFrameHeader(
            FrameHeader(length: UInt32(payloadLength), type: frame.type, requestID: frame.requestID)
        )
        switch frame {
        case .hello(let hello):
            precondition(
                Wire.apiKeyLengthRange.contains(hello.apiKey.readableBytes),
                "HELLO api key must be 1...512 bytes"
            )
            buffer.writeMultipleIntegers(hello.minVersion, hello.maxVersion, UInt16(hello.apiKey.readableBytes))
            buffer.writeImmutableBuffer(hello.apiKey)
            let nameLength = hello.clientName.utf8PrefixLength(maxBytes: Int(UInt8.max))
            buffer.writeInteger(UInt8(nameLength))
            buffer.writeUTF8Prefix(hello.clientName, length: nameLength)
            buffer.writeSettings(hello.settings)

        case .welcome(let welcome):
            buffer.writeInteger(welcome.version)
            buffer.writeSettings(welcome.settings)

        case .request(_, let request):
            let methodLength = request.method.utf8.count
            precondition(Wire.methodLengthRange.contains(methodLength), "REQUEST method must be 1...255 bytes")
            buffer.writeMultipleIntegers(request.timeoutMilliseconds, UInt8(methodLength))
            buffer.writeString(request.method)
            buffer.writeImmutableBuffer(request.payload)

        case .response(_, let payload):
            buffer.writeImmutableBuffer(payload)

        case .error(_, let error):
            let messageLength = error.message.utf8PrefixLength(maxBytes: Int(UInt16.max))
            buffer.writeMultipleIntegers(error.status.rawValue, UInt16(messageLength))
            buffer.writeUTF8Prefix(error.message, length: messageLength)
            buffer.writeImmutableBuffer(error.details)

        case .cancel:
            break

        case .ping(let data), .pong(let data):
            buffer.writeInteger(data)

        case .goAway(let goAway):
            let reasonLength = goAway.reason.utf8PrefixLength(maxBytes: Int(UInt16.max))
            buffer.writeMultipleIntegers(goAway.lastRequestID.rawValue, goAway.code.rawValue, UInt16(reasonLength))
            buffer.writeUTF8Prefix(goAway.reason, length: reasonLength)
        }
        let written = buffer.writerIndex - start
        assert(written == Wire.frameHeaderSize + payloadLength, "payload length mismatch for \(frame.type)")
        return written
    }

    /// The payload size `encode` will announce in the header, without encoding:
    /// what the state machines compare with the peer's MAX_FRAME_SIZE.
    public static func payloadLength(of frame: Frame) -> Int {
        switch frame {
        case .hello(let hello):
            return 2 + 2 + 2 + hello.apiKey.readableBytes + 1
                + hello.clientName.utf8PrefixLength(maxBytes: Int(UInt8.max)) + 6 * hello.settings.count
        case .welcome(let welcome):
            return 2 + 6 * welcome.settings.count
        case .request(_, let request):
            return 4 + 1 + request.method.utf8.count + request.payload.readableBytes
        case .response(_, let payload):
            return payload.readableBytes
        case .error(_, let error):
            return 1 + 2 + error.message.utf8PrefixLength(maxBytes: Int(UInt16.max)) + error.details.readableBytes
        case .cancel:
            return 0
        case .ping, .pong:
            return Wire.pingPayloadSize
        case .goAway(let goAway):
            return 4 + 4 + 2 + goAway.reason.utf8PrefixLength(maxBytes: Int(UInt16.max))
        }
    }
}

extension ByteBuffer {
    @inlinable
    mutating func writeSettings(_ settings: [Setting]) {
        for setting in settings {
            self.writeMultipleIntegers(setting.id.rawValue, setting.value)
        }
    }

    @inlinable
    mutating func writeUTF8Prefix(_ string: String, length: Int) {
        if length == string.utf8.count {
            self.writeString(string)
        } else {
            self.writeBytes(string.utf8.prefix(length))
        }
    }
}

extension String {
    /// The number of UTF-8 bytes of the longest prefix that fits in `maxBytes`
    /// without splitting a character's encoding.
    @inlinable
    func utf8PrefixLength(maxBytes: Int) -> Int {
        let count = self.utf8.count
        if count <= maxBytes { return count }
        let utf8 = self.utf8
        var cut = maxBytes
        // Back up over continuation bytes (10xxxxxx) so the cut lands on a scalar boundary.
        while cut > 0, utf8[utf8.index(utf8.startIndex, offsetBy: cut)] & 0xC0 == 0x80 {
            cut -= 1
        }
        return cut
    }
}
