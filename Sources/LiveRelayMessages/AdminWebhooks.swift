import CLiveRelayProto
import NIOCore

// admin.proto: an app's webhook, the HTTPS endpoint its event feed is
// delivered to. Webhook as the registry and the delivery describe it (never
// its signing secret), PutWebhook's request and reply, and the requests of
// GetWebhook, DeleteWebhook and ResetWebhook with their common reply.

extension Admin {
    /// An app's webhook: where its event feed goes, and how the delivery is going.
    public struct Webhook: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.Webhook"

        /// The event kinds a webhook may name: liverelay.v1.EventKind's names in
        /// number order, without EVENT_KIND_UNSPECIFIED (no event has it).
        public static let eventKindNames = [
            "EVENT_KIND_CALL_SETTLED", "EVENT_KIND_PUSH_FAILED", "EVENT_KIND_TOKEN_PRUNED", "EVENT_KIND_ACTIVITY_ENDED",
            "EVENT_KIND_DISPATCH_HELD", "EVENT_KIND_DISPATCH_RESUMED", "EVENT_KIND_CHANNEL_DELETED",
        ]

        public var appID: String?
        /// "https://host[:port]/path[?query]", at most 2,048 bytes.
        public var url: String?
        /// The event kinds delivered, by name (`eventKindNames`); empty: every kind.
        public var eventKinds: [String]
        public var createdAtMS: Int64?
        public var updatedAtMS: Int64?
        /// "delivering" (caught up, or sending), "retrying" (the last attempts failed
        /// and are retried with back-off) or "failing" (past the retry window: held,
        /// probed now and then, until an attempt succeeds or ResetWebhook).
        public var state: String?
        /// The last cursor of the feed the endpoint acknowledged with a 2xx answer.
        public var deliveredCursor: UInt64?
        public var lastSuccessAtMS: Int64?
        /// Why the last attempt failed ("HTTP 503", "timeout", ...); absent after a success.
        public var lastError: String?
        /// When the current run of failed attempts began (retrying, failing).
        public var failingSinceMS: Int64?
        /// Failed attempts in a row.
        public var attempts: UInt32?

        public init(
            appID: String? = nil, url: String? = nil, eventKinds: [String] = [], createdAtMS: Int64? = nil,
            updatedAtMS: Int64? = nil, state: String? = nil, deliveredCursor: UInt64? = nil, lastSuccessAtMS: Int64? = nil,
            lastError: String? = nil, failingSinceMS: Int64? = nil, attempts: UInt32? = nil
        ) {
            self.appID = appID
            self.url = url
            self.eventKinds = eventKinds
            self.createdAtMS = createdAtMS
            self.updatedAtMS = updatedAtMS
            self.state = state
            self.deliveredCursor = deliveredCursor
            self.lastSuccessAtMS = lastSuccessAtMS
            self.lastError = lastError
            self.failingSinceMS = failingSinceMS
            self.attempts = attempts
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try validate(prefix: "") }

        func validate(prefix: String) throws(MessageError) {
            try Rules.noNUL(appID, prefix + "app_id")
            try Rules.noNUL(url, prefix + "url")
            for (i, kind) in eventKinds.enumerated() { try Rules.noNUL(kind, "\(prefix)event_kinds[\(i)]") }
            try Rules.noNUL(state, prefix + "state")
            try Rules.noNUL(lastError, prefix + "last_error")
        }
    }

    /// Sets an app's webhook. A new webhook, or `rotateSecret`, mints a signing
    /// secret that the reply shows once. Whether the URL's host is one the server
    /// may reach is the server's check; the shape of every field is checked here.
    public struct PutWebhookRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.PutWebhookRequest"

        public var appID: String?
        /// "https://host[:port]/path[?query]": the host a DNS name, an IPv4 address or an
        /// IPv6 address in brackets; at most 2,048 bytes.
        public var url: String?
        /// `Webhook.eventKindNames`, each at most once; empty: every kind.
        public var eventKinds: [String]
        /// Mint a new signing secret for an existing webhook (the old one stops signing once each node has the change).
        public var rotateSecret: Bool?

        /// The parameters without a default are the fields the server requires of every such request.
        public init(appID: String, url: String, eventKinds: [String] = [], rotateSecret: Bool? = nil) {
            self.init(appID: .some(appID), url: .some(url), eventKinds: eventKinds, rotateSecret: rotateSecret)
        }

        /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
        @_disfavoredOverload
        package init(appID: String? = nil, url: String? = nil, eventKinds: [String] = [], rotateSecret: Bool? = nil) {
            self.appID = appID
            self.url = url
            self.eventKinds = eventKinds
            self.rotateSecret = rotateSecret
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            try Rules.appID(appID)
            try Rules.webhookURL(url)
            try Rules.eventKinds(eventKinds)
        }
    }

    /// The webhook as it is now and, when one was minted, its signing secret: in this reply only.
    public struct PutWebhookReply: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.PutWebhookReply"

        public var webhook: Webhook?
        /// "whsec_" and 64 hex digits; set for a new webhook or with rotate_secret.
        public var signingSecret: String?

        public init(webhook: Webhook? = nil, signingSecret: String? = nil) {
            self.webhook = webhook
            self.signingSecret = signingSecret
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            try webhook?.validate(prefix: "webhook.")
            try Rules.noNUL(signingSecret, "signing_secret")
        }
    }

    /// An app's webhook and its delivery state.
    public struct GetWebhookRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.GetWebhookRequest"

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

    /// Stops an app's deliveries; its event feed keeps its events.
    public struct DeleteWebhookRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.DeleteWebhookRequest"

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

    /// Ends a failing or retrying webhook's wait: the next delivery is tried at once,
    /// with a fresh retry window.
    public struct ResetWebhookRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.ResetWebhookRequest"

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

    /// The reply of GetWebhook, DeleteWebhook and ResetWebhook: the webhook as it is now.
    public struct WebhookReply: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.WebhookReply"

        public var webhook: Webhook?

        public init(webhook: Webhook? = nil) { self.webhook = webhook }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try webhook?.validate(prefix: "webhook.") }
    }
}

extension Admin.Webhook: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_webhook_descriptor() }

    init(c: UnsafePointer<LrAdminWebhook>) {
        let m = c.pointee
        appID = cOptionalString(m.app_id)
        url = cOptionalString(m.url)
        eventKinds = cStrings(m.n_event_kinds, m.event_kinds)
        createdAtMS = cOptional(m.has_created_at_ms, m.created_at_ms)
        updatedAtMS = cOptional(m.has_updated_at_ms, m.updated_at_ms)
        state = cOptionalString(m.state)
        deliveredCursor = cOptional(m.has_delivered_cursor, m.delivered_cursor)
        lastSuccessAtMS = cOptional(m.has_last_success_at_ms, m.last_success_at_ms)
        lastError = cOptionalString(m.last_error)
        failingSinceMS = cOptional(m.has_failing_since_ms, m.failing_since_ms)
        attempts = cOptional(m.has_attempts, m.attempts)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminWebhook> {
        let c = a.allocate(LrAdminWebhook.self)
        lr_admin_webhook_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.url = a.copy(url)
        c.pointee.n_event_kinds = eventKinds.count
        c.pointee.event_kinds = a.copy(eventKinds)
        if let createdAtMS { c.pointee.has_created_at_ms = 1; c.pointee.created_at_ms = createdAtMS }
        if let updatedAtMS { c.pointee.has_updated_at_ms = 1; c.pointee.updated_at_ms = updatedAtMS }
        c.pointee.state = a.copy(state)
        if let deliveredCursor { c.pointee.has_delivered_cursor = 1; c.pointee.delivered_cursor = deliveredCursor }
        if let lastSuccessAtMS { c.pointee.has_last_success_at_ms = 1; c.pointee.last_success_at_ms = lastSuccessAtMS }
        c.pointee.last_error = a.copy(lastError)
        if let failingSinceMS { c.pointee.has_failing_since_ms = 1; c.pointee.failing_since_ms = failingSinceMS }
        if let attempts { c.pointee.has_attempts = 1; c.pointee.attempts = attempts }
        return c
    }
}

extension Admin.PutWebhookRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_put_webhook_request_descriptor() }

    init(c: UnsafePointer<LrAdminPutWebhookRequest>) {
        let m = c.pointee
        appID = cOptionalString(m.app_id)
        url = cOptionalString(m.url)
        eventKinds = cStrings(m.n_event_kinds, m.event_kinds)
        rotateSecret = cOptional(m.has_rotate_secret, cBool(m.rotate_secret))
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminPutWebhookRequest> {
        let c = a.allocate(LrAdminPutWebhookRequest.self)
        lr_admin_put_webhook_request_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.url = a.copy(url)
        c.pointee.n_event_kinds = eventKinds.count
        c.pointee.event_kinds = a.copy(eventKinds)
        if let rotateSecret { c.pointee.has_rotate_secret = 1; c.pointee.rotate_secret = cBool(rotateSecret) }
        return c
    }
}

extension Admin.PutWebhookReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_put_webhook_reply_descriptor() }

    init(c: UnsafePointer<LrAdminPutWebhookReply>) {
        webhook = c.pointee.webhook.map { Admin.Webhook(c: $0) }
        signingSecret = cOptionalString(c.pointee.signing_secret)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminPutWebhookReply> {
        let c = a.allocate(LrAdminPutWebhookReply.self)
        lr_admin_put_webhook_reply_init(c)
        if let webhook { c.pointee.webhook = webhook.build(in: &a) }
        c.pointee.signing_secret = a.copy(signingSecret)
        return c
    }
}

extension Admin.GetWebhookRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_get_webhook_request_descriptor() }

    init(c: UnsafePointer<LrAdminGetWebhookRequest>) { appID = cOptionalString(c.pointee.app_id) }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminGetWebhookRequest> {
        let c = a.allocate(LrAdminGetWebhookRequest.self)
        lr_admin_get_webhook_request_init(c)
        c.pointee.app_id = a.copy(appID)
        return c
    }
}

extension Admin.DeleteWebhookRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_delete_webhook_request_descriptor() }

    init(c: UnsafePointer<LrAdminDeleteWebhookRequest>) { appID = cOptionalString(c.pointee.app_id) }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminDeleteWebhookRequest> {
        let c = a.allocate(LrAdminDeleteWebhookRequest.self)
        lr_admin_delete_webhook_request_init(c)
        c.pointee.app_id = a.copy(appID)
        return c
    }
}

extension Admin.ResetWebhookRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_reset_webhook_request_descriptor() }

    init(c: UnsafePointer<LrAdminResetWebhookRequest>) { appID = cOptionalString(c.pointee.app_id) }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminResetWebhookRequest> {
        let c = a.allocate(LrAdminResetWebhookRequest.self)
        lr_admin_reset_webhook_request_init(c)
        c.pointee.app_id = a.copy(appID)
        return c
    }
}

extension Admin.WebhookReply: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_webhook_reply_descriptor() }

    init(c: UnsafePointer<LrAdminWebhookReply>) { webhook = c.pointee.webhook.map { Admin.Webhook(c: $0) } }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminWebhookReply> {
        let c = a.allocate(LrAdminWebhookReply.self)
        lr_admin_webhook_reply_init(c)
        if let webhook { c.pointee.webhook = webhook.build(in: &a) }
        return c
    }
}
