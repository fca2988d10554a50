import CLiveRelayProto
import NIOCore

// admin.proto: GetAppStats, what an app uses now as the answering node sees it.

extension Admin {
    /// The stats of one app.
    public struct GetAppStatsRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.GetAppStatsRequest"

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

    /// Pushes of the app since the node started, for one outcome and reason.
    public struct OutcomeCount: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.OutcomeCount"

        /// "delivered", "failed", "pruned", "superseded", "expired".
        public var outcome: String?
        /// The APNs or LiveRelay reason, for failed and pruned pushes.
        public var reason: String?
        public var count: UInt64?

        public init(outcome: String? = nil, reason: String? = nil, count: UInt64? = nil) {
            self.outcome = outcome
            self.reason = reason
            self.count = count
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) { try validate(prefix: "") }

        func validate(prefix: String) throws(MessageError) {
            try Rules.noNUL(outcome, prefix + "outcome")
            try Rules.noNUL(reason, prefix + "reason")
        }
    }

    /// The reply of GetAppStats.
    public struct AppStats: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.AppStats"

        public var appID: String?
        /// Unfinished pushes on this node: queued, waiting to retry, or in flight.
        public var queueDepth: UInt64?
        public var queueCapacity: UInt64?
        public var pushes: [OutcomeCount]
        /// This node's pushes in the last hour.
        public var pushesLastHour: UInt64?
        public var tokens: UInt64?
        public var liveActivities: UInt64?
        /// The limits in force on this node (its share of the rates); absent: none.
        public var quotas: Quotas?
        public var nodes: UInt32?
        /// Set while this node holds the app's pushes for rejected credentials (or most tokens rejected): APNs's reason.
        public var heldReason: String?
        /// How long the app has been held, in milliseconds.
        public var heldForMS: UInt64?
        /// The app's webhook's state (`Webhook.state`); absent: no webhook.
        public var webhookState: String?
        /// Events of the feed after the webhook's delivered cursor, counted up to 10,000 (with `webhookState`).
        public var webhookBacklog: UInt64?

        public init(
            appID: String? = nil, queueDepth: UInt64? = nil, queueCapacity: UInt64? = nil, pushes: [OutcomeCount] = [],
            pushesLastHour: UInt64? = nil, tokens: UInt64? = nil, liveActivities: UInt64? = nil, quotas: Quotas? = nil,
            nodes: UInt32? = nil, heldReason: String? = nil, heldForMS: UInt64? = nil, webhookState: String? = nil,
            webhookBacklog: UInt64? = nil
        ) {
            self.appID = appID
            self.queueDepth = queueDepth
            self.queueCapacity = queueCapacity
            self.pushes = pushes
            self.pushesLastHour = pushesLastHour
            self.tokens = tokens
            self.liveActivities = liveActivities
            self.quotas = quotas
            self.nodes = nodes
            self.heldReason = heldReason
            self.heldForMS = heldForMS
            self.webhookState = webhookState
            self.webhookBacklog = webhookBacklog
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            try Rules.noNUL(appID, "app_id")
            try Rules.noNUL(heldReason, "held_reason")
            try Rules.noNUL(webhookState, "webhook_state")
            for (i, count) in pushes.enumerated() { try count.validate(prefix: "pushes[\(i)].") }
        }
    }
}

extension Admin.GetAppStatsRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_get_app_stats_request_descriptor() }

    init(c: UnsafePointer<LrAdminGetAppStatsRequest>) { appID = cOptionalString(c.pointee.app_id) }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminGetAppStatsRequest> {
        let c = a.allocate(LrAdminGetAppStatsRequest.self)
        lr_admin_get_app_stats_request_init(c)
        c.pointee.app_id = a.copy(appID)
        return c
    }
}

extension Admin.OutcomeCount: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_outcome_count_descriptor() }

    init(c: UnsafePointer<LrAdminOutcomeCount>) {
        let m = c.pointee
        outcome = cOptionalString(m.outcome)
        reason = cOptionalString(m.reason)
        count = cOptional(m.has_count, m.count)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminOutcomeCount> {
        let c = a.allocate(LrAdminOutcomeCount.self)
        lr_admin_outcome_count_init(c)
        c.pointee.outcome = a.copy(outcome)
        c.pointee.reason = a.copy(reason)
        if let count { c.pointee.has_count = 1; c.pointee.count = count }
        return c
    }
}

extension Admin.AppStats: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_app_stats_descriptor() }

    init(c: UnsafePointer<LrAdminAppStats>) {
        let m = c.pointee
        appID = cOptionalString(m.app_id)
        queueDepth = cOptional(m.has_queue_depth, m.queue_depth)
        queueCapacity = cOptional(m.has_queue_capacity, m.queue_capacity)
        pushes = cMessages(m.n_pushes, m.pushes, as: Admin.OutcomeCount.self)
        pushesLastHour = cOptional(m.has_pushes_last_hour, m.pushes_last_hour)
        tokens = cOptional(m.has_tokens, m.tokens)
        liveActivities = cOptional(m.has_live_activities, m.live_activities)
        quotas = m.quotas.map { Admin.Quotas(c: $0) }
        nodes = cOptional(m.has_nodes, m.nodes)
        heldReason = cOptionalString(m.held_reason)
        heldForMS = cOptional(m.has_held_for_ms, m.held_for_ms)
        webhookState = cOptionalString(m.webhook_state)
        webhookBacklog = cOptional(m.has_webhook_backlog, m.webhook_backlog)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminAppStats> {
        let c = a.allocate(LrAdminAppStats.self)
        lr_admin_app_stats_init(c)
        c.pointee.app_id = a.copy(appID)
        if let queueDepth { c.pointee.has_queue_depth = 1; c.pointee.queue_depth = queueDepth }
        if let queueCapacity { c.pointee.has_queue_capacity = 1; c.pointee.queue_capacity = queueCapacity }
        if !pushes.isEmpty {
            let array = a.pointers(LrAdminOutcomeCount.self, pushes.count)
            for i in pushes.indices { array[i] = pushes[i].build(in: &a) }
            c.pointee.n_pushes = pushes.count
            c.pointee.pushes = array
        }
        if let pushesLastHour { c.pointee.has_pushes_last_hour = 1; c.pointee.pushes_last_hour = pushesLastHour }
        if let tokens { c.pointee.has_tokens = 1; c.pointee.tokens = tokens }
        if let liveActivities { c.pointee.has_live_activities = 1; c.pointee.live_activities = liveActivities }
        if let quotas { c.pointee.quotas = quotas.build(in: &a) }
        if let nodes { c.pointee.has_nodes = 1; c.pointee.nodes = nodes }
        c.pointee.held_reason = a.copy(heldReason)
        if let heldForMS { c.pointee.has_held_for_ms = 1; c.pointee.held_for_ms = heldForMS }
        c.pointee.webhook_state = a.copy(webhookState)
        if let webhookBacklog { c.pointee.has_webhook_backlog = 1; c.pointee.webhook_backlog = webhookBacklog }
        return c
    }
}
