import CLiveRelayProto
import NIOCore

// activity.proto (proto2): the parts shared by the activity requests. proto2
// optional fields become Swift Optionals so "absent" and "zero/empty" stay distinct.

@inline(__always)
func cOptional<T>(_ has: protobuf_c_boolean, _ value: T) -> T? { has != 0 ? value : nil }

/// The alert that accompanies a push.
public struct Alert: LiveRelayMessage {
    public static let protoName = "liverelay.v1.Alert"

    public var title: String?
    public var body: String?
    public var sound: String?

    public init(title: String? = nil, body: String? = nil, sound: String? = nil) {
        self.title = title
        self.body = body
        self.sound = sound
    }

    /// Validates on decode: an Alert only ever arrives as part of a request.
    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
        try validate()
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try validate(prefix: "") }

    /// Each text at most 1024 bytes: APNs caps the whole payload at 4 KB (5 KB for VoIP).
    func validate(prefix: String) throws(MessageError) {
        try Rules.text(title, max: Rules.maxAlertText, "title", prefix: prefix)
        try Rules.text(body, max: Rules.maxAlertText, "body", prefix: prefix)
        try Rules.text(sound, max: Rules.maxAlertText, "sound", prefix: prefix)
    }
}

extension Alert: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_alert_descriptor() }

    init(c: UnsafePointer<LrAlert>) {
        title = cOptionalString(c.pointee.title)
        body = cOptionalString(c.pointee.body)
        sound = cOptionalString(c.pointee.sound)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAlert> {
        let c = a.allocate(LrAlert.self)
        lr_alert_init(c)
        c.pointee.title = a.copy(title)
        c.pointee.body = a.copy(body)
        c.pointee.sound = a.copy(sound)
        return c
    }
}

/// Who a StartActivity goes to.
public struct Targets: LiveRelayMessage {
    public static let protoName = "liverelay.v1.Targets"

    public var pushToStartTokens: [String]
    public var externalUserIDs: [String]
    public var allDevices: Bool?

    public init(pushToStartTokens: [String] = [], externalUserIDs: [String] = [], allDevices: Bool? = nil) {
        self.pushToStartTokens = pushToStartTokens
        self.externalUserIDs = externalUserIDs
        self.allDevices = allDevices
    }

    /// Validates on decode: Targets only ever arrive as part of a request.
    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
        try validate()
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    /// The per-entry rules. Whether at least one target is given is
    /// StartActivityRequest's rule, since it depends on the request.
    public func validate() throws(MessageError) { try validate(prefix: "") }

    /// True when the targets name at least one recipient set.
    var isEmpty: Bool { pushToStartTokens.isEmpty && externalUserIDs.isEmpty && allDevices != true }

    func validate(prefix: String) throws(MessageError) {
        let max = MessageLimits.maxTargets
        if pushToStartTokens.count > max {
            throw MessageError(
                .tooMany(count: pushToStartTokens.count, max: max),
                field: prefix + "push_to_start_tokens")
        }
        for i in pushToStartTokens.indices {
            try Rules.token(pushToStartTokens[i], "\(prefix)push_to_start_tokens[\(i)]")
        }
        if externalUserIDs.count > max {
            throw MessageError(
                .tooMany(count: externalUserIDs.count, max: max),
                field: prefix + "external_user_ids")
        }
        for i in externalUserIDs.indices {
            let id = externalUserIDs[i]
            if id.isEmpty {
                throw MessageError(.invalidValue, field: "\(prefix)external_user_ids[\(i)]", detail: "empty")
            }
            let n = id.utf8.count
            if n > Rules.maxUserID {
                throw MessageError(.tooLong(length: n, max: Rules.maxUserID), field: "\(prefix)external_user_ids[\(i)]")
            }
            try Rules.noNUL(id, "\(prefix)external_user_ids[\(i)]")
        }
    }
}

extension Targets: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_targets_descriptor() }

    init(c: UnsafePointer<LrTargets>) {
        let m = c.pointee
        pushToStartTokens = cStrings(m.n_push_to_start_tokens, m.push_to_start_tokens)
        externalUserIDs = cStrings(m.n_external_user_ids, m.external_user_ids)
        allDevices = cOptional(m.has_all_devices, cBool(m.all_devices))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrTargets> {
        let c = a.allocate(LrTargets.self)
        lr_targets_init(c)
        c.pointee.n_push_to_start_tokens = pushToStartTokens.count
        c.pointee.push_to_start_tokens = a.copy(pushToStartTokens)
        c.pointee.n_external_user_ids = externalUserIDs.count
        c.pointee.external_user_ids = a.copy(externalUserIDs)
        if let allDevices {
            c.pointee.has_all_devices = 1
            c.pointee.all_devices = cBool(allDevices)
        }
        return c
    }
}
