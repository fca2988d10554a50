import CLiveRelayProto
import NIOCore

// admin.proto: an app as the registry keeps it (App, its Quotas and the
// APNsCredentialsInfo without the key) and the replies that carry apps.
// Replies are built by the server and read by admin clients; decoding them only
// runs the UTF-8/NUL scan, and validate() only refuses NUL (which encoding would cut).

extension Admin {
    /// An app's limits. Absent: the server's default for that limit; 0: no limit.
    /// Part of CreateApp and UpdateApp requests (validated there, under "quotas.")
    /// and of replies, so decoding one on its own does not validate it.
    public struct Quotas: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.Quotas"

        /// RPC calls per second over every node (a token bucket).
        public var callsPerSecond: Double?
        /// The bucket's size: calls at once after a quiet spell.
        public var burst: UInt32?
        /// Pushes per sliding hour over every node.
        public var pushesPerHour: UInt64?
        /// Registered tokens of every kind.
        public var maxTokens: UInt64?
        /// Activities started and not yet ended or expired.
        public var maxLiveActivities: UInt64?
        /// Priority-10 sends per hour per activity and per channel; past it a push
        /// goes at priority 5 (or is refused when the call asks for strictness).
        public var priorityBudgetPerHour: UInt32?

        public init(
            callsPerSecond: Double? = nil, burst: UInt32? = nil, pushesPerHour: UInt64? = nil,
            maxTokens: UInt64? = nil, maxLiveActivities: UInt64? = nil, priorityBudgetPerHour: UInt32? = nil
        ) {
            self.callsPerSecond = callsPerSecond
            self.burst = burst
            self.pushesPerHour = pushesPerHour
            self.maxTokens = maxTokens
            self.maxLiveActivities = maxLiveActivities
            self.priorityBudgetPerHour = priorityBudgetPerHour
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try validate(prefix: "") }

        /// calls_per_second finite and not negative, priority_budget_per_hour within
        /// an int32 (the config file's bound); the counts may be anything (0: no limit).
        func validate(prefix: String) throws(MessageError) {
            if let callsPerSecond, !(callsPerSecond.isFinite && callsPerSecond >= 0) {
                throw MessageError(
                    .outOfRange, field: Rules.path(prefix, "calls_per_second"), detail: "must be finite and not negative")
            }
            if let priorityBudgetPerHour, priorityBudgetPerHour > UInt32(Int32.max) {
                throw MessageError(
                    .outOfRange, field: Rules.path(prefix, "priority_budget_per_hour"), detail: "must be at most \(Int32.max)")
            }
        }
    }

    /// How an app reaches APNs, without its key.
    public struct APNsCredentialsInfo: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.APNsCredentialsInfo"

        public var teamID: String?
        public var keyID: String?
        /// "apple" or "host:port".
        public var endpoint: String?
        /// Where the key is read from: "registry", "file:<path>" or "env:<NAME>".
        public var keySource: String?
        /// Lowercase hex SHA-256 of the public key's DER.
        public var publicKeySHA256: String?
        public var updatedAtMS: Int64?

        public init(
            teamID: String? = nil, keyID: String? = nil, endpoint: String? = nil, keySource: String? = nil,
            publicKeySHA256: String? = nil, updatedAtMS: Int64? = nil
        ) {
            self.teamID = teamID
            self.keyID = keyID
            self.endpoint = endpoint
            self.keySource = keySource
            self.publicKeySHA256 = publicKeySHA256
            self.updatedAtMS = updatedAtMS
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try validate(prefix: "") }

        func validate(prefix: String) throws(MessageError) {
            try Rules.noNUL(teamID, prefix + "team_id")
            try Rules.noNUL(keyID, prefix + "key_id")
            try Rules.noNUL(endpoint, prefix + "endpoint")
            try Rules.noNUL(keySource, prefix + "key_source")
            try Rules.noNUL(publicKeySHA256, prefix + "public_key_sha256")
        }
    }

    /// An app of the registry.
    public struct App: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.App"

        public var appID: String?
        /// The iOS bundle id: the apns-topic is "<bundle_id>.push-type.liveactivity".
        public var bundleID: String?
        public var enabled: Bool?
        /// Unfinished pushes the app may have queued.
        public var queueCapacity: UInt32?
        /// Share of send slots when apps compete.
        public var weight: UInt32?
        /// max_push_lifetime_s: seconds a push is tried at most; 0 or absent: until its activity's expiry.
        public var maxPushLifetimeSeconds: UInt32?
        public var quotas: Quotas?
        /// Absent until PutAPNsCredentials.
        public var credentials: APNsCredentialsInfo?
        public var createdAtMS: Int64?
        public var updatedAtMS: Int64?
        /// Who owns the entry: "seed" (the config file; a start brings it back to the file) or "admin".
        public var owner: String?

        public init(
            appID: String? = nil, bundleID: String? = nil, enabled: Bool? = nil, queueCapacity: UInt32? = nil,
            weight: UInt32? = nil, maxPushLifetimeSeconds: UInt32? = nil, quotas: Quotas? = nil,
            credentials: APNsCredentialsInfo? = nil, createdAtMS: Int64? = nil, updatedAtMS: Int64? = nil, owner: String? = nil
        ) {
            self.appID = appID
            self.bundleID = bundleID
            self.enabled = enabled
            self.queueCapacity = queueCapacity
            self.weight = weight
            self.maxPushLifetimeSeconds = maxPushLifetimeSeconds
            self.quotas = quotas
            self.credentials = credentials
            self.createdAtMS = createdAtMS
            self.updatedAtMS = updatedAtMS
            self.owner = owner
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try validate(prefix: "") }

        func validate(prefix: String) throws(MessageError) {
            try Rules.noNUL(appID, prefix + "app_id")
            try Rules.noNUL(bundleID, prefix + "bundle_id")
            try Rules.noNUL(owner, prefix + "owner")
            try credentials?.validate(prefix: prefix + "credentials.")
        }
    }

    /// The reply of CreateApp, UpdateApp, GetApp, DisableApp and PutAPNsCredentials.
    public struct AppReply: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.AppReply"

        public var app: App?

        public init(app: App? = nil) { self.app = app }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try app?.validate(prefix: "app.") }
    }

    /// A page of apps, in id order.
    public struct ListAppsReply: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.ListAppsReply"

        public var apps: [App]
        /// Absent on the last page.
        public var nextPageToken: String?

        public init(apps: [App] = [], nextPageToken: String? = nil) {
            self.apps = apps
            self.nextPageToken = nextPageToken
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            for (i, app) in apps.enumerated() { try app.validate(prefix: "apps[\(i)].") }
            try Rules.noNUL(nextPageToken, "next_page_token")
        }
    }
}

extension Admin.Quotas: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_quotas_descriptor() }

    init(c: UnsafePointer<LrAdminQuotas>) {
        let m = c.pointee
        callsPerSecond = cOptional(m.has_calls_per_second, m.calls_per_second)
        burst = cOptional(m.has_burst, m.burst)
        pushesPerHour = cOptional(m.has_pushes_per_hour, m.pushes_per_hour)
        maxTokens = cOptional(m.has_max_tokens, m.max_tokens)
        maxLiveActivities = cOptional(m.has_max_live_activities, m.max_live_activities)
        priorityBudgetPerHour = cOptional(m.has_priority_budget_per_hour, m.priority_budget_per_hour)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminQuotas> {
        let c = a.allocate(LrAdminQuotas.self)
        lr_admin_quotas_init(c)
        if let callsPerSecond { c.pointee.has_calls_per_second = 1; c.pointee.calls_per_second = callsPerSecond }
        if let burst { c.pointee.has_burst = 1; c.pointee.burst = burst }
        if let pushesPerHour { c.pointee.has_pushes_per_hour = 1; c.pointee.pushes_per_hour = pushesPerHour }
        if let maxTokens { c.pointee.has_max_tokens = 1; c.pointee.max_tokens = maxTokens }
        if let maxLiveActivities { c.pointee.has_max_live_activities = 1; c.pointee.max_live_activities = maxLiveActivities }
        if let priorityBudgetPerHour {
            c.pointee.has_priority_budget_per_hour = 1
            c.pointee.priority_budget_per_hour = priorityBudgetPerHour
        }
        return c
    }
}

extension Admin.APNsCredentialsInfo: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_apns_credentials_info_descriptor() }

    init(c: UnsafePointer<LrAdminAPNsCredentialsInfo>) {
        let m = c.pointee
        teamID = cOptionalString(m.team_id)
        keyID = cOptionalString(m.key_id)
        endpoint = cOptionalString(m.endpoint)
        keySource = cOptionalString(m.key_source)
        publicKeySHA256 = cOptionalString(m.public_key_sha256)
        updatedAtMS = cOptional(m.has_updated_at_ms, m.updated_at_ms)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminAPNsCredentialsInfo> {
        let c = a.allocate(LrAdminAPNsCredentialsInfo.self)
        lr_admin_apns_credentials_info_init(c)
        c.pointee.team_id = a.copy(teamID)
        c.pointee.key_id = a.copy(keyID)
        c.pointee.endpoint = a.copy(endpoint)
        c.pointee.key_source = a.copy(keySource)
        c.pointee.public_key_sha256 = a.copy(publicKeySHA256)
        if let updatedAtMS { c.pointee.has_updated_at_ms = 1; c.pointee.updated_at_ms = updatedAtMS }
        return c
    }
}

extension Admin.App: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_app_descriptor() }

    init(c: UnsafePointer<LrAdminApp>) {
        let m = c.pointee
        appID = cOptionalString(m.app_id)
        bundleID = cOptionalString(m.bundle_id)
        enabled = cOptional(m.has_enabled, cBool(m.enabled))
        queueCapacity = cOptional(m.has_queue_capacity, m.queue_capacity)
        weight = cOptional(m.has_weight, m.weight)
        maxPushLifetimeSeconds = cOptional(m.has_max_push_lifetime_s, m.max_push_lifetime_s)
        quotas = m.quotas.map { Admin.Quotas(c: $0) }
        credentials = m.credentials.map { Admin.APNsCredentialsInfo(c: $0) }
        createdAtMS = cOptional(m.has_created_at_ms, m.created_at_ms)
        updatedAtMS = cOptional(m.has_updated_at_ms, m.updated_at_ms)
        owner = cOptionalString(m.owner)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminApp> {
        let c = a.allocate(LrAdminApp.self)
        lr_admin_app_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.bundle_id = a.copy(bundleID)
        if let enabled { c.pointee.has_enabled = 1; c.pointee.enabled = cBool(enabled) }
        if let queueCapacity { c.pointee.has_queue_capacity = 1; c.pointee.queue_capacity = queueCapacity }
        if let weight { c.pointee.has_weight = 1; c.pointee.weight = weight }
        if let maxPushLifetimeSeconds { c.pointee.has_max_push_lifetime_s = 1; c.pointee.max_push_lifetime_s = maxPushLifetimeSeconds }
        if let quotas { c.pointee.quotas = quotas.build(in: &a) }
        if let credentials { c.pointee.credentials = credentials.build(in: &a) }
        if let createdAtMS { c.pointee.has_created_at_ms = 1; c.pointee.created_at_ms = createdAtMS }
        if let updatedAtMS { c.pointee.has_updated_at_ms = 1; c.pointee.updated_at_ms = updatedAtMS }
        c.pointee.owner = a.copy(owner)
        return c
    }
}

extension Admin.AppReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_app_reply_descriptor() }

    init(c: UnsafePointer<LrAdminAppReply>) {
        app = c.pointee.app.map { Admin.App(c: $0) }
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminAppReply> {
        let c = a.allocate(LrAdminAppReply.self)
        lr_admin_app_reply_init(c)
        if let app { c.pointee.app = app.build(in: &a) }
        return c
    }
}

extension Admin.ListAppsReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_list_apps_reply_descriptor() }

    init(c: UnsafePointer<LrAdminListAppsReply>) {
        let m = c.pointee
        apps = cMessages(m.n_apps, m.apps, as: Admin.App.self)
        nextPageToken = cOptionalString(m.next_page_token)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminListAppsReply> {
        let c = a.allocate(LrAdminListAppsReply.self)
        lr_admin_list_apps_reply_init(c)
        if !apps.isEmpty {
            let array = a.pointers(LrAdminApp.self, apps.count)
            for i in apps.indices { array[i] = apps[i].build(in: &a) }
            c.pointee.n_apps = apps.count
            c.pointee.apps = array
        }
        c.pointee.next_page_token = a.copy(nextPageToken)
        return c
    }
}
