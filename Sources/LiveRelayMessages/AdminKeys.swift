import CLiveRelayProto
import NIOCore

// admin.proto: API keys. An APIKey as the registry describes it (never its
// secret), CreateAPIKey's request and reply.

extension Admin {
    /// An API key, without its secret.
    public struct APIKey: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.APIKey"

        /// 12 lowercase base32 characters; the public part of the key.
        public var keyID: String?
        /// The apps a tenant key may act for; empty with all_apps.
        public var appIDs: [String]
        public var allApps: Bool?
        /// RPC names of liverelay.v1.LiveRelay ("StartActivity", ...): `LiveRelayMethod.methodName`.
        public var allowedMethods: [String]
        /// An admin key calls liverelay.admin.v1.Admin and nothing else.
        public var admin: Bool?
        public var label: String?
        public var createdAtMS: Int64?
        /// Rounded to the minute.
        public var lastUsedAtMS: Int64?
        /// Absent while the key is valid.
        public var revokedAtMS: Int64?
        /// Who owns the entry: "seed" (the API key file) or "admin".
        public var owner: String?

        public init(
            keyID: String? = nil, appIDs: [String] = [], allApps: Bool? = nil, allowedMethods: [String] = [],
            admin: Bool? = nil, label: String? = nil, createdAtMS: Int64? = nil, lastUsedAtMS: Int64? = nil,
            revokedAtMS: Int64? = nil, owner: String? = nil
        ) {
            self.keyID = keyID
            self.appIDs = appIDs
            self.allApps = allApps
            self.allowedMethods = allowedMethods
            self.admin = admin
            self.label = label
            self.createdAtMS = createdAtMS
            self.lastUsedAtMS = lastUsedAtMS
            self.revokedAtMS = revokedAtMS
            self.owner = owner
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try validate(prefix: "") }

        func validate(prefix: String) throws(MessageError) {
            try Rules.noNUL(keyID, prefix + "key_id")
            for (i, id) in appIDs.enumerated() { try Rules.noNUL(id, "\(prefix)app_ids[\(i)]") }
            for (i, name) in allowedMethods.enumerated() { try Rules.noNUL(name, "\(prefix)allowed_methods[\(i)]") }
            try Rules.noNUL(label, prefix + "label")
            try Rules.noNUL(owner, prefix + "owner")
        }
    }

    /// Mints a key. A tenant key names its apps (app_ids, which the server checks
    /// exist, or all_apps) and its RPCs (allowed_methods); an admin key (admin = true)
    /// names neither.
    public struct CreateAPIKeyRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.CreateAPIKeyRequest"

        public var appIDs: [String]
        public var allApps: Bool?
        /// `LiveRelayMethod.methodName`s: "RegisterToken", "StartActivity", ...
        public var allowedMethods: [String]
        public var admin: Bool?
        /// At most 200 bytes of UTF-8, no control characters.
        public var label: String?

        public init(
            appIDs: [String] = [], allApps: Bool? = nil, allowedMethods: [String] = [], admin: Bool? = nil,
            label: String? = nil
        ) {
            self.appIDs = appIDs
            self.allApps = allApps
            self.allowedMethods = allowedMethods
            self.admin = admin
            self.label = label
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            if admin == true {
                let detail = "an admin key calls the admin API only, for no app"
                if !appIDs.isEmpty { throw MessageError(.invalidValue, field: "app_ids", detail: detail) }
                if allApps == true { throw MessageError(.invalidValue, field: "all_apps", detail: detail) }
                if !allowedMethods.isEmpty { throw MessageError(.invalidValue, field: "allowed_methods", detail: detail) }
            } else {
                try validateApps()
                try validateMethods()
            }
            try Rules.label(label)
        }

        /// Exactly one of a non-empty app_ids (valid ids, no repeats) or all_apps = true.
        private func validateApps() throws(MessageError) {
            if allApps == true {
                if !appIDs.isEmpty {
                    throw MessageError(.invalidValue, field: "app_ids", detail: "all_apps is true: list no apps, or set all_apps false")
                }
                return
            }
            if appIDs.isEmpty {
                throw MessageError(.missing, field: "app_ids", detail: "list the apps the key may act for, or set all_apps")
            }
            var seen: [String: Int] = [:]
            for (i, id) in appIDs.enumerated() {
                try Rules.appID(id, "app_ids[\(i)]")
                if let first = seen.updateValue(i, forKey: id) {
                    throw MessageError(.invalidValue, field: "app_ids[\(i)]", detail: "repeats app_ids[\(first)]")
                }
            }
        }

        /// A non-empty allowed_methods of known liverelay.v1 method names, no repeats.
        private func validateMethods() throws(MessageError) {
            let known = LiveRelayMethod.allCases.map(\.methodName)
            if allowedMethods.isEmpty {
                throw MessageError(
                    .missing, field: "allowed_methods",
                    detail: "name the RPCs the key may call (\(known.joined(separator: ", ")))")
            }
            var seen: [String: Int] = [:]
            for (i, name) in allowedMethods.enumerated() {
                guard LiveRelayMethod(methodName: name) != nil else {
                    try Rules.noNUL(name, "allowed_methods[\(i)]")
                    throw MessageError(
                        .invalidValue, field: "allowed_methods[\(i)]",
                        detail: "not a method of liverelay.v1.LiveRelay (\(known.joined(separator: ", ")))")
                }
                if let first = seen.updateValue(i, forKey: name) {
                    throw MessageError(.invalidValue, field: "allowed_methods[\(i)]", detail: "repeats allowed_methods[\(first)]")
                }
            }
        }
    }

    /// The new key and, once and nowhere else, its secret.
    public struct CreateAPIKeyReply: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.CreateAPIKeyReply"

        public var key: APIKey?
        /// The whole key, "lrk_<key_id>_<64 hex digits>".
        public var secret: String?

        public init(key: APIKey? = nil, secret: String? = nil) {
            self.key = key
            self.secret = secret
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            try key?.validate(prefix: "key.")
            try Rules.noNUL(secret, "secret")
        }
    }
}

extension Admin.APIKey: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_api_key_descriptor() }

    init(c: UnsafePointer<LrAdminAPIKey>) {
        let m = c.pointee
        keyID = cOptionalString(m.key_id)
        appIDs = cStrings(m.n_app_ids, m.app_ids)
        allApps = cOptional(m.has_all_apps, cBool(m.all_apps))
        allowedMethods = cStrings(m.n_allowed_methods, m.allowed_methods)
        admin = cOptional(m.has_admin, cBool(m.admin))
        label = cOptionalString(m.label)
        createdAtMS = cOptional(m.has_created_at_ms, m.created_at_ms)
        lastUsedAtMS = cOptional(m.has_last_used_at_ms, m.last_used_at_ms)
        revokedAtMS = cOptional(m.has_revoked_at_ms, m.revoked_at_ms)
        owner = cOptionalString(m.owner)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminAPIKey> {
        let c = a.allocate(LrAdminAPIKey.self)
        lr_admin_api_key_init(c)
        c.pointee.key_id = a.copy(keyID)
        c.pointee.n_app_ids = appIDs.count
        c.pointee.app_ids = a.copy(appIDs)
        if let allApps { c.pointee.has_all_apps = 1; c.pointee.all_apps = cBool(allApps) }
        c.pointee.n_allowed_methods = allowedMethods.count
        c.pointee.allowed_methods = a.copy(allowedMethods)
        if let admin { c.pointee.has_admin = 1; c.pointee.admin = cBool(admin) }
        c.pointee.label = a.copy(label)
        if let createdAtMS { c.pointee.has_created_at_ms = 1; c.pointee.created_at_ms = createdAtMS }
        if let lastUsedAtMS { c.pointee.has_last_used_at_ms = 1; c.pointee.last_used_at_ms = lastUsedAtMS }
        if let revokedAtMS { c.pointee.has_revoked_at_ms = 1; c.pointee.revoked_at_ms = revokedAtMS }
        c.pointee.owner = a.copy(owner)
        return c
    }
}

extension Admin.CreateAPIKeyRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_create_api_key_request_descriptor() }

    init(c: UnsafePointer<LrAdminCreateAPIKeyRequest>) {
        let m = c.pointee
        appIDs = cStrings(m.n_app_ids, m.app_ids)
        allApps = cOptional(m.has_all_apps, cBool(m.all_apps))
        allowedMethods = cStrings(m.n_allowed_methods, m.allowed_methods)
        admin = cOptional(m.has_admin, cBool(m.admin))
        label = cOptionalString(m.label)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminCreateAPIKeyRequest> {
        let c = a.allocate(LrAdminCreateAPIKeyRequest.self)
        lr_admin_create_api_key_request_init(c)
        c.pointee.n_app_ids = appIDs.count
        c.pointee.app_ids = a.copy(appIDs)
        if let allApps { c.pointee.has_all_apps = 1; c.pointee.all_apps = cBool(allApps) }
        c.pointee.n_allowed_methods = allowedMethods.count
        c.pointee.allowed_methods = a.copy(allowedMethods)
        if let admin { c.pointee.has_admin = 1; c.pointee.admin = cBool(admin) }
        c.pointee.label = a.copy(label)
        return c
    }
}

extension Admin.CreateAPIKeyReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_create_api_key_reply_descriptor() }

    init(c: UnsafePointer<LrAdminCreateAPIKeyReply>) {
        key = c.pointee.key.map { Admin.APIKey(c: $0) }
        secret = cOptionalString(c.pointee.secret)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminCreateAPIKeyReply> {
        let c = a.allocate(LrAdminCreateAPIKeyReply.self)
        lr_admin_create_api_key_reply_init(c)
        if let key { c.pointee.key = key.build(in: &a) }
        c.pointee.secret = a.copy(secret)
        return c
    }
}
