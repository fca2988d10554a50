import CLiveRelayProto
import NIOCore

// admin.proto: the requests about apps. Decoding runs validate(), which names
// the first offending field.

extension Admin {
    /// A new app. Needs app_id and bundle_id; the limits are optional (absent: the server's default).
    public struct CreateAppRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.CreateAppRequest"

        public var appID: String?
        public var bundleID: String?
        public var queueCapacity: UInt32?
        public var weight: UInt32?
        /// max_push_lifetime_s.
        public var maxPushLifetimeSeconds: UInt32?
        public var quotas: Quotas?

        /// The parameters without a default are the fields the server requires of every such request.
        public init(
            appID: String, bundleID: String, queueCapacity: UInt32? = nil, weight: UInt32? = nil,
            maxPushLifetimeSeconds: UInt32? = nil, quotas: Quotas? = nil
        ) {
            self.init(
                appID: .some(appID), bundleID: .some(bundleID), queueCapacity: queueCapacity, weight: weight,
                maxPushLifetimeSeconds: maxPushLifetimeSeconds, quotas: quotas)
        }

        /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
        @_disfavoredOverload
        package init(
            appID: String? = nil, bundleID: String? = nil, queueCapacity: UInt32? = nil, weight: UInt32? = nil,
            maxPushLifetimeSeconds: UInt32? = nil, quotas: Quotas? = nil
        ) {
            self.appID = appID
            self.bundleID = bundleID
            self.queueCapacity = queueCapacity
            self.weight = weight
            self.maxPushLifetimeSeconds = maxPushLifetimeSeconds
            self.quotas = quotas
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            try Rules.appID(appID)
            try Rules.bundleID(bundleID, required: true)
            try AppLimits.validate(queueCapacity: queueCapacity, weight: weight, maxPushLifetimeSeconds: maxPushLifetimeSeconds)
            try quotas?.validate(prefix: "quotas.")
        }
    }

    /// Changes the fields it sets and leaves the others; quotas, when present, replace the app's as a whole.
    public struct UpdateAppRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.UpdateAppRequest"

        public var appID: String?
        public var bundleID: String?
        public var queueCapacity: UInt32?
        public var weight: UInt32?
        /// max_push_lifetime_s.
        public var maxPushLifetimeSeconds: UInt32?
        public var quotas: Quotas?
        public var enabled: Bool?

        /// The parameters without a default are the fields the server requires of every such request.
        public init(
            appID: String, bundleID: String? = nil, queueCapacity: UInt32? = nil, weight: UInt32? = nil,
            maxPushLifetimeSeconds: UInt32? = nil, quotas: Quotas? = nil, enabled: Bool? = nil
        ) {
            self.init(
                appID: .some(appID), bundleID: bundleID, queueCapacity: queueCapacity, weight: weight,
                maxPushLifetimeSeconds: maxPushLifetimeSeconds, quotas: quotas, enabled: enabled)
        }

        /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
        @_disfavoredOverload
        package init(
            appID: String? = nil, bundleID: String? = nil, queueCapacity: UInt32? = nil, weight: UInt32? = nil,
            maxPushLifetimeSeconds: UInt32? = nil, quotas: Quotas? = nil, enabled: Bool? = nil
        ) {
            self.appID = appID
            self.bundleID = bundleID
            self.queueCapacity = queueCapacity
            self.weight = weight
            self.maxPushLifetimeSeconds = maxPushLifetimeSeconds
            self.quotas = quotas
            self.enabled = enabled
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            try Rules.appID(appID)
            try Rules.bundleID(bundleID, required: false)
            try AppLimits.validate(queueCapacity: queueCapacity, weight: weight, maxPushLifetimeSeconds: maxPushLifetimeSeconds)
            try quotas?.validate(prefix: "quotas.")
        }
    }

    /// One app, by id.
    public struct GetAppRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.GetAppRequest"

        public var appID: String?

        /// The parameters without a default are the fields the server requires of every such request.
        public init(appID: String) {
            self.init(appID: .some(appID))
        }

        /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
        @_disfavoredOverload
        package init(appID: String? = nil) { self.appID = appID }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try Rules.appID(appID) }
    }

    /// Turns an app off (UpdateApp with enabled = true turns it on again).
    public struct DisableAppRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.DisableAppRequest"

        public var appID: String?

        /// The parameters without a default are the fields the server requires of every such request.
        public init(appID: String) {
            self.init(appID: .some(appID))
        }

        /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
        @_disfavoredOverload
        package init(appID: String? = nil) { self.appID = appID }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try Rules.appID(appID) }
    }

    /// Apps in id order, a page at a time.
    public struct ListAppsRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.ListAppsRequest"

        /// At most 1,000 (absent: the server's default).
        public var pageSize: UInt32?
        /// The previous reply's next_page_token; absent for the first page.
        public var pageToken: String?
        public var includeDisabled: Bool?

        public init(pageSize: UInt32? = nil, pageToken: String? = nil, includeDisabled: Bool? = nil) {
            self.pageSize = pageSize
            self.pageToken = pageToken
            self.includeDisabled = includeDisabled
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try Rules.page(size: pageSize, token: pageToken) }
    }
}

/// The limits CreateApp and UpdateApp share, each checked only when present.
enum AppLimits {
    static func validate(queueCapacity: UInt32?, weight: UInt32?, maxPushLifetimeSeconds: UInt32?) throws(MessageError) {
        try Rules.inRange(queueCapacity, Rules.queueCapacities, "queue_capacity")
        try Rules.inRange(weight, Rules.weights, "weight")
        try Rules.inRange(maxPushLifetimeSeconds, 0...Rules.maxPushLifetimeSeconds, "max_push_lifetime_s")
    }
}

extension Admin.CreateAppRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_create_app_request_descriptor() }

    init(c: UnsafePointer<LrAdminCreateAppRequest>) {
        let m = c.pointee
        appID = cOptionalString(m.app_id)
        bundleID = cOptionalString(m.bundle_id)
        queueCapacity = cOptional(m.has_queue_capacity, m.queue_capacity)
        weight = cOptional(m.has_weight, m.weight)
        maxPushLifetimeSeconds = cOptional(m.has_max_push_lifetime_s, m.max_push_lifetime_s)
        quotas = m.quotas.map { Admin.Quotas(c: $0) }
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminCreateAppRequest> {
        let c = a.allocate(LrAdminCreateAppRequest.self)
        lr_admin_create_app_request_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.bundle_id = a.copy(bundleID)
        if let queueCapacity { c.pointee.has_queue_capacity = 1; c.pointee.queue_capacity = queueCapacity }
        if let weight { c.pointee.has_weight = 1; c.pointee.weight = weight }
        if let maxPushLifetimeSeconds { c.pointee.has_max_push_lifetime_s = 1; c.pointee.max_push_lifetime_s = maxPushLifetimeSeconds }
        if let quotas { c.pointee.quotas = quotas.build(in: &a) }
        return c
    }
}

extension Admin.UpdateAppRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_update_app_request_descriptor() }

    init(c: UnsafePointer<LrAdminUpdateAppRequest>) {
        let m = c.pointee
        appID = cOptionalString(m.app_id)
        bundleID = cOptionalString(m.bundle_id)
        queueCapacity = cOptional(m.has_queue_capacity, m.queue_capacity)
        weight = cOptional(m.has_weight, m.weight)
        maxPushLifetimeSeconds = cOptional(m.has_max_push_lifetime_s, m.max_push_lifetime_s)
        quotas = m.quotas.map { Admin.Quotas(c: $0) }
        enabled = cOptional(m.has_enabled, cBool(m.enabled))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminUpdateAppRequest> {
        let c = a.allocate(LrAdminUpdateAppRequest.self)
        lr_admin_update_app_request_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.bundle_id = a.copy(bundleID)
        if let queueCapacity { c.pointee.has_queue_capacity = 1; c.pointee.queue_capacity = queueCapacity }
        if let weight { c.pointee.has_weight = 1; c.pointee.weight = weight }
        if let maxPushLifetimeSeconds { c.pointee.has_max_push_lifetime_s = 1; c.pointee.max_push_lifetime_s = maxPushLifetimeSeconds }
        if let quotas { c.pointee.quotas = quotas.build(in: &a) }
        if let enabled { c.pointee.has_enabled = 1; c.pointee.enabled = cBool(enabled) }
        return c
    }
}

extension Admin.GetAppRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_get_app_request_descriptor() }

    init(c: UnsafePointer<LrAdminGetAppRequest>) { appID = cOptionalString(c.pointee.app_id) }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminGetAppRequest> {
        let c = a.allocate(LrAdminGetAppRequest.self)
        lr_admin_get_app_request_init(c)
        c.pointee.app_id = a.copy(appID)
        return c
    }
}

extension Admin.DisableAppRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_disable_app_request_descriptor() }

    init(c: UnsafePointer<LrAdminDisableAppRequest>) { appID = cOptionalString(c.pointee.app_id) }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminDisableAppRequest> {
        let c = a.allocate(LrAdminDisableAppRequest.self)
        lr_admin_disable_app_request_init(c)
        c.pointee.app_id = a.copy(appID)
        return c
    }
}

extension Admin.ListAppsRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_list_apps_request_descriptor() }

    init(c: UnsafePointer<LrAdminListAppsRequest>) {
        let m = c.pointee
        pageSize = cOptional(m.has_page_size, m.page_size)
        pageToken = cOptionalString(m.page_token)
        includeDisabled = cOptional(m.has_include_disabled, cBool(m.include_disabled))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminListAppsRequest> {
        let c = a.allocate(LrAdminListAppsRequest.self)
        lr_admin_list_apps_request_init(c)
        if let pageSize { c.pointee.has_page_size = 1; c.pointee.page_size = pageSize }
        c.pointee.page_token = a.copy(pageToken)
        if let includeDisabled { c.pointee.has_include_disabled = 1; c.pointee.include_disabled = cBool(includeDisabled) }
        return c
    }
}
