import CLiveRelayProto
import NIOCore
import Testing

@testable import LiveRelayMessages

/// A valid ListEvents request to mutate one field at a time, and events of every kind.
enum EventFixtures {
    static let app = "com.example.app"

    static var list: ListEventsRequest { ListEventsRequest(appID: app, afterCursor: 41, maxEvents: 50, waitMS: 20_000) }

    static var settled: Event {
        Event(
            cursor: 42, kind: .callSettled, timeMS: 1_900_000_000_000, activityID: "match-1", callTimestamp: 1_900_000_000,
            idempotencyKey: "key-1", account: DeliverySummary(targeted: 2, delivered: 1, failed: 1, complete: true))
    }

    static var pruned: Event {
        Event(
            cursor: 43, kind: .tokenPruned, timeMS: 1_900_000_000_001, token: Fixtures.token, tokenKind: .update,
            reason: "Unregistered", invalidSinceMS: 1_899_999_000_000)
    }

    static var ended: Event { Event(cursor: 44, kind: .activityEnded, activityID: "match-1", activityState: .expired) }
}

@Suite struct EventMessageTests {
    typealias F = EventFixtures

    /// Encodes, checks the C struct protobuf-c unpacks, decodes (validating requests),
    /// compares, and checks that re-encoding is byte-identical.
    func roundTrip<M: LiveRelayMessage & CMessageConvertible>(_ value: M) throws {
        let bytes = value.serializedBytes()
        #expect(TestWire.check(bytes, M.cDescriptor), "protobuf_c_message_check failed for \(M.protoName)")
        let decoded = try M(serializedBytes: bytes)
        #expect(decoded == value)
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        value.serialize(into: &buffer)
        #expect(Array(buffer.readableBytesView) == bytes)
        #expect(decoded.serializedBytes() == bytes)
    }

    // MARK: round trips

    @Test func eventMessagesRoundTrip() throws {
        try roundTrip(F.settled)
        try roundTrip(F.pruned)
        try roundTrip(F.ended)
        try roundTrip(Event(cursor: .max, kind: .unrecognized(99), timeMS: .min, invalidSinceMS: -1))
        try roundTrip(Event(account: DeliverySummary()))
        try roundTrip(Event())
        try roundTrip(F.list)
        try roundTrip(ListEventsRequest(appID: F.app))
        try roundTrip(ListEventsRequest(appID: F.app, afterCursor: .max, maxEvents: 1000, waitMS: 60_000))
        try roundTrip(
            ListEventsReply(
                events: (0..<300).map { Event(cursor: UInt64($0), kind: .pushFailed, token: Fixtures.token, reason: "r-\($0)") },
                nextCursor: 299, more: true))
        try roundTrip(ListEventsReply(events: [F.settled, Event(), F.pruned, F.ended], nextCursor: 44))
        try roundTrip(ListEventsReply(nextCursor: 7))
        try roundTrip(ListEventsReply())
    }

    @Test func everyKindKeepsItsNumber() {
        let kinds: [EventKind] = [
            .unspecified, .callSettled, .pushFailed, .tokenPruned, .activityEnded, .dispatchHeld, .dispatchResumed, .channelDeleted,
        ]
        #expect(kinds.map(\.rawValue) == Array(0...7))
        for kind in kinds { #expect(EventKind(rawValue: kind.rawValue) == kind) }
        #expect(EventKind(rawValue: 8) == .unrecognized(8))
        #expect(EventKind.unrecognized(1) == .callSettled)
    }

    // MARK: the encoding, computed by hand from the protobuf encoding spec

    @Test func eventBytes() {
        let event = Event(
            cursor: 1, kind: .tokenPruned, account: DeliverySummary(), tokenKind: .update, activityState: .ended, channelID: "Yw==")
        // 08 01 | 10 03 | 3a 00 (a present, empty account) | 48 02 | 60 03 | 6a 04 'Y' 'w' '=' '='
        #expect(
            event.serializedBytes() == [0x08, 0x01, 0x10, 0x03, 0x3A, 0x00, 0x48, 0x02, 0x60, 0x03, 0x6A, 0x04, 0x59, 0x77, 0x3D, 0x3D])
        // 0a 01 'a' | 10 ac 02 | 18 e8 07 | 20 e0 d4 03
        #expect(
            ListEventsRequest(appID: "a", afterCursor: 300, maxEvents: 1000, waitMS: 60_000).serializedBytes() == [
                0x0A, 0x01, 0x61, 0x10, 0xAC, 0x02, 0x18, 0xE8, 0x07, 0x20, 0xE0, 0xD4, 0x03,
            ])
        // 0a 00 (one empty event) | 10 02 | 18 01
        #expect(ListEventsReply(events: [Event()], nextCursor: 2, more: true).serializedBytes() == [0x0A, 0x00, 0x10, 0x02, 0x18, 0x01])
        // proto3: zero values are left out.
        #expect(Event().serializedBytes() == [])
        #expect(ListEventsReply().serializedBytes() == [])
    }

    // MARK: methods and keys

    @Test func listEventsMethod() {
        #expect(LiveRelayMethod.listEvents.rawValue == "/liverelay.v1.LiveRelay/ListEvents")
        #expect(LiveRelayMethod.listEvents.requestProtoName == "liverelay.v1.ListEventsRequest")
        #expect(LiveRelayMethod.listEvents.replyProtoName == "liverelay.v1.ListEventsReply")
        #expect(LiveRelayMethod(methodName: "ListEvents") == .listEvents)
        #expect(Event.protoName == "liverelay.v1.Event")
    }

    @Test func apiKeysMayBeGrantedListEvents() {
        let key = Admin.CreateAPIKeyRequest(appIDs: [F.app], allowedMethods: ["ListEvents"])
        #expect(validationError(key) == nil)
    }
}

/// One test per ListEvents rule: each breaks exactly one rule of the valid fixture.
@Suite struct EventValidationTests {
    typealias F = EventFixtures

    @Test func fixtureIsValid() {
        #expect(validationError(F.list) == nil)
        #expect(validationError(ListEventsRequest(appID: F.app)) == nil)
        #expect(ListEventsRequest(appID: F.app).effectiveMaxEvents == 100)
        #expect(F.list.effectiveMaxEvents == 50)
    }

    @Test func appIDRequired() {
        var list = F.list; list.appID = ""
        #expect(validationError(list) == MessageError(.missing, field: "app_id"))
        list.appID = "com/example"
        #expect(validationError(list)?.kind == .invalidValue)
        #expect(validationError(ListEventsRequest(afterCursor: 1)) == MessageError(.missing, field: "app_id"))
    }

    @Test func maxEventsAtMost1000() {
        var list = F.list; list.maxEvents = 1001
        #expect(validationError(list) == MessageError(.outOfRange, field: "max_events", detail: "1001 is outside 0...1000"))
        list.maxEvents = .max
        #expect(validationError(list)?.field == "max_events")
        list.maxEvents = 1000
        #expect(validationError(list) == nil)
        list.maxEvents = 0
        #expect(validationError(list) == nil)
    }

    @Test func waitAtMost60Seconds() {
        var list = F.list; list.waitMS = 60_001
        #expect(validationError(list) == MessageError(.outOfRange, field: "wait_ms", detail: "60001 is outside 0...60000"))
        list.waitMS = 60_000
        #expect(validationError(list) == nil)
        list.waitMS = 0
        #expect(validationError(list) == nil)
    }

    @Test func anyCursorIsValid() {
        var list = F.list
        for cursor: UInt64 in [0, 1, .max] {
            list.afterCursor = cursor
            #expect(validationError(list) == nil)
        }
    }

    @Test func decodingValidates() {
        let tooMany = ListEventsRequest(appID: F.app, maxEvents: 1001).serializedBytes()
        let outOfRange = MessageError(.outOfRange, field: "max_events", detail: "1001 is outside 0...1000")
        #expect(expectError(ListEventsRequest.self, tooMany) == outOfRange)
        let tooLong = ListEventsRequest(appID: F.app, waitMS: 60_001).serializedBytes()
        #expect(expectError(ListEventsRequest.self, tooLong)?.field == "wait_ms")
        #expect(expectError(ListEventsRequest.self, ListEventsRequest(afterCursor: 9).serializedBytes())?.field == "app_id")
    }

    @Test func repliesRefuseOnlyNUL() {
        let nul = ListEventsReply(events: [Event(), Event(reason: "x\u{0}")])
        #expect(validationError(nul)?.field == "events[1].reason")
        let account = Event(account: DeliverySummary(failures: [FailureCount(reason: "\u{0}")]))
        #expect(validationError(account)?.field == "account.failures[0].reason")
        #expect(validationError(ListEventsReply(events: [account]))?.field == "events[0].account.failures[0].reason")
        for event in [
            Event(activityID: "\u{0}"), Event(idempotencyKey: "\u{0}"), Event(token: "\u{0}"), Event(channelID: "\u{0}"),
        ] {
            #expect(validationError(event)?.kind == .embeddedNUL)
        }
        // Replies do not run the request rules: whatever a server sends is read as is.
        #expect(validationError(Event(kind: .unrecognized(9), token: "not hex", channelID: "not base64!")) == nil)
    }
}
