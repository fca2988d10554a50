import CLiveRelayProto
import Testing

@testable import LiveRelayMessages

func expectError<M: LiveRelayMessage>(
    _ type: M.Type, _ bytes: [UInt8], limit: Int = MessageLimits.maxMessageBytes,
    sourceLocation: SourceLocation = #_sourceLocation
) -> MessageError? {
    do {
        _ = try M(serializedBytes: bytes, limit: limit)
        Issue.record("decoding \(M.protoName) unexpectedly succeeded", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

@Suite struct WireScanTests {
    @Test func oversizeIsRejectedBeforeUnpack() {
        // Garbage that protobuf-c would reject as malformed: the size error must win.
        let bytes = [UInt8](repeating: 0xFF, count: 101)
        let error = expectError(PingRequest.self, bytes, limit: 100)
        #expect(error?.kind == .tooLarge(size: 101, limit: 100))
        let big = PingRequest(payload: [UInt8](repeating: 7, count: 1 << 20)).serializedBytes()
        #expect(expectError(PingRequest.self, big)?.kind == .tooLarge(size: big.count, limit: 1 << 20))
        #expect((try? PingRequest(serializedBytes: big, limit: 2 << 20))?.payload.count == 1 << 20)
    }

    @Test(arguments: [
        ("truncated varint", [0x08, 0x80] as [UInt8]),
        ("truncated tag", [0x80]),
        ("length past end", [0x0A, 0x05, 0x61]),
        ("huge length", [0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
        ("field number zero", [0x00, 0x01]),
        ("group wire type", [0x0B, 0x0C]),
        ("wire type 7", [0x0F]),
        ("truncated fixed64", [0x49, 0, 0, 0]),
        ("truncated fixed32", [0x0D, 0, 0]),
        ("overlong varint", [0x10] + [UInt8](repeating: 0xFF, count: 10) + [0x01]),
    ])
    func malformedFraming(name: String, bytes: [UInt8]) {
        #expect(expectError(RegisterTokenReply.self, bytes)?.kind == .malformed, "\(name)")
    }

    @Test func wrongWireTypeForKnownFieldIsRejectedByProtobufC() {
        // replaced_token (2) is a string; sent as varint. The scan skips it, protobuf-c refuses it.
        #expect(expectError(RegisterTokenReply.self, TestWire.int(2, 5))?.kind == .malformed)
        // result (1) is an enum; sent length-delimited.
        #expect(expectError(RegisterTokenReply.self, TestWire.string(1, "x"))?.kind == .malformed)
        // A sub-message whose bytes are garbage.
        #expect(expectError(StartActivityReply.self, TestWire.bytes(3, [0x08]))?.kind == .malformed)
    }

    @Test func embeddedNULInTopLevelString() {
        let bytes = TestWire.bytes(2, Array("abc".utf8) + [0] + Array("def".utf8))
        let error = expectError(RegisterTokenReply.self, bytes)
        #expect(error?.kind == .embeddedNUL)
        #expect(error?.field == "replaced_token")
        #expect(error?.description == "replaced_token: NUL character at byte 3")
    }

    @Test func invalidUTF8InRepeatedStringNamesTheIndex() {
        let targets =
            TestWire.string(1, Fixtures.token) + TestWire.string(2, "u1") + TestWire.string(1, Fixtures.token2)
            + TestWire.string(2, "u2") + TestWire.bytes(1, [0x61, 0xC3, 0x28])  // third token, bad UTF-8
        let start = TestWire.string(1, "app") + TestWire.bytes(11, targets)
        let error = expectError(StartActivityRequest.self, start)
        #expect(error?.kind == .invalidUTF8)
        #expect(error?.field == "targets.push_to_start_tokens[2]")
        let ids = TestWire.bytes(2, [0x61, 0x00])
        #expect(expectError(Targets.self, TestWire.string(2, "ok") + ids)?.field == "external_user_ids[1]")
    }

    @Test func nulInsideRepeatedSubMessage() {
        let good = TestWire.string(1, "QueueFull") + TestWire.int(2, 3)
        let bad = TestWire.bytes(1, [0x42, 0x00])
        let summary = TestWire.bytes(5, good) + TestWire.int(1, 9) + TestWire.bytes(5, bad)
        let error = expectError(UpdateActivityReply.self, TestWire.bytes(2, summary))
        #expect(error?.kind == .embeddedNUL)
        #expect(error?.field == "summary.failures[1].reason")
        let unresolved = TestWire.bytes(9, TestWire.bytes(2, [0xED, 0xA0, 0x80]))  // a UTF-16 surrogate
        #expect(expectError(DeliverySummary.self, unresolved)?.field == "unresolved[0].value")
    }

    @Test func alertStringInRequest() {
        let alert = TestWire.bytes(2, [0xF0, 0x9F, 0x98])  // truncated 4-byte sequence
        let error = expectError(UpdateActivityRequest.self, TestWire.bytes(4, alert))
        #expect(error?.kind == .invalidUTF8)
        #expect(error?.field == "alert.body")
    }

    @Test func bytesFieldsMayHoldAnything() throws {
        let bytes = TestWire.bytes(1, [0, 0xFF, 0xC0, 0x80])
        #expect(try PingRequest(serializedBytes: bytes).payload == [0, 0xFF, 0xC0, 0x80])
    }

    @Test(arguments: [
        ([0xC0, 0x80] as [UInt8], false),  // overlong NUL
        ([0xE0, 0x80, 0x80], false),  // overlong
        ([0xED, 0xBF, 0xBF], false),  // surrogate
        ([0xF4, 0x90, 0x80, 0x80], false),  // above U+10FFFF
        ([0xF5, 0x80, 0x80, 0x80], false),
        ([0x80], false),  // lone continuation
        ([0xC3, 0xA9], true),  // é
        ([0xEF, 0xBF, 0xBF], true),  // U+FFFF
        ([0xF4, 0x8F, 0xBF, 0xBF], true),  // U+10FFFF
        (Array("plain ASCII longer than eight bytes".utf8), true),
        (Array("0123456789abcdef".utf8) + [0], false),  // NUL after the fast path
    ])
    func utf8Checker(bytes: [UInt8], valid: Bool) {
        let result = bytes.withUnsafeBufferPointer { WireScan.checkString($0.baseAddress!, $0.count) }
        #expect((result == nil) == valid)
    }
}
