import NIOCore
import Testing

@testable import LiveRelayWire

func rawFrame(type: UInt8, id: UInt32 = 0, flags: UInt8 = 0, payload: [UInt8]) -> [UInt8] {
    var out = ByteBuffer()
    out.writeFrameHeader(FrameHeader(length: UInt32(payload.count), rawType: type, flags: flags, requestID: RequestID(id)))
    out.writeBytes(payload)
    return Array(out.readableBytesView)
}

@Suite struct FrameDecoderTests {
    // MARK: Splitting

    @Test func roundTripsEveryFrameInOneChunk() {
        let result = decodeAll([encoded(sampleFrames)])
        #expect(result.error == nil)
        #expect(result.frames == sampleFrames)
    }

    @Test func thePendingPayloadLengthIsKnownFromTheHeaderUntilTheFrameIsReturned() throws {
        var decoder = FrameDecoder(expectPreface: false)
        let frame = encoded([sampleFrames.first { if case .request = $0 { true } else { false } }!])
        let length = frame.count - Wire.frameHeaderSize
        #expect(decoder.pendingPayloadLength == nil)
        decoder.append(ByteBuffer(bytes: frame[..<(Wire.frameHeaderSize - 1)]))
        #expect(try decoder.nextFrame() == nil)
        #expect(decoder.pendingPayloadLength == nil, "not before the whole header")
        decoder.append(ByteBuffer(bytes: frame[(Wire.frameHeaderSize - 1)..<(Wire.frameHeaderSize + 1)]))
        #expect(try decoder.nextFrame() == nil)
        #expect(decoder.pendingPayloadLength == length)
        decoder.append(ByteBuffer(bytes: frame[(Wire.frameHeaderSize + 1)...]))
        #expect(try decoder.nextFrame() != nil)
        #expect(decoder.pendingPayloadLength == nil)
    }

    @Test func everySplitPointWithPreface() {
        let bytes = Wire.preface + encoded(sampleFrames)
        for split in 0...bytes.count {
            let result = decodeAll([Array(bytes[..<split]), Array(bytes[split...])], expectPreface: true)
            #expect(result.error == nil, "split at \(split)")
            #expect(result.frames == sampleFrames, "split at \(split)")
        }
    }

    @Test func everyPairOfSplitPointsInAShortStream() {
        let frames: [Frame] = [request(1, timeout: 7), .cancel(1), .ping(3)]
        let bytes = Wire.preface + encoded(frames)
        for first in 0...bytes.count {
            for second in first...bytes.count {
                let chunks = [Array(bytes[..<first]), Array(bytes[first..<second]), Array(bytes[second...])]
                let result = decodeAll(chunks, expectPreface: true)
                #expect(result.error == nil && result.frames == frames, "splits at \(first), \(second)")
            }
        }
    }

    @Test func oneByteAtATime() {
        let bytes = Wire.preface + encoded(sampleFrames)
        let result = decodeAll(bytes.map { [$0] }, expectPreface: true)
        #expect(result.error == nil)
        #expect(result.frames == sampleFrames)
    }

    @Test func incompleteHeaderWaits() throws {
        var decoder = FrameDecoder(expectPreface: false)
        let bytes = encoded(.cancel(5))
        decoder.append(buffer(Array(bytes[..<9])))
        #expect(try decoder.nextFrame() == nil)
        #expect(try decoder.nextFrame() == nil)
        decoder.append(buffer([bytes[9]]))
        #expect(try decoder.nextFrame() == .cancel(5))
        #expect(try decoder.nextFrame() == nil)
        try decoder.finish()
    }

    @Test func payloadsAreSlicesOfTheReceivedChunk() throws {
        var decoder = FrameDecoder(expectPreface: false)
        let chunk = buffer(encoded(.response(1, buffer([1, 2, 3])), .response(2, buffer([4, 5]))))
        decoder.append(chunk)
        guard case .response(1, let first) = try decoder.nextFrame(),
            case .response(2, let second) = try decoder.nextFrame()
        else {
            Issue.record("expected two responses")
            return
        }
        // Same storage, no copy: the slices point into the chunk's memory.
        let chunkBase = chunk.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        let firstBase = first.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        let secondBase = second.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        #expect(firstBase == chunkBase + 10)
        #expect(secondBase == chunkBase + 13 + 10)
    }

    // MARK: Linear time

    @Test func largeFrameOneByteAtATimeIsLinear() throws {
        let payload = [UInt8](repeating: 0x5A, count: 300_000)
        let bytes = encoded(.response(1, buffer(payload)))
        var decoder = FrameDecoder(expectPreface: false)
        var frames: [Frame] = []
        let start = ContinuousClock.now
        var one = ByteBuffer()
        for byte in bytes {
            one.clear()
            one.writeInteger(byte)
            decoder.append(one)
            while let frame = try decoder.nextFrame() { frames.append(frame) }
        }
        let elapsed = ContinuousClock.now - start
        #expect(frames == [.response(1, buffer(payload))])
        // Quadratic copying would move ~45 GB here; linear work takes well under a second even in debug.
        #expect(elapsed < .seconds(10))
    }

    @Test func manySmallFramesInOneChunk() throws {
        let count = 20_000
        var chunk = ByteBuffer()
        for id in 1...count {
            FrameEncoder().encode(.response(RequestID(UInt32(id)), buffer([UInt8(id & 0xFF)])), into: &chunk)
        }
        var decoder = FrameDecoder(expectPreface: false)
        decoder.append(chunk)
        var decoded = 0
        let start = ContinuousClock.now
        while let frame = try decoder.nextFrame() {
            decoded += 1
            #expect(frame.requestID == RequestID(UInt32(decoded)))
        }
        #expect(decoded == count)
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test func manySmallFramesOneByteAtATime() throws {
        let frames = (1...2_000).map { Frame.response(RequestID(UInt32($0)), buffer([1, 2, 3])) }
        let result = decodeAll(encoded(frames).map { [$0] })
        #expect(result.error == nil)
        #expect(result.frames == frames)
    }

    // MARK: Preface

    @Test func httpRequestInsteadOfPreface() {
        let result = decodeAll([Array("GET / HTTP/1.1\r\n".utf8)], expectPreface: true)
        #expect(result.error == .badPreface(received: [0x47]))
        #expect(
            result.error?.description
                == "bad connection preface: expected 4C 52 50 43 0D 0A 1A 0A (LRPC\\r\\n\\x1a\\n), got 47 "
                + "(text: an HTTP request or a plaintext protocol?)"
        )
        #expect(result.error?.goAwayCode == .protocolError)
    }

    @Test func tlsClientHelloInsteadOfPreface() {
        let result = decodeAll([hex("16 03 01 02 00 01")], expectPreface: true)
        #expect(result.error == .badPreface(received: [0x16]))
        #expect(result.error?.description.hasSuffix("(a TLS ClientHello: is the server running without TLS?)") == true)
    }

    @Test func prefaceMangledAfterSomeBytes() {
        // A line-ending translator turned CR LF into LF.
        let result = decodeAll(hex("4C 52 50 43 0A 1A 0A").map { [$0] }, expectPreface: true)
        #expect(result.error == .badPreface(received: hex("4C 52 50 43 0A")))
    }

    @Test func framesWithoutPreface() {
        let result = decodeAll([encoded(.ping(1))], expectPreface: true)
        #expect(result.error == .badPreface(received: [0x00]))
    }

    @Test func eofInsidePreface() {
        #expect(decodeAll([hex("4C 52 50")], expectPreface: true).error == .truncated(bufferedBytes: 3))
        #expect(decodeAll([], expectPreface: true).error == nil)
    }

    // MARK: Header checks

    @Test func oversizedFrameIsRejectedFromTheHeaderAlone() throws {
        var decoder = FrameDecoder(expectPreface: false)
        decoder.append(buffer(hex("00 10 00 01 | 04 | 00 | 00 00 00 01")))  // 1,048,577 bytes announced
        #expect(throws: FrameDecodingError.frameTooLarge(type: 4, length: 1_048_577, limit: 1_048_576)) {
            try decoder.nextFrame()
        }
        #expect(decoder.bufferedBytes == 0)
        let error = FrameDecodingError.frameTooLarge(type: 4, length: 1_048_577, limit: 1_048_576)
        #expect(error.goAwayCode == .frameSizeError)
        #expect(error.description == "RESPONSE frame of 1048577 bytes exceeds the limit of 1048576 bytes")
    }

    @Test func frameAtTheLimitIsAccepted() {
        let payload = [UInt8](repeating: 1, count: 16_384)
        let result = decodeAll([encoded(.response(1, buffer(payload)))], maxFrameSize: 16_384)
        #expect(result.frames == [.response(1, buffer(payload))])
        let over = decodeAll([encoded(.response(1, buffer(payload + [1])))], maxFrameSize: 16_384)
        #expect(over.error == .frameTooLarge(type: 4, length: 16_385, limit: 16_384))
    }

    @Test func helloIsCappedAt4096() {
        let result = decodeAll([Wire.preface + hex("00 00 10 01 | 01 | 00 | 00 00 00 00")], expectPreface: true)
        #expect(result.error == .frameTooLarge(type: 1, length: 4097, limit: 4096))
    }

    @Test func hugeLengthWithUnknownTypeReportsTheType() {
        let result = decodeAll([hex("FF FF FF FF | 0A | 00 | 00 00 00 00")])
        #expect(result.error == .unknownFrameType(0x0A))
        #expect(result.error?.description == "unknown frame type 0x0A")
    }

    @Test func unknownFrameTypes() {
        for type: UInt8 in [0x00, 0x0A, 0x7F, 0xFF] {
            #expect(decodeAll([rawFrame(type: type, payload: [])]).error == .unknownFrameType(type))
        }
    }

    @Test func wrongKindOfRequestID() {
        let cases: [(UInt8, UInt32, FrameType)] = [
            (0x01, 1, .hello), (0x02, 1, .welcome), (0x07, 3, .ping), (0x08, 3, .pong), (0x09, 1, .goAway),
            (0x03, 0, .request), (0x04, 0, .response), (0x05, 0, .error), (0x06, 0, .cancel),
        ]
        for (type, id, frameType) in cases {
            // Detected from the header, before the (absent) payload arrives.
            let header = Array(rawFrame(type: type, id: id, payload: [UInt8](repeating: 0, count: 8))[..<10])
            let result = decodeAll([header])
            #expect(result.error == .wrongKindOfRequestID(frameType, RequestID(id)), "type \(type)")
        }
        #expect(
            FrameDecodingError.wrongKindOfRequestID(.ping, 3).description
                == "PING frame with request id 3 (connection-level frames carry id 0)"
        )
        #expect(
            FrameDecodingError.wrongKindOfRequestID(.request, 0).description
                == "REQUEST frame with request id 0 (request-level frames need an id >= 1)"
        )
    }

    @Test func flagsAreIgnored() {
        let result = decodeAll([rawFrame(type: 0x06, id: 4, flags: 0xFF, payload: [])])
        #expect(result.frames == [.cancel(4)])
    }

    // MARK: Truncation

    @Test func eofInsideHeader() {
        let bytes = encoded(.cancel(1))
        #expect(decodeAll([Array(bytes[..<4])]).error == .truncated(bufferedBytes: 4))
    }

    @Test func eofInsidePayload() {
        let bytes = encoded(.response(1, buffer([1, 2, 3, 4])))
        let result = decodeAll([Array(bytes[..<12])])
        #expect(result.error == .truncated(bufferedBytes: 12))
        #expect(result.error?.description == "connection closed inside a frame (12 bytes of it received)")
    }

    @Test func eofBetweenFramesIsClean() {
        #expect(decodeAll([encoded(.cancel(1), .cancel(2))]).error == nil)
    }

    // MARK: Errors are final

    @Test func errorIsSticky() throws {
        var decoder = FrameDecoder(expectPreface: false)
        decoder.append(buffer(rawFrame(type: 0x42, payload: [])))
        #expect(throws: FrameDecodingError.unknownFrameType(0x42)) { try decoder.nextFrame() }
        decoder.append(buffer(encoded(.ping(1))))
        #expect(throws: FrameDecodingError.unknownFrameType(0x42)) { try decoder.nextFrame() }
        #expect(throws: FrameDecodingError.unknownFrameType(0x42)) { try decoder.finish() }
    }

    @Test func framesBeforeAnErrorAreDelivered() {
        let result = decodeAll([encoded(.ping(1)) + rawFrame(type: 0x0B, payload: []) + encoded(.ping(2))])
        #expect(result.frames == [.ping(1)])
        #expect(result.error == .unknownFrameType(0x0B))
    }
}
