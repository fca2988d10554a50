import CLiveRelayProto
import NIOCore

// liverelay.proto (proto3): RegisterToken's request and reply.

/// Registers, rotates or removes one APNs token. proto3: every field's zero
/// value means "not set", so the fields are plain values, not Optionals.
public struct RegisterTokenRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.RegisterTokenRequest"

    public var appID: String
    public var kind: TokenKind
    public var token: String
    public var environment: Environment
    public var attributesType: String
    public var activityID: String
    public var externalUserID: String
    public var deviceID: String
    public var expiresAt: Int64
    public var remove: Bool

    /// The parameters without a default are the fields the server requires of every such request; attributes_type is
    /// needed too for a push-to-start token, activity_id for an update token.
    public init(
        appID: String, kind: TokenKind, token: String, environment: Environment, attributesType: String = "",
        activityID: String = "", externalUserID: String = "", deviceID: String = "", expiresAt: Int64 = 0,
        remove: Bool = false
    ) {
        self.init(
            appID: .some(appID), kind: kind, token: token, environment: environment, attributesType: attributesType, activityID: activityID,
            externalUserID: externalUserID, deviceID: deviceID, expiresAt: expiresAt, remove: remove)
    }

    /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose
    /// (`appID` is optional here only to tell this initialiser apart from the public one).
    @_disfavoredOverload
    package init(
        appID: String? = nil, kind: TokenKind = .unspecified, token: String = "",
        environment: Environment = .unspecified, attributesType: String = "", activityID: String = "",
        externalUserID: String = "", deviceID: String = "", expiresAt: Int64 = 0, remove: Bool = false
    ) {
        self.appID = appID ?? ""
        self.kind = kind
        self.token = token
        self.environment = environment
        self.attributesType = attributesType
        self.activityID = activityID
        self.externalUserID = externalUserID
        self.deviceID = deviceID
        self.expiresAt = expiresAt
        self.remove = remove
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(onePass: bytes, limit: limit)
        try validate(decoded: true)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) { try validate(decoded: false) }

    /// `decoded`: called by decode, whose strings hold no NUL (see `Rules.text`).
    func validate(decoded: Bool) throws(MessageError) {
        try Rules.appID(appID)
        switch kind {
        case .unspecified: throw MessageError(.missing, field: "kind")
        case let .unrecognized(n): throw MessageError(.enumOutOfRange(n), field: "kind")
        case .pushToStart, .update: break
        }
        try Rules.token(token, "token")
        switch environment {
        case .unspecified: if !remove { throw MessageError(.missing, field: "environment") }
        case let .unrecognized(n): throw MessageError(.enumOutOfRange(n), field: "environment")
        case .sandbox, .production: break
        }
        try Rules.typeName(attributesType, required: kind == .pushToStart)
        try Rules.activityID(activityID, required: kind == .update)
        try Rules.text(externalUserID, max: Rules.maxUserID, "external_user_id", decoded: decoded)
        try Rules.text(deviceID, max: Rules.maxIdentifier, "device_id", decoded: decoded)
        try Rules.nonNegative(expiresAt, "expires_at")
    }
}

extension RegisterTokenRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_register_token_request_descriptor() }

    // Stored properties are assigned directly: delegating to the memberwise
    // init made the optimizer copy and destroy the whole struct once more.
    init(c: UnsafePointer<LrRegisterTokenRequest>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        appID = t.string3(m.app_id, field: 1)
        kind = TokenKind(rawValue: t.enum3(m.kind, field: 2))
        token = t.string3(m.token, field: 3)
        environment = Environment(rawValue: t.enum3(m.environment, field: 4))
        attributesType = t.string3(m.attributes_type, field: 5)
        activityID = t.string3(m.activity_id, field: 6)
        externalUserID = t.string3(m.external_user_id, field: 7)
        deviceID = t.string3(m.device_id, field: 8)
        expiresAt = t.int64_3(m.expires_at, field: 9)
        remove = t.bool3(m.remove, field: 10)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrRegisterTokenRequest> {
        let c = a.allocate(LrRegisterTokenRequest.self)
        lr_register_token_request_init(c)
        c.pointee.app_id = a.copy3(appID)
        c.pointee.kind = cEnum(kind.rawValue)
        c.pointee.token = a.copy3(token)
        c.pointee.environment = cEnum(environment.rawValue)
        c.pointee.attributes_type = a.copy3(attributesType)
        c.pointee.activity_id = a.copy3(activityID)
        c.pointee.external_user_id = a.copy3(externalUserID)
        c.pointee.device_id = a.copy3(deviceID)
        c.pointee.expires_at = expiresAt
        c.pointee.remove = cBool(remove)
        return c
    }
}

/// What RegisterToken did, and the token a rotation replaced.
public struct RegisterTokenReply: LiveRelayMessage {
    public static let protoName = "liverelay.v1.RegisterTokenReply"

    public var result: RegisterTokenResult
    public var replacedToken: String

    public init(result: RegisterTokenResult = .unspecified, replacedToken: String = "") {
        self.result = result
        self.replacedToken = replacedToken
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(unpacking: bytes, limit: limit)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    public func validate() throws(MessageError) {
        try Rules.noNUL(replacedToken, "replaced_token")
    }
}

extension RegisterTokenReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_register_token_reply_descriptor() }

    init(c: UnsafePointer<LrRegisterTokenReply>) {
        self.init(
            result: RegisterTokenResult(rawValue: cEnumValue(c.pointee.result)),
            replacedToken: cString(c.pointee.replaced_token))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrRegisterTokenReply> {
        let c = a.allocate(LrRegisterTokenReply.self)
        lr_register_token_reply_init(c)
        c.pointee.result = cEnum(result.rawValue)
        c.pointee.replaced_token = a.copy3(replacedToken)
        return c
    }
}
