import CLiveRelayProto
import NIOCore

// liverelay.proto (proto3): the app's event feed (ListEvents). proto3 like the
// rest of the file: every zero value means "not set", so the fields are plain
// values. Decoding runs validate() for the request, which names the first
// offending field; the reply and its events only get the UTF-8/NUL scan.

/// What an event of the feed reports (liverelay.v1.EventKind).
public enum EventKind: Sendable, Hashable {
    case unspecified
    /// Every push of a call is final: `account` is its final account.
    case callSettled
    /// One push failed for good: `token` and `reason`.
    case pushFailed
    /// A token was deleted because APNs said it is dead: `token`, `tokenKind`,
    /// `reason`, and `invalidSinceMS` when APNs gave it.
    case tokenPruned
    /// An activity ended, by a call or by the sweep: `activityState` says which.
    case activityEnded
    /// The app's pushes are held (`reason`); they are sent once dispatch resumes.
    case dispatchHeld
    /// The app's held pushes are sent again.
    case dispatchResumed
    /// A broadcast channel was deleted: `channelID`.
    case channelDeleted
    case unrecognized(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 0: self = .unspecified
        case 1: self = .callSettled
        case 2: self = .pushFailed
        case 3: self = .tokenPruned
        case 4: self = .activityEnded
        case 5: self = .dispatchHeld
        case 6: self = .dispatchResumed
        case 7: self = .channelDeleted
        default: self = .unrecognized(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .unspecified: 0
        case .callSettled: 1
        case .pushFailed: 2
        case .tokenPruned: 3
        case .activityEnded: 4
        case .dispatchHeld: 5
        case .dispatchResumed: 6
        case .channelDeleted: 7
        case let .unrecognized(value): value
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
}

/// One fact of an app's event feed (liverelay.v1.Event), as the protocol
/// shows it. Fields that do not apply to its kind are empty.
///
/// The proto's own name: no module that imports these messages declares
/// another top-level `Event` (LiveRelayDomain's record of a fact is `FeedEvent`).
public struct Event: LiveRelayMessage {
    public static let protoName = "liverelay.v1.Event"

    /// Its place in the app's feed: increasing in commit order, not dense, and
    /// unique within the app, so (app, cursor) identifies a redelivered event.
    public var cursor: UInt64
    public var kind: EventKind
    /// time_ms: when it was recorded, UNIX milliseconds of the node that recorded it.
    public var timeMS: Int64
    public var activityID: String
    /// The timestamp the call's reply gave (CALL_SETTLED, PUSH_FAILED).
    public var callTimestamp: Int64
    public var idempotencyKey: String
    /// CALL_SETTLED: the call's final account. Optional because a
    /// present-but-empty account must round-trip byte-identically.
    public var account: DeliverySummary?
    public var token: String
    public var tokenKind: TokenKind
    public var reason: String
    /// invalid_since_ms: when APNs says the token stopped being valid (UNIX milliseconds); 0 when it gave none.
    public var invalidSinceMS: Int64
    public var activityState: ActivityState
    public var channelID: String

    public init(
        cursor: UInt64 = 0, kind: EventKind = .unspecified, timeMS: Int64 = 0, activityID: String = "",
        callTimestamp: Int64 = 0, idempotencyKey: String = "", account: DeliverySummary? = nil, token: String = "",
        tokenKind: TokenKind = .unspecified, reason: String = "", invalidSinceMS: Int64 = 0,
        activityState: ActivityState = .unspecified, channelID: String = ""
    ) {
        self.cursor = cursor
        self.kind = kind
        self.timeMS = timeMS
        self.activityID = activityID
        self.callTimestamp = callTimestamp
        self.idempotencyKey = idempotencyKey
        self.account = account
        self.token = token
        self.tokenKind = tokenKind
        self.reason = reason
        self.invalidSinceMS = invalidSinceMS
        self.activityState = activityState
        self.channelID = channelID
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try validate(prefix: "") }

    func validate(prefix: @autoclosure () -> String) throws(MessageError) {
        try Rules.noNUL(activityID, prefix() + "activity_id")
        try Rules.noNUL(idempotencyKey, prefix() + "idempotency_key")
        try account?.validate(prefix: prefix() + "account.")
        try Rules.noNUL(token, prefix() + "token")
        try Rules.noNUL(reason, prefix() + "reason")
        try Rules.noNUL(channelID, prefix() + "channel_id")
    }
}

extension Event: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_event_descriptor() }

    init(c: UnsafePointer<LrEvent>) {
        let m = c.pointee
        self.init(
            cursor: m.cursor, kind: EventKind(rawValue: cEnumValue(m.kind)), timeMS: m.time_ms,
            activityID: cString(m.activity_id), callTimestamp: m.call_timestamp, idempotencyKey: cString(m.idempotency_key),
            account: m.account.map { DeliverySummary(c: $0) }, token: cString(m.token),
            tokenKind: TokenKind(rawValue: cEnumValue(m.token_kind)), reason: cString(m.reason),
            invalidSinceMS: m.invalid_since_ms, activityState: ActivityState(rawValue: cEnumValue(m.activity_state)),
            channelID: cString(m.channel_id))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrEvent> {
        let c = a.allocate(LrEvent.self)
        lr_event_init(c)
        c.pointee.cursor = cursor
        c.pointee.kind = cEnum(kind.rawValue)
        c.pointee.time_ms = timeMS
        c.pointee.activity_id = a.copy3(activityID)
        c.pointee.call_timestamp = callTimestamp
        c.pointee.idempotency_key = a.copy3(idempotencyKey)
        if let account { c.pointee.account = account.build(in: &a) }
        c.pointee.token = a.copy3(token)
        c.pointee.token_kind = cEnum(tokenKind.rawValue)
        c.pointee.reason = a.copy3(reason)
        c.pointee.invalid_since_ms = invalidSinceMS
        c.pointee.activity_state = cEnum(activityState.rawValue)
        c.pointee.channel_id = a.copy3(channelID)
        return c
    }
}

/// The app's events after a cursor: a long poll, answered as soon as there are
/// some, or with none once `waitMS` has passed.
public struct ListEventsRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.ListEventsRequest"

    /// The most events one reply carries: a page of events, each with at most a
    /// summary, stays far below the frame limit.
    public static let maxEventsLimit: UInt32 = 1000
    /// max_events 0 means this many.
    public static let defaultMaxEvents: UInt32 = 100
    /// The longest wait: a server holds the call (and the caller's deadline must
    /// cover it), so it is bounded like any other call's work.
    public static let maxWaitMS: UInt32 = 60_000

    public var appID: String
    /// Events after this cursor; 0 for the oldest the feed keeps.
    public var afterCursor: UInt64
    /// 0: `defaultMaxEvents`; at most `maxEventsLimit`.
    public var maxEvents: UInt32
    /// wait_ms: how long to wait for an event when there is none after the
    /// cursor (0: answer at once); at most `maxWaitMS`.
    public var waitMS: UInt32

    /// The parameters without a default are the fields the server requires of every such request.
    public init(appID: String, afterCursor: UInt64 = 0, maxEvents: UInt32 = 0, waitMS: UInt32 = 0) {
        self.init(appID: .some(appID), afterCursor: afterCursor, maxEvents: maxEvents, waitMS: waitMS)
    }

    /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose
    /// (`appID` is optional here only to tell this initialiser apart from the public one).
    @_disfavoredOverload
    package init(appID: String? = nil, afterCursor: UInt64 = 0, maxEvents: UInt32 = 0, waitMS: UInt32 = 0) {
        self.appID = appID ?? ""
        self.afterCursor = afterCursor
        self.maxEvents = maxEvents
        self.waitMS = waitMS
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(onePass: bytes, limit: limit)
        try validate()
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    /// The number of events that applies: 0 asks for the default.
    public var effectiveMaxEvents: Int { Int(maxEvents == 0 ? Self.defaultMaxEvents : maxEvents) }

    public func validate() throws(MessageError) {
        try Rules.appID(appID)
        try Rules.inRange(maxEvents, 0...Self.maxEventsLimit, "max_events")
        try Rules.inRange(waitMS, 0...Self.maxWaitMS, "wait_ms")
    }
}

extension ListEventsRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_list_events_request_descriptor() }

    init(c: UnsafePointer<LrListEventsRequest>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        appID = t.string3(m.app_id, field: 1)
        afterCursor = t.uint64_3(m.after_cursor, field: 2)
        maxEvents = t.uint32_3(m.max_events, field: 3)
        waitMS = t.uint32_3(m.wait_ms, field: 4)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrListEventsRequest> {
        let c = a.allocate(LrListEventsRequest.self)
        lr_list_events_request_init(c)
        c.pointee.app_id = a.copy3(appID)
        c.pointee.after_cursor = afterCursor
        c.pointee.max_events = maxEvents
        c.pointee.wait_ms = waitMS
        return c
    }
}

/// The events after the request's cursor, in cursor order.
public struct ListEventsReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.ListEventsReply"

    public var events: [Event]
    /// The next call's after_cursor: the last event's cursor (or past it, that of events
    /// this server cannot read), or the request's after_cursor when there is none.
    public var nextCursor: UInt64
    /// True when more events wait after `nextCursor` (the page was full).
    public var more: Bool

    public init(events: [Event] = [], nextCursor: UInt64 = 0, more: Bool = false) {
        self.events = events
        self.nextCursor = nextCursor
        self.more = more
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) {
        for (i, event) in events.enumerated() { try event.validate(prefix: "events[\(i)].") }
    }
}

extension ListEventsReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_list_events_reply_descriptor() }

    init(c: UnsafePointer<LrListEventsReply>) {
        let m = c.pointee
        events = cMessages(m.n_events, m.events, as: Event.self)
        nextCursor = m.next_cursor
        more = cBool(m.more)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrListEventsReply> {
        let c = a.allocate(LrListEventsReply.self)
        lr_list_events_reply_init(c)
        if !events.isEmpty {
            let array = a.pointers(LrEvent.self, events.count)
            for i in events.indices { array[i] = events[i].build(in: &a) }
            c.pointee.n_events = events.count
            c.pointee.events = array
        }
        c.pointee.next_cursor = nextCursor
        c.pointee.more = cBool(more)
        return c
    }
}
