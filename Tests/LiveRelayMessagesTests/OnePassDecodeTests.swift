import CLiveRelayProto
import Testing

@testable import LiveRelayMessages

/// Unpacks `bytes` and reads them as `M` through the tally, as the one-pass decode does.
private func tally<M: OnePassDecodable>(_ bytes: [UInt8], as _: M.Type) -> (M, WireTally)? {
    let storage = bytes.isEmpty ? [0] : bytes
    return storage.withUnsafeBufferPointer { buffer -> (M, WireTally)? in
        guard let message = lr_unpack(M.cDescriptor, bytes.count, buffer.baseAddress!) else { return nil }
        defer { lr_free_unpacked(message) }
        var tally = WireTally()
        let value = M(c: UnsafeRawPointer(message).assumingMemoryBound(to: M.CStruct.self), tally: &tally)
        return (value, tally)
    }
}

/// The one-pass proof: canonical bytes are accounted for exactly (no pre-scan), and
/// anything else still gets the pre-scan's errors.
@Suite struct OnePassDecodeTests {
    @Test func varintSizes() {
        let cases: [(UInt64, Int)] = [(0, 1), (1, 1), (127, 1), (128, 2), (16383, 2), (16384, 3), (1 << 63, 10), (.max, 10)]
        for (value, size) in cases {
            #expect(WireTally.varintSize(value) == size, "\(value)")
            #expect(TestWire.varint(value).count == size, "\(value)")
        }
        #expect(WireTally.tagSize(15) == 1)
        #expect(WireTally.tagSize(16) == 2)
    }

    /// Every request our encoder makes (and so any canonical encoder) is proven by the
    /// tally alone: the total equals the size, nothing inexact.
    @Test func canonicalEncodingsAreAccountedForExactly() throws {
        func expectExact<M: OnePassDecodable & LiveRelayMessage>(_ value: M, sourceLocation: SourceLocation = #_sourceLocation) {
            let bytes = value.serializedBytes()
            guard let (decoded, t) = tally(bytes, as: M.self) else {
                Issue.record("\(M.protoName) did not unpack", sourceLocation: sourceLocation)
                return
            }
            #expect(decoded == value, sourceLocation: sourceLocation)
            #expect(t.exact, sourceLocation: sourceLocation)
            #expect(t.size == bytes.count, "\(M.protoName): \(t.size) of \(bytes.count) bytes", sourceLocation: sourceLocation)
        }
        expectExact(Fixtures.register)
        expectExact(RegisterTokenRequest(appID: "a", kind: .update, token: Fixtures.token, remove: true))
        expectExact(RegisterTokenRequest(expiresAt: -1))  // a 10-byte varint
        expectExact(Fixtures.start)  // field 16: a two-byte tag
        expectExact(Fixtures.update)
        expectExact(Fixtures.end)
        expectExact(StartActivityRequest(appID: "", alert: Alert(), targets: Targets(allDevices: true)))  // present but empty
        expectExact(Alert(title: "Tor! 2–1 für Köln 🎉", body: "", sound: String(repeating: "s", count: 300)))
        expectExact(Targets(pushToStartTokens: [Fixtures.token, ""], externalUserIDs: ["ü"], allDevices: false))
        expectExact(PingRequest(payload: [0, 0xFF, 0]))
        expectExact(PingRequest())
        expectExact(CreateChannelRequest(appID: "com.example.app", environment: .production, storagePolicy: .noStorage))
        expectExact(ListChannelsRequest(appID: "a", environment: .sandbox, pageSize: 1000, pageToken: "t"))
        expectExact(DeleteChannelRequest(appID: "a", channelID: Fixtures.channel))
        expectExact(ListEventsRequest(appID: "a", afterCursor: .max, maxEvents: 1000, waitMS: 60_000))  // a 10-byte varint
        expectExact(ListEventsRequest(appID: "a"))
    }

    @Test func whatTheStructCannotShowMakesTheTallySmaller() throws {
        let register = Fixtures.register.serializedBytes()
        // A string cut at a NUL, a duplicate, a proto3 zero sent anyway: all fewer bytes accounted for.
        let inputs = [
            register + TestWire.bytes(8, Array("dev".utf8) + [0] + Array("ice".utf8)),
            register + TestWire.string(8, "device-2"),
            register + TestWire.int(9, 0),
        ]
        for bytes in inputs {
            let (_, t) = try #require(tally(bytes, as: RegisterTokenRequest.self))
            #expect(t.exact)
            #expect(t.size < bytes.count)
        }
        // An unknown field is not walked: inexact.
        let (_, unknown) = try #require(tally(register + TestWire.string(99, "x"), as: RegisterTokenRequest.self))
        #expect(!unknown.exact)
    }

    @Test func nulInAStringStillNamesTheFieldAndOffset() {
        let bytes = Fixtures.register.serializedBytes() + TestWire.bytes(8, Array("dev".utf8) + [0] + Array("ice".utf8))
        let error = expectError(RegisterTokenRequest.self, bytes)
        #expect(error?.kind == .embeddedNUL)
        #expect(error?.description == "device_id: NUL character at byte 3")
    }

    @Test func anInvalidStringOverwrittenByALaterOneIsStillRefused() {
        // protobuf-c keeps only the last activity_id; the pre-scan saw the first.
        let bytes =
            TestWire.string(1, "com.example.app") + TestWire.bytes(2, [0x61, 0xFF]) + TestWire.string(2, "order-42")
            + TestWire.string(3, #"{"eta":5}"#)
        let error = expectError(UpdateActivityRequest.self, bytes)
        #expect(error?.kind == .invalidUTF8)
        #expect(error?.field == "activity_id")
        #expect(error?.detail == "invalid UTF-8 at byte 1")
        // Inside a sub-message too (alert fields are merged, the earlier title replaced).
        let alert = TestWire.bytes(4, TestWire.bytes(1, [0xC3])) + TestWire.bytes(4, TestWire.string(1, "ok"))
        let nested = expectError(UpdateActivityRequest.self, Fixtures.update.serializedBytes() + alert)
        #expect(nested?.field == "alert.title")
        #expect(nested?.kind == .invalidUTF8)
    }

    @Test func theFirstBadStringOnTheWireIsTheOneReported() {
        // Fields out of number order: the pre-scan's order (wire order) decides, not the struct's.
        let bytes =
            TestWire.bytes(6, [0xE0, 0x80, 0x80]) + TestWire.string(1, "com.example.app") + TestWire.bytes(3, [0xFF])
        #expect(expectError(RegisterTokenRequest.self, bytes)?.field == "activity_id")
    }

    @Test func nonCanonicalButValidInputDecodesAsBefore() throws {
        let value = Fixtures.register
        // kind sent twice (last wins), a zero expires_at sent explicitly, an unknown field with any bytes.
        let bytes =
            TestWire.int(2, 2) + value.serializedBytes() + TestWire.int(10, 0) + TestWire.bytes(99, [0xFF, 0x00])
        #expect(try RegisterTokenRequest(serializedBytes: bytes) == value)
        let ping = TestWire.bytes(1, [1]) + TestWire.bytes(1, [2, 3])
        #expect(try PingRequest(serializedBytes: ping).payload == [2, 3])
    }

    @Test func malformedBytesKeepThePreScansError() {
        // protobuf-c refuses these too; the pre-scan's error (with its byte offset) is the one reported.
        let truncated = Fixtures.register.serializedBytes() + [0x0A, 0x05, 0x61]
        let error = expectError(RegisterTokenRequest.self, truncated)
        #expect(error?.kind == .malformed)
        #expect(error?.detail == "length past the end at byte \(truncated.count - 2)")
        #expect(expectError(UpdateActivityRequest.self, [0x0B, 0x0C])?.detail == "unsupported wire type 3 at byte 0")
    }

    /// Larger than the unpack arena: pieces fall back to malloc and are freed by protobuf-c's walk;
    /// the next decode on the thread gets a clean arena.
    @Test func messagesLargerThanTheArenaDecodeAgainAndAgain() throws {
        let tokens = (0..<400).map { i in String(repeating: "0123456789abcdef", count: 4) + String(format4(i)) }
        let start = StartActivityRequest(
            appID: "com.example.app", activityID: "a", attributesType: "T", attributesJSON: "{}",
            contentStateJSON: "{}", targets: Targets(pushToStartTokens: tokens))
        let bytes = start.serializedBytes()
        #expect(bytes.count > 16 * 1024)
        for _ in 0..<3 {
            #expect(try StartActivityRequest(serializedBytes: bytes) == start)
            #expect(try RegisterTokenRequest(serializedBytes: Fixtures.register.serializedBytes()) == Fixtures.register)
        }
    }
}

/// Four lowercase hex digits (tokens must be hex).
private func format4(_ i: Int) -> String {
    let digits = Array("0123456789abcdef")
    return String((0..<4).reversed().map { digits[(i >> ($0 * 4)) & 15] })
}
