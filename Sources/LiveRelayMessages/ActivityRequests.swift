import CLiveRelayProto
import NIOCore

// activity.proto (proto2): the activity requests. Every field is optional on
// the wire (proto2 `required` cannot be retired); which ones a request needs is
// enforced by validate(), which names the field.

/// Starts an activity remotely through push-to-start tokens.
public struct StartActivityRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.StartActivityRequest"

    public var appID: String?
    public var activityID: String?
    public var attributesType: String?
    public var attributesJSON: String?
    public var contentStateJSON: String?
    public var alert: Alert?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    public var relevanceScore: Double?
    public var priority: Priority?
    public var targets: Targets?
    public var idempotencyKey: String?
    public var waitForDelivery: Bool?
    /// The broadcast channel the started activity subscribes to (aps `input-push-channel`).
    public var channelID: String?
    /// Absent means true: aps `input-push-token: 1` asks the activity for an update token.
    public var inputPushToken: Bool?
    /// Refuse (RESOURCE_EXHAUSTED) rather than send at priority 5 once the priority-10 budget is spent.
    public var strictPriorityBudget: Bool?

    /// The parameters without a default are the fields the server requires of every such request.
    public init(
        appID: String, activityID: String, attributesType: String, attributesJSON: String, contentStateJSON: String,
        alert: Alert? = nil, staleDate: Int64? = nil, dismissalDate: Int64? = nil, relevanceScore: Double? = nil,
        priority: Priority? = nil, targets: Targets, idempotencyKey: String? = nil, waitForDelivery: Bool? = nil,
        channelID: String? = nil, inputPushToken: Bool? = nil, strictPriorityBudget: Bool? = nil
    ) {
        self.init(
            appID: .some(appID), activityID: .some(activityID), attributesType: .some(attributesType),
            attributesJSON: .some(attributesJSON), contentStateJSON: .some(contentStateJSON), alert: alert, staleDate: staleDate,
            dismissalDate: dismissalDate, relevanceScore: relevanceScore, priority: priority, targets: .some(targets),
            idempotencyKey: idempotencyKey, waitForDelivery: waitForDelivery, channelID: channelID, inputPushToken: inputPushToken,
            strictPriorityBudget: strictPriorityBudget)
    }

    /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
    @_disfavoredOverload
    package init(
        appID: String? = nil, activityID: String? = nil, attributesType: String? = nil,
        attributesJSON: String? = nil, contentStateJSON: String? = nil, alert: Alert? = nil,
        staleDate: Int64? = nil, dismissalDate: Int64? = nil, relevanceScore: Double? = nil,
        priority: Priority? = nil, targets: Targets? = nil, idempotencyKey: String? = nil,
        waitForDelivery: Bool? = nil, channelID: String? = nil, inputPushToken: Bool? = nil,
        strictPriorityBudget: Bool? = nil
    ) {
        self.appID = appID
        self.activityID = activityID
        self.attributesType = attributesType
        self.attributesJSON = attributesJSON
        self.contentStateJSON = contentStateJSON
        self.alert = alert
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.priority = priority
        self.targets = targets
        self.idempotencyKey = idempotencyKey
        self.waitForDelivery = waitForDelivery
        self.channelID = channelID
        self.inputPushToken = inputPushToken
        self.strictPriorityBudget = strictPriorityBudget
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
        try Rules.activityID(activityID, required: true)
        try Rules.typeName(attributesType, required: true)
        try Rules.jsonObject(attributesJSON, required: true, "attributes_json")
        try Rules.jsonObject(contentStateJSON, required: true, "content_state_json")
        try alert?.validate(prefix: "alert.", decoded: decoded)
        try Rules.nonNegative(staleDate, "stale_date")
        try Rules.nonNegative(dismissalDate, "dismissal_date")
        try Rules.finite(relevanceScore, "relevance_score")
        try Rules.priority(priority)
        guard let targets else { throw MessageError(.missing, field: "targets") }
        if targets.isEmpty {
            throw MessageError(
                .missing, field: "targets",
                detail: "needs push_to_start_tokens, external_user_ids or all_devices")
        }
        try targets.validate(prefix: "targets.", decoded: decoded)
        try Rules.idempotencyKey(idempotencyKey, decoded: decoded)
        try Rules.channelID(channelID, required: false)
        // Without an update token or a channel the activity could never be updated or ended.
        if inputPushToken == false, channelID == nil {
            throw MessageError(
                .invalidValue, field: "input_push_token",
                detail: "false needs channel_id: an activity without an update token or a channel could never be updated")
        }
    }
}

extension StartActivityRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_start_activity_request_descriptor() }

    // Stored properties are assigned directly: delegating to the memberwise
    // init made the optimizer copy and destroy the whole struct once more.
    init(c: UnsafePointer<LrStartActivityRequest>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        appID = t.optionalString(m.app_id, field: 1)
        activityID = t.optionalString(m.activity_id, field: 2)
        attributesType = t.optionalString(m.attributes_type, field: 3)
        attributesJSON = t.optionalString(m.attributes_json, field: 4)
        contentStateJSON = t.optionalString(m.content_state_json, field: 5)
        alert = Alert.read(m.alert, field: 6, tally: &t)
        staleDate = t.optionalInt64(m.has_stale_date, m.stale_date, field: 7)
        dismissalDate = t.optionalInt64(m.has_dismissal_date, m.dismissal_date, field: 8)
        relevanceScore = t.optionalDouble(m.has_relevance_score, m.relevance_score, field: 9)
        priority = t.optionalPriority(m.has_priority, m.priority, field: 10)
        targets = Targets.read(m.targets, field: 11, tally: &t)
        idempotencyKey = t.optionalString(m.idempotency_key, field: 12)
        waitForDelivery = t.optionalBool(m.has_wait_for_delivery, m.wait_for_delivery, field: 13)
        channelID = t.optionalString(m.channel_id, field: 14)
        inputPushToken = t.optionalBool(m.has_input_push_token, m.input_push_token, field: 15)
        strictPriorityBudget = t.optionalBool(m.has_strict_priority_budget, m.strict_priority_budget, field: 16)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrStartActivityRequest> {
        let c = a.allocate(LrStartActivityRequest.self)
        lr_start_activity_request_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.activity_id = a.copy(activityID)
        c.pointee.attributes_type = a.copy(attributesType)
        c.pointee.attributes_json = a.copy(attributesJSON)
        c.pointee.content_state_json = a.copy(contentStateJSON)
        if let alert { c.pointee.alert = alert.build(in: &a) }
        if let staleDate { c.pointee.has_stale_date = 1; c.pointee.stale_date = staleDate }
        if let dismissalDate { c.pointee.has_dismissal_date = 1; c.pointee.dismissal_date = dismissalDate }
        if let relevanceScore { c.pointee.has_relevance_score = 1; c.pointee.relevance_score = relevanceScore }
        if let priority { c.pointee.has_priority = 1; c.pointee.priority = cEnum(priority.rawValue) }
        if let targets { c.pointee.targets = targets.build(in: &a) }
        c.pointee.idempotency_key = a.copy(idempotencyKey)
        if let waitForDelivery { c.pointee.has_wait_for_delivery = 1; c.pointee.wait_for_delivery = cBool(waitForDelivery) }
        c.pointee.channel_id = a.copy(channelID)
        if let inputPushToken { c.pointee.has_input_push_token = 1; c.pointee.input_push_token = cBool(inputPushToken) }
        if let strictPriorityBudget {
            c.pointee.has_strict_priority_budget = 1
            c.pointee.strict_priority_budget = cBool(strictPriorityBudget)
        }
        return c
    }
}

/// Sends a new content state to every update token of an activity.
public struct UpdateActivityRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.UpdateActivityRequest"

    public var appID: String?
    public var activityID: String?
    public var contentStateJSON: String?
    public var alert: Alert?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    public var relevanceScore: Double?
    public var priority: Priority?
    public var endActivity: Bool?
    public var idempotencyKey: String?
    public var waitForDelivery: Bool?
    /// Also sends to this broadcast channel: one send for every subscribed device.
    public var channelID: String?
    /// True: only the channel, not the activity's update tokens. Needs channelID.
    public var channelOnly: Bool?
    /// Refuse (RESOURCE_EXHAUSTED) rather than send at priority 5 once the priority-10 budget is spent.
    public var strictPriorityBudget: Bool?

    /// The parameters without a default are the fields the server requires of every such request; `contentStateJSON`
    /// may be nil only when `endActivity` is true (the end keeps the last state).
    public init(
        appID: String, activityID: String, contentStateJSON: String?, alert: Alert? = nil, staleDate: Int64? = nil,
        dismissalDate: Int64? = nil, relevanceScore: Double? = nil, priority: Priority? = nil,
        endActivity: Bool? = nil, idempotencyKey: String? = nil, waitForDelivery: Bool? = nil,
        channelID: String? = nil, channelOnly: Bool? = nil, strictPriorityBudget: Bool? = nil
    ) {
        self.init(
            appID: .some(appID), activityID: .some(activityID), contentStateJSON: contentStateJSON, alert: alert, staleDate: staleDate,
            dismissalDate: dismissalDate, relevanceScore: relevanceScore, priority: priority, endActivity: endActivity,
            idempotencyKey: idempotencyKey, waitForDelivery: waitForDelivery, channelID: channelID, channelOnly: channelOnly,
            strictPriorityBudget: strictPriorityBudget)
    }

    /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
    @_disfavoredOverload
    package init(
        appID: String? = nil, activityID: String? = nil, contentStateJSON: String? = nil, alert: Alert? = nil,
        staleDate: Int64? = nil, dismissalDate: Int64? = nil, relevanceScore: Double? = nil,
        priority: Priority? = nil, endActivity: Bool? = nil, idempotencyKey: String? = nil,
        waitForDelivery: Bool? = nil, channelID: String? = nil, channelOnly: Bool? = nil,
        strictPriorityBudget: Bool? = nil
    ) {
        self.appID = appID
        self.activityID = activityID
        self.contentStateJSON = contentStateJSON
        self.alert = alert
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.priority = priority
        self.endActivity = endActivity
        self.idempotencyKey = idempotencyKey
        self.waitForDelivery = waitForDelivery
        self.channelID = channelID
        self.channelOnly = channelOnly
        self.strictPriorityBudget = strictPriorityBudget
    }

    public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        try self.init(onePass: bytes, limit: limit)
        try validate(decoded: true)
    }

    public func serializedBytes() -> [UInt8] { Codec.encode(self) }
    public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

    /// content_state_json is required unless end_activity is true (an end may keep the last state).
    public func validate() throws(MessageError) { try validate(decoded: false) }

    /// `decoded`: called by decode, whose strings hold no NUL (see `Rules.text`).
    func validate(decoded: Bool) throws(MessageError) {
        try Rules.appID(appID)
        try Rules.activityID(activityID, required: true)
        try Rules.jsonObject(contentStateJSON, required: endActivity != true, "content_state_json")
        try alert?.validate(prefix: "alert.", decoded: decoded)
        try Rules.nonNegative(staleDate, "stale_date")
        try Rules.nonNegative(dismissalDate, "dismissal_date")
        try Rules.finite(relevanceScore, "relevance_score")
        try Rules.priority(priority)
        try Rules.idempotencyKey(idempotencyKey, decoded: decoded)
        try Rules.channel(channelID, only: channelOnly)
    }
}

extension UpdateActivityRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_update_activity_request_descriptor() }

    init(c: UnsafePointer<LrUpdateActivityRequest>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        appID = t.optionalString(m.app_id, field: 1)
        activityID = t.optionalString(m.activity_id, field: 2)
        contentStateJSON = t.optionalString(m.content_state_json, field: 3)
        alert = Alert.read(m.alert, field: 4, tally: &t)
        staleDate = t.optionalInt64(m.has_stale_date, m.stale_date, field: 5)
        dismissalDate = t.optionalInt64(m.has_dismissal_date, m.dismissal_date, field: 6)
        relevanceScore = t.optionalDouble(m.has_relevance_score, m.relevance_score, field: 7)
        priority = t.optionalPriority(m.has_priority, m.priority, field: 8)
        endActivity = t.optionalBool(m.has_end_activity, m.end_activity, field: 9)
        idempotencyKey = t.optionalString(m.idempotency_key, field: 10)
        waitForDelivery = t.optionalBool(m.has_wait_for_delivery, m.wait_for_delivery, field: 11)
        channelID = t.optionalString(m.channel_id, field: 12)
        channelOnly = t.optionalBool(m.has_channel_only, m.channel_only, field: 13)
        strictPriorityBudget = t.optionalBool(m.has_strict_priority_budget, m.strict_priority_budget, field: 14)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrUpdateActivityRequest> {
        let c = a.allocate(LrUpdateActivityRequest.self)
        lr_update_activity_request_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.activity_id = a.copy(activityID)
        c.pointee.content_state_json = a.copy(contentStateJSON)
        if let alert { c.pointee.alert = alert.build(in: &a) }
        if let staleDate { c.pointee.has_stale_date = 1; c.pointee.stale_date = staleDate }
        if let dismissalDate { c.pointee.has_dismissal_date = 1; c.pointee.dismissal_date = dismissalDate }
        if let relevanceScore { c.pointee.has_relevance_score = 1; c.pointee.relevance_score = relevanceScore }
        if let priority { c.pointee.has_priority = 1; c.pointee.priority = cEnum(priority.rawValue) }
        if let endActivity { c.pointee.has_end_activity = 1; c.pointee.end_activity = cBool(endActivity) }
        c.pointee.idempotency_key = a.copy(idempotencyKey)
        if let waitForDelivery { c.pointee.has_wait_for_delivery = 1; c.pointee.wait_for_delivery = cBool(waitForDelivery) }
        c.pointee.channel_id = a.copy(channelID)
        if let channelOnly { c.pointee.has_channel_only = 1; c.pointee.channel_only = cBool(channelOnly) }
        if let strictPriorityBudget {
            c.pointee.has_strict_priority_budget = 1
            c.pointee.strict_priority_budget = cBool(strictPriorityBudget)
        }
        return c
    }
}

/// Ends an activity on every device that runs it.
public struct EndActivityRequest: LiveRelayMessage {
    public static let protoName = "liverelay.v1.EndActivityRequest"

    public var appID: String?
    public var activityID: String?
    /// Absent keeps the last content state.
    public var contentStateJSON: String?
    public var dismissalDate: Int64?
    public var idempotencyKey: String?
    public var waitForDelivery: Bool?
    public var alert: Alert?
    public var priority: Priority?
    /// UNIX seconds (aps `stale-date`), as on an update.
    public var staleDate: Int64?
    /// aps `relevance-score`, as on an update.
    public var relevanceScore: Double?
    /// Also sends the end to this broadcast channel.
    public var channelID: String?
    /// True: only the channel, not the activity's update tokens. Needs channelID.
    public var channelOnly: Bool?
    /// Refuse (RESOURCE_EXHAUSTED) rather than send at priority 5 once the priority-10 budget is spent.
    public var strictPriorityBudget: Bool?

    /// The parameters without a default are the fields the server requires of every such request.
    public init(
        appID: String, activityID: String, contentStateJSON: String? = nil, dismissalDate: Int64? = nil,
        idempotencyKey: String? = nil, waitForDelivery: Bool? = nil, alert: Alert? = nil, priority: Priority? = nil,
        staleDate: Int64? = nil, relevanceScore: Double? = nil, channelID: String? = nil, channelOnly: Bool? = nil,
        strictPriorityBudget: Bool? = nil
    ) {
        self.init(
            appID: .some(appID), activityID: .some(activityID), contentStateJSON: contentStateJSON, dismissalDate: dismissalDate,
            idempotencyKey: idempotencyKey, waitForDelivery: waitForDelivery, alert: alert, priority: priority, staleDate: staleDate,
            relevanceScore: relevanceScore, channelID: channelID, channelOnly: channelOnly, strictPriorityBudget: strictPriorityBudget)
    }

    /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
    @_disfavoredOverload
    package init(
        appID: String? = nil, activityID: String? = nil, contentStateJSON: String? = nil,
        dismissalDate: Int64? = nil, idempotencyKey: String? = nil, waitForDelivery: Bool? = nil,
        alert: Alert? = nil, priority: Priority? = nil, staleDate: Int64? = nil, relevanceScore: Double? = nil,
        channelID: String? = nil, channelOnly: Bool? = nil, strictPriorityBudget: Bool? = nil
    ) {
        self.appID = appID
        self.activityID = activityID
        self.contentStateJSON = contentStateJSON
        self.dismissalDate = dismissalDate
        self.idempotencyKey = idempotencyKey
        self.waitForDelivery = waitForDelivery
        self.alert = alert
        self.priority = priority
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
        self.channelID = channelID
        self.channelOnly = channelOnly
        self.strictPriorityBudget = strictPriorityBudget
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
        try Rules.activityID(activityID, required: true)
        try Rules.jsonObject(contentStateJSON, required: false, "content_state_json")
        try Rules.nonNegative(dismissalDate, "dismissal_date")
        try Rules.idempotencyKey(idempotencyKey, decoded: decoded)
        try alert?.validate(prefix: "alert.", decoded: decoded)
        try Rules.priority(priority)
        try Rules.nonNegative(staleDate, "stale_date")
        try Rules.finite(relevanceScore, "relevance_score")
        try Rules.channel(channelID, only: channelOnly)
    }
}

extension EndActivityRequest: OnePassDecodable {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_end_activity_request_descriptor() }

    init(c: UnsafePointer<LrEndActivityRequest>, tally t: inout WireTally) {
        let m = c.pointee
        t.noUnknownFields(m.base)
        appID = t.optionalString(m.app_id, field: 1)
        activityID = t.optionalString(m.activity_id, field: 2)
        contentStateJSON = t.optionalString(m.content_state_json, field: 3)
        dismissalDate = t.optionalInt64(m.has_dismissal_date, m.dismissal_date, field: 4)
        idempotencyKey = t.optionalString(m.idempotency_key, field: 5)
        waitForDelivery = t.optionalBool(m.has_wait_for_delivery, m.wait_for_delivery, field: 6)
        alert = Alert.read(m.alert, field: 7, tally: &t)
        priority = t.optionalPriority(m.has_priority, m.priority, field: 8)
        staleDate = t.optionalInt64(m.has_stale_date, m.stale_date, field: 9)
        relevanceScore = t.optionalDouble(m.has_relevance_score, m.relevance_score, field: 10)
        channelID = t.optionalString(m.channel_id, field: 11)
        channelOnly = t.optionalBool(m.has_channel_only, m.channel_only, field: 12)
        strictPriorityBudget = t.optionalBool(m.has_strict_priority_budget, m.strict_priority_budget, field: 13)
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrEndActivityRequest> {
        let c = a.allocate(LrEndActivityRequest.self)
        lr_end_activity_request_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.activity_id = a.copy(activityID)
        c.pointee.content_state_json = a.copy(contentStateJSON)
        if let dismissalDate { c.pointee.has_dismissal_date = 1; c.pointee.dismissal_date = dismissalDate }
        c.pointee.idempotency_key = a.copy(idempotencyKey)
        if let waitForDelivery { c.pointee.has_wait_for_delivery = 1; c.pointee.wait_for_delivery = cBool(waitForDelivery) }
        if let alert { c.pointee.alert = alert.build(in: &a) }
        if let priority { c.pointee.has_priority = 1; c.pointee.priority = cEnum(priority.rawValue) }
        if let staleDate { c.pointee.has_stale_date = 1; c.pointee.stale_date = staleDate }
        if let relevanceScore { c.pointee.has_relevance_score = 1; c.pointee.relevance_score = relevanceScore }
        c.pointee.channel_id = a.copy(channelID)
        if let channelOnly { c.pointee.has_channel_only = 1; c.pointee.channel_only = cBool(channelOnly) }
        if let strictPriorityBudget {
            c.pointee.has_strict_priority_budget = 1
            c.pointee.strict_priority_budget = cBool(strictPriorityBudget)
        }
        return c
    }
}
