import CLiveRelayProto
import NIOCore

// admin.proto: listing and revoking API keys.

extension Admin {
    /// Keys a page at a time, optionally only those that may act for one app.
    public struct ListAPIKeysRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.ListAPIKeysRequest"

        /// Only keys that may act for this app (all_apps keys included); absent: every key.
        public var appID: String?
        public var includeRevoked: Bool?
        /// At most 1,000 (absent: the server's default).
        public var pageSize: UInt32?
        public var pageToken: String?

        public init(appID: String? = nil, includeRevoked: Bool? = nil, pageSize: UInt32? = nil, pageToken: String? = nil) {
            self.appID = appID
            self.includeRevoked = includeRevoked
            self.pageSize = pageSize
            self.pageToken = pageToken
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            try Rules.optionalAppID(appID)
            try Rules.page(size: pageSize, token: pageToken)
        }
    }

    /// A page of keys.
    public struct ListAPIKeysReply: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.ListAPIKeysReply"

        public var keys: [APIKey]
        /// Absent on the last page.
        public var nextPageToken: String?

        public init(keys: [APIKey] = [], nextPageToken: String? = nil) {
            self.keys = keys
            self.nextPageToken = nextPageToken
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            for (i, key) in keys.enumerated() { try key.validate(prefix: "keys[\(i)].") }
            try Rules.noNUL(nextPageToken, "next_page_token")
        }
    }

    /// Refuses a key from its next call on, on every node.
    public struct RevokeAPIKeyRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.RevokeAPIKeyRequest"

        /// 12 lowercase base32 characters.
        public var keyID: String?

        /// The parameters without a default are the fields the server requires of every such request.
        public init(keyID: String) {
            self.init(keyID: .some(keyID))
        }

        /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
        @_disfavoredOverload
        package init(keyID: String? = nil) { self.keyID = keyID }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try Rules.apiKeyID(keyID) }
    }

    /// The reply of RevokeAPIKey: the key as it is now.
    public struct APIKeyReply: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.APIKeyReply"

        public var key: APIKey?

        public init(key: APIKey? = nil) { self.key = key }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try key?.validate(prefix: "key.") }
    }
}

extension Admin.ListAPIKeysRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_list_api_keys_request_descriptor() }

    init(c: UnsafePointer<LrAdminListAPIKeysRequest>) {
        let m = c.pointee
        appID = cOptionalString(m.app_id)
        includeRevoked = cOptional(m.has_include_revoked, cBool(m.include_revoked))
        pageSize = cOptional(m.has_page_size, m.page_size)
        pageToken = cOptionalString(m.page_token)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminListAPIKeysRequest> {
        let c = a.allocate(LrAdminListAPIKeysRequest.self)
        lr_admin_list_api_keys_request_init(c)
        c.pointee.app_id = a.copy(appID)
        if let includeRevoked { c.pointee.has_include_revoked = 1; c.pointee.include_revoked = cBool(includeRevoked) }
        if let pageSize { c.pointee.has_page_size = 1; c.pointee.page_size = pageSize }
        c.pointee.page_token = a.copy(pageToken)
        return c
    }
}

extension Admin.ListAPIKeysReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_list_api_keys_reply_descriptor() }

    init(c: UnsafePointer<LrAdminListAPIKeysReply>) {
        let m = c.pointee
        keys = cMessages(m.n_keys, m.keys, as: Admin.APIKey.self)
        nextPageToken = cOptionalString(m.next_page_token)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminListAPIKeysReply> {
        let c = a.allocate(LrAdminListAPIKeysReply.self)
        lr_admin_list_api_keys_reply_init(c)
        if !keys.isEmpty {
            let array = a.pointers(LrAdminAPIKey.self, keys.count)
            for i in keys.indices { array[i] = keys[i].build(in: &a) }
            c.pointee.n_keys = keys.count
            c.pointee.keys = array
        }
        c.pointee.next_page_token = a.copy(nextPageToken)
        return c
    }
}

extension Admin.RevokeAPIKeyRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_revoke_api_key_request_descriptor() }

    init(c: UnsafePointer<LrAdminRevokeAPIKeyRequest>) { keyID = cOptionalString(c.pointee.key_id) }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminRevokeAPIKeyRequest> {
        let c = a.allocate(LrAdminRevokeAPIKeyRequest.self)
        lr_admin_revoke_api_key_request_init(c)
        c.pointee.key_id = a.copy(keyID)
        return c
    }
}

extension Admin.APIKeyReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_api_key_reply_descriptor() }

    init(c: UnsafePointer<LrAdminAPIKeyReply>) { key = c.pointee.key.map { Admin.APIKey(c: $0) } }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminAPIKeyReply> {
        let c = a.allocate(LrAdminAPIKeyReply.self)
        lr_admin_api_key_reply_init(c)
        if let key { c.pointee.key = key.build(in: &a) }
        return c
    }
}
