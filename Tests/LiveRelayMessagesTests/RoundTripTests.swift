import CLiveRelayProto
import NIOCore
import Testing

@testable import LiveRelayMessages

@Suite struct RoundTripTests {
    /// Encodes, checks the C struct protobuf-c unpacks, decodes, and compares.
    func roundTrip<M: LiveRelayMessage & CMessageConvertible>(_ value: M) throws {
        let bytes = value.serializedBytes()
        #expect(TestWire.check(bytes, M.cDescriptor), "protobuf_c_message_check failed for \(M.protoName)")
        let decoded = try M(serializedBytes: bytes)
        #expect(decoded == value)
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        value.serialize(into: &buffer)
        #expect(Array(buffer.readableBytesView) == bytes)
        #expect(try M(serializedBytes: buffer) == value)
        // Re-encoding the decoded value is byte-identical (canonical encoding).
        #expect(decoded.serializedBytes() == bytes)
    }

    @Test func registerTokenRequestEveryField() throws {
        var r = Fixtures.register
        r.activityID = "activity-1"
        r.remove = true
        try roundTrip(r)
        #expect(r.serializedBytes().count > 60)
    }

    @Test func registerTokenReply() throws {
        try roundTrip(RegisterTokenReply(result: .rotated, replacedToken: Fixtures.token2))
        try roundTrip(RegisterTokenReply(result: .unrecognized(77), replacedToken: "é"))
    }

    @Test func deliverySummaryAndParts() throws {
        try roundTrip(Fixtures.summary)
        try roundTrip(FailureCount(reason: "Unregistered", count: .max))
        try roundTrip(UnresolvedTarget(kind: .pushToStartToken, value: Fixtures.token, reason: "unknown"))
    }

    @Test func activityReplies() throws {
        try roundTrip(
            StartActivityReply(
                activityID: "order-42", timestamp: -5, summary: Fixtures.summary,
                replayed: true, state: .active))
        try roundTrip(UpdateActivityReply(timestamp: .max, summary: Fixtures.summary, replayed: true, state: .ended))
        try roundTrip(EndActivityReply(timestamp: .min, summary: DeliverySummary(), replayed: false, state: .dismissed))
    }

    @Test func pingAndErrors() throws {
        try roundTrip(PingRequest(payload: Array(0...255)))
        try roundTrip(PingReply(payload: [0, 0, 1], serverTimeMS: 1_700_000_000_000, serverVersion: "1.0.0 ✓"))
        try roundTrip(
            ErrorDetails(
                fieldViolations: [
                    FieldViolation(field: "targets.push_to_start_tokens[3]", description: "not lowercase hex"),
                    FieldViolation(field: "app_id", description: "required"),
                ],
                retryAfterMS: 1500, reason: "QueueFull"))
        try roundTrip(FieldViolation(field: "a", description: "b"))
    }

    @Test func activityRequestsEveryField() throws {
        try roundTrip(Fixtures.start)
        try roundTrip(Fixtures.update)
        try roundTrip(Fixtures.end)
        try roundTrip(Alert(title: "日本語", body: "😀", sound: ""))
        try roundTrip(Targets(pushToStartTokens: [Fixtures.token], externalUserIDs: ["a", "b"], allDevices: true))
    }

    @Test func emptyMessagesEncodeToNothing() throws {
        #expect(RegisterTokenReply().serializedBytes() == [])
        #expect(DeliverySummary().serializedBytes() == [])
        #expect(Alert().serializedBytes() == [])
        #expect(try DeliverySummary(serializedBytes: [UInt8]()) == DeliverySummary())
        #expect(try Alert(serializedBytes: [UInt8]()) == Alert())
    }

    @Test func largeRepeatedFieldsRoundTrip() throws {
        let tokens = (0..<1000).map { i in String(repeating: "ab", count: 8) + String(format4(i)) }
        let targets = Targets(pushToStartTokens: tokens, externalUserIDs: tokens.map { "user-\($0)" })
        try roundTrip(targets)
        let failures = (0..<500).map { FailureCount(reason: "reason-\($0)", count: UInt32($0)) }
        try roundTrip(DeliverySummary(failures: failures))
    }

    private func format4(_ i: Int) -> String {
        let digits = Array("0123456789abcdef")
        return String((0..<4).reversed().map { digits[(i >> ($0 * 4)) & 15] })
    }

    @Test func unknownEnumValuesRoundTrip() throws {
        let r = RegisterTokenRequest(kind: .unrecognized(9), environment: .unrecognized(-3))
        let bytes = r.serializedBytes()
        // Decoding a request validates, so go through the reply path of the codec.
        let decoded = try TestWire.decodeUnvalidated(bytes, as: RegisterTokenRequest.self)
        #expect(decoded.kind.rawValue == 9)
        #expect(decoded.environment.rawValue == -3)
        #expect(decoded.serializedBytes() == bytes)
        #expect(Priority(rawValue: 7) == .unrecognized(7))
        // proto2 enum fields keep unknown numbers too, and request validation names them.
        let sparse = try TestWire.decodeUnvalidated([0x50, 0x07], as: StartActivityRequest.self)
        #expect(sparse.priority == .unrecognized(7))
        #expect(sparse.serializedBytes() == [0x50, 0x07])
        var start = Fixtures.start
        start.priority = .unrecognized(7)
        #expect(expectError(StartActivityRequest.self, start.serializedBytes()) == MessageError(.enumOutOfRange(7), field: "priority"))
        #expect(Priority.unrecognized(10) == .high)
    }

    @Test func unknownFieldsAreDropped() throws {
        let known = RegisterTokenReply(result: .created, replacedToken: "x").serializedBytes()
        let withUnknown =
            known + TestWire.string(99, "future") + TestWire.int(100, 7)
            + TestWire.tag(101, 1) + [1, 2, 3, 4, 5, 6, 7, 8] + TestWire.tag(102, 5) + [1, 2, 3, 4]
        let decoded = try RegisterTokenReply(serializedBytes: withUnknown)
        #expect(decoded == RegisterTokenReply(result: .created, replacedToken: "x"))
        #expect(decoded.serializedBytes() == known)
    }
}

/// Encodings computed by hand from the protobuf encoding spec.
@Suite struct ExpectedBytesTests {
    @Test func registerTokenRequestFewFields() {
        let r = RegisterTokenRequest(appID: "ab", kind: .update, expiresAt: 300, remove: true)
        // 0a 02 'a' 'b' | 10 02 | 48 ac 02 | 50 01
        #expect(r.serializedBytes() == [0x0A, 0x02, 0x61, 0x62, 0x10, 0x02, 0x48, 0xAC, 0x02, 0x50, 0x01])
    }

    @Test func proto3ZeroValuesAreOmitted() {
        #expect(RegisterTokenRequest(appID: "", kind: .unspecified, expiresAt: 0, remove: false).serializedBytes() == [])
        #expect(StartActivityReply(summary: nil).serializedBytes() == [])
    }

    @Test func proto2PresentZeroVersusAbsent() throws {
        let absent = UpdateActivityRequest()
        #expect(absent.serializedBytes() == [])
        let zero = UpdateActivityRequest(appID: "", staleDate: 0, relevanceScore: 0, priority: .unspecified, endActivity: false)
        // 0a 00 | 28 00 | 39 + 8 zero bytes | 40 00 | 48 00
        #expect(zero.serializedBytes() == [0x0A, 0x00, 0x28, 0x00, 0x39, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x00, 0x48, 0x00])
        let decoded = try TestWire.decodeUnvalidated(zero.serializedBytes(), as: UpdateActivityRequest.self)
        #expect(decoded == zero)
        #expect(decoded.staleDate == 0 && decoded.appID == "" && decoded.dismissalDate == nil)
    }

    @Test func negativeInt64IsTenBytes() {
        let r = UpdateActivityReply(timestamp: -1)
        #expect(r.serializedBytes() == [0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
    }

    @Test func emptyPresentSubMessage() throws {
        let reply = StartActivityReply(summary: DeliverySummary())
        #expect(reply.serializedBytes() == [0x1A, 0x00])
        #expect(try StartActivityReply(serializedBytes: [0x1A, 0x00]).summary == DeliverySummary())
        #expect(try StartActivityReply(serializedBytes: [UInt8]()).summary == nil)
        let start = StartActivityRequest(alert: Alert())
        #expect(start.serializedBytes() == [0x32, 0x00])
    }

    @Test func doubleAndPriority() {
        let r = EndActivityRequest(priority: .high)
        #expect(r.serializedBytes() == [0x40, 0x0A])
        let s = StartActivityRequest(relevanceScore: 1.0)
        #expect(s.serializedBytes() == [0x49, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F])
    }

    @Test func repeatedStringsAreNotPacked() {
        let t = Targets(pushToStartTokens: ["a", "b"], allDevices: true)
        #expect(t.serializedBytes() == [0x0A, 0x01, 0x61, 0x0A, 0x01, 0x62, 0x18, 0x01])
    }
}
