import CLiveRelayProto
import NIOCore

// liverelay.proto (proto3): the delivery summary and the activity replies.
// Replies are built by the server and read by clients; decoding them only runs
// the UTF-8/NUL scan, and validate() only refuses NUL (which encoding would cut).

/// A StartActivity target that resolved to no token, so callers can tell which.
public struct UnresolvedTarget: LiveRelayMessage {
    public static let protoName = "liverelay.v1.UnresolvedTarget"

    public var kind: TargetKind
    public var value: String
    public var reason: String

    public init(kind: TargetKind = .unspecified, value: String = "", reason: String = "") {
        self.kind = kind
        self.value = value
        self.reason = reason
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try validate(prefix: "") }

    func validate(prefix: @autoclosure () -> String) throws(MessageError) {
        try Rules.noNUL(value, prefix() + "value")
        try Rules.noNUL(reason, prefix() + "reason")
    }
}

extension UnresolvedTarget: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_unresolved_target_descriptor() }

    init(c: UnsafePointer<LrUnresolvedTarget>) {
        self.init(
            kind: TargetKind(rawValue: cEnumValue(c.pointee.kind)),
            value: cString(c.pointee.value), reason: cString(c.pointee.reason))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrUnresolvedTarget> {
        let c = a.allocate(LrUnresolvedTarget.self)
        lr_unresolved_target_init(c)
        c.pointee.kind = cEnum(kind.rawValue)
        c.pointee.value = a.copy3(value)
        c.pointee.reason = a.copy3(reason)
        return c
    }
}

/// How many pushes failed for one reason.
public struct FailureCount: LiveRelayMessage {
    public static let protoName = "liverelay.v1.FailureCount"

    public var reason: String
    public var count: UInt32

    public init(reason: String = "", count: UInt32 = 0) {
        self.reason = reason
        self.count = count
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try Rules.noNUL(reason, "reason") }
}

extension FailureCount: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_failure_count_descriptor() }

    init(c: UnsafePointer<LrFailureCount>) {
        self.init(reason: cString(c.pointee.reason), count: c.pointee.count)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrFailureCount> {
        let c = a.allocate(LrFailureCount.self)
        lr_failure_count_init(c)
        c.pointee.reason = a.copy3(reason)
        c.pointee.count = count
        return c
    }
}

/// The account of every push one call caused.
public struct DeliverySummary: LiveRelayMessage {
    public static let protoName = "liverelay.v1.DeliverySummary"

    public var targeted: UInt32
    public var queued: UInt32
    public var delivered: UInt32
    public var failed: UInt32
    public var failures: [FailureCount]
    public var pruned: UInt32
    public var superseded: UInt32
    public var expired: UInt32
    public var unresolved: [UnresolvedTarget]
    public var complete: Bool
    /// Pushes sent at priority 5 instead of 10 because the activity's (or the
    /// channel's) priority-10 budget for the hour was spent.
    public var downgraded: UInt32

    public init(
        targeted: UInt32 = 0, queued: UInt32 = 0, delivered: UInt32 = 0, failed: UInt32 = 0,
        failures: [FailureCount] = [], pruned: UInt32 = 0, superseded: UInt32 = 0, expired: UInt32 = 0,
        unresolved: [UnresolvedTarget] = [], complete: Bool = false, downgraded: UInt32 = 0
    ) {
        self.targeted = targeted
        self.queued = queued
        self.delivered = delivered
        self.failed = failed
        self.failures = failures
        self.pruned = pruned
        self.superseded = superseded
        self.expired = expired
        self.unresolved = unresolved
        self.complete = complete
        self.downgraded = downgraded
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try validate(prefix: "") }

    func validate(prefix: String) throws(MessageError) {
        for (i, failure) in failures.enumerated() {
            try Rules.noNUL(failure.reason, "\(prefix)failures[\(i)].reason")
        }
        for (i, target) in unresolved.enumerated() {
            try target.validate(prefix: "\(prefix)unresolved[\(i)].")
        }
    }
}

extension DeliverySummary: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_delivery_summary_descriptor() }

    init(c: UnsafePointer<LrDeliverySummary>) {
        let m = c.pointee
        self.init(
            targeted: m.targeted, queued: m.queued, delivered: m.delivered, failed: m.failed,
            failures: cMessages(m.n_failures, m.failures, as: FailureCount.self),
            pruned: m.pruned, superseded: m.superseded, expired: m.expired,
            unresolved: cMessages(m.n_unresolved, m.unresolved, as: UnresolvedTarget.self),
            complete: cBool(m.complete), downgraded: m.downgraded)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrDeliverySummary> {
        let c = a.allocate(LrDeliverySummary.self)
        lr_delivery_summary_init(c)
        c.pointee.targeted = targeted
        c.pointee.queued = queued
        c.pointee.delivered = delivered
        c.pointee.failed = failed
        if !failures.isEmpty {
            let array = a.pointers(LrFailureCount.self, failures.count)
            for i in failures.indices { array[i] = failures[i].build(in: &a) }
            c.pointee.n_failures = failures.count
            c.pointee.failures = array
        }
        c.pointee.pruned = pruned
        c.pointee.superseded = superseded
        c.pointee.expired = expired
        if !unresolved.isEmpty {
            let array = a.pointers(LrUnresolvedTarget.self, unresolved.count)
            for i in unresolved.indices { array[i] = unresolved[i].build(in: &a) }
            c.pointee.n_unresolved = unresolved.count
            c.pointee.unresolved = array
        }
        c.pointee.complete = cBool(complete)
        c.pointee.downgraded = downgraded
        return c
    }
}

/// The reply to StartActivity.
public struct StartActivityReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.StartActivityReply"

    public var activityID: String
    public var timestamp: Int64
    /// Optional because a present-but-empty summary must round-trip byte-identically.
    public var summary: DeliverySummary?
    public var replayed: Bool
    public var state: ActivityState

    public init(
        activityID: String = "", timestamp: Int64 = 0, summary: DeliverySummary? = nil,
        replayed: Bool = false, state: ActivityState = .unspecified
    ) {
        self.activityID = activityID
        self.timestamp = timestamp
        self.summary = summary
        self.replayed = replayed
        self.state = state
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) {
        try Rules.noNUL(activityID, "activity_id")
        try summary?.validate(prefix: "summary.")
    }
}

extension StartActivityReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_start_activity_reply_descriptor() }

    init(c: UnsafePointer<LrStartActivityReply>) {
        let m = c.pointee
        self.init(
            activityID: cString(m.activity_id), timestamp: m.timestamp,
            summary: m.summary.map { DeliverySummary(c: $0) }, replayed: cBool(m.replayed),
            state: ActivityState(rawValue: cEnumValue(m.state)))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrStartActivityReply> {
        let c = a.allocate(LrStartActivityReply.self)
        lr_start_activity_reply_init(c)
        c.pointee.activity_id = a.copy3(activityID)
        c.pointee.timestamp = timestamp
        if let summary { c.pointee.summary = summary.build(in: &a) }
        c.pointee.replayed = cBool(replayed)
        c.pointee.state = cEnum(state.rawValue)
        return c
    }
}

/// The reply to UpdateActivity.
public struct UpdateActivityReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.UpdateActivityReply"

    public var timestamp: Int64
    public var summary: DeliverySummary?
    public var replayed: Bool
    public var state: ActivityState

    public init(
        timestamp: Int64 = 0, summary: DeliverySummary? = nil, replayed: Bool = false,
        state: ActivityState = .unspecified
    ) {
        self.timestamp = timestamp
        self.summary = summary
        self.replayed = replayed
        self.state = state
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try summary?.validate(prefix: "summary.") }
}

extension UpdateActivityReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_update_activity_reply_descriptor() }

    init(c: UnsafePointer<LrUpdateActivityReply>) {
        let m = c.pointee
        self.init(
            timestamp: m.timestamp, summary: m.summary.map { DeliverySummary(c: $0) },
            replayed: cBool(m.replayed), state: ActivityState(rawValue: cEnumValue(m.state)))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrUpdateActivityReply> {
        let c = a.allocate(LrUpdateActivityReply.self)
        lr_update_activity_reply_init(c)
        c.pointee.timestamp = timestamp
        if let summary { c.pointee.summary = summary.build(in: &a) }
        c.pointee.replayed = cBool(replayed)
        c.pointee.state = cEnum(state.rawValue)
        return c
    }
}

/// The reply to EndActivity.
public struct EndActivityReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.EndActivityReply"

    public var timestamp: Int64
    public var summary: DeliverySummary?
    public var replayed: Bool
    public var state: ActivityState

    public init(
        timestamp: Int64 = 0, summary: DeliverySummary? = nil, replayed: Bool = false,
        state: ActivityState = .unspecified
    ) {
        self.timestamp = timestamp
        self.summary = summary
        self.replayed = replayed
        self.state = state
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try summary?.validate(prefix: "summary.") }
}

extension EndActivityReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_end_activity_reply_descriptor() }

    init(c: UnsafePointer<LrEndActivityReply>) {
        let m = c.pointee
        self.init(
            timestamp: m.timestamp, summary: m.summary.map { DeliverySummary(c: $0) },
            replayed: cBool(m.replayed), state: ActivityState(rawValue: cEnumValue(m.state)))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrEndActivityReply> {
        let c = a.allocate(LrEndActivityReply.self)
        lr_end_activity_reply_init(c)
        c.pointee.timestamp = timestamp
        if let summary { c.pointee.summary = summary.build(in: &a) }
        c.pointee.replayed = cBool(replayed)
        c.pointee.state = cEnum(state.rawValue)
        return c
    }
}
