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
        try self.init(onePass: bytes, limit: limit)
        try validate(prefix: "", decoded: true)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try validate(prefix: "") }

    /// Each text at most 1024 bytes: APNs caps the whole payload at 4 KB (5 KB for VoIP).
    /// `decoded`: see `Rules.text`.
    func validate(prefix: String, decoded: Bool = false) throws(MessageError) {
        try Rules.text(title, max: Rules.maxAlertText, "title", prefix: prefix, decoded: decoded)
        try Rules.text(body, max: Rules.maxAlertText, "body", prefix: prefix, decoded: decoded)
        try Rules.text(sound, max: Rules.maxAlertText, "sound", prefix: prefix, decoded: decoded)
    }
}

extension Alert: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_alert_descriptor() }

    init(c: UnsafePointer<LrAlert>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        title = t.optionalString(m.title, field: 1)
        body = t.optionalString(m.body, field: 2)
        sound = t.optionalString(m.sound, field: 3)
    }

    /// A sub-message field: its content counted in its own tally, then as one field of the parent's.
    @inline(__always)
    static func read(_ c: UnsafeMutablePointer<LrAlert>?, field: Int, tally: inout WireTally) -> Alert? {
        guard let c else { return nil }
        var sub = WireTally()
        let alert = Alert(c: c, tally: &sub)
        tally.message(sub, field: field)
        return alert
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
        try self.init(onePass: bytes, limit: limit)
        try validate(prefix: "", decoded: true)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    /// The per-entry rules. Whether at least one target is given is
    /// StartActivityRequest's rule, since it depends on the request.
    public func validate() throws(MessageError) { try validate(prefix: "") }

    /// True when the targets name at least one recipient set.
    var isEmpty: Bool { pushToStartTokens.isEmpty && externalUserIDs.isEmpty && allDevices != true }

    /// `decoded`: see `Rules.text`.
    func validate(prefix: String, decoded: Bool = false) throws(MessageError) {
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
            if !decoded { try Rules.noNUL(id, "\(prefix)external_user_ids[\(i)]") }
        }
    }
}

extension Targets: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_targets_descriptor() }

    init(c: UnsafePointer<LrTargets>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        pushToStartTokens = t.strings(m.n_push_to_start_tokens, m.push_to_start_tokens, field: 1)
        externalUserIDs = t.strings(m.n_external_user_ids, m.external_user_ids, field: 2)
        allDevices = t.optionalBool(m.has_all_devices, m.all_devices, field: 3)
    }

    /// A sub-message field: its content counted in its own tally, then as one field of the parent's.
    @inline(__always)
    static func read(_ c: UnsafeMutablePointer<LrTargets>?, field: Int, tally: inout WireTally) -> Targets? {
        guard let c else { return nil }
        var sub = WireTally()
        let targets = Targets(c: c, tally: &sub)
        tally.message(sub, field: field)
        return targets
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
