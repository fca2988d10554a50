import LiveRelayAPNs
import LiveRelayMessages

/// What a start, update or end push shows; every field is optional and absent ones are left out.
public struct LiveActivityContent: Hashable, Sendable {
    /// A JSON object, already validated; spliced in byte for byte.
    public var contentStateJSON: String?
    public var alert: Alert?
    /// UNIX seconds.
    public var staleDate: Int64?
    /// UNIX seconds; 0 or a past date dismisses at once.
    public var dismissalDate: Int64?
    public var relevanceScore: Double?

    public init(
        contentStateJSON: String? = nil, alert: Alert? = nil, staleDate: Int64? = nil,
        dismissalDate: Int64? = nil, relevanceScore: Double? = nil
    ) {
        self.contentStateJSON = contentStateJSON
        self.alert = alert
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
    }
}

/// Builds the `aps` JSON that ActivityKit expects (Apple's ActivityKit push documentation).
///
/// Written by hand rather than through a JSON encoder so that the caller's
/// content-state and attributes objects, already validated as JSON objects,
/// pass through unchanged (no re-encoding of numbers, no reordering of keys
/// the app's Decodable may be sensitive to), and so the key order is fixed:
/// timestamp, event, content-state, attributes-type, attributes,
/// input-push-token, input-push-channel, alert, stale-date, dismissal-date,
/// relevance-score.
public enum APNsPayloadBuilder {
    /// A push-to-start push. By default it asks the new activity for an update
    /// token (`input-push-token: 1`), without which LiveRelay could update it
    /// only through a channel; `channelID` subscribes it to a broadcast channel
    /// (`input-push-channel`).
    public static func start(
        timestamp: Int64, attributesType: String, attributesJSON: String, content: LiveActivityContent,
        inputPushToken: Bool = true, channelID: String? = nil
    ) throws(DomainError) -> APNsPayload {
        try build(
            event: .start, timestamp: timestamp, content: content,
            attributes: (attributesType, attributesJSON, inputPushToken, channelID))
    }

    /// - Parameter limit: ``APNsPayload/maxBytes``, or ``APNsBroadcast/maxPayloadBytes`` for a send to channels only.
    public static func update(
        timestamp: Int64, content: LiveActivityContent, limit: Int = APNsPayload.maxBytes
    ) throws(DomainError) -> APNsPayload {
        try build(event: .update, timestamp: timestamp, content: content, attributes: nil, limit: limit)
    }

    /// - Parameter limit: as for ``update(timestamp:content:limit:)``.
    public static func end(
        timestamp: Int64, content: LiveActivityContent, limit: Int = APNsPayload.maxBytes
    ) throws(DomainError) -> APNsPayload {
        try build(event: .end, timestamp: timestamp, content: content, attributes: nil, limit: limit)
    }

    /// Fails with ``DomainError/payloadTooLarge(size:limit:)`` above `limit`:
    /// APNs would answer 413 for every token (or the channel), so the call is
    /// refused before anything is stored or queued.
    static func build(
        event: APNsEvent, timestamp: Int64, content: LiveActivityContent,
        attributes: (type: String, json: String, inputPushToken: Bool, channelID: String?)?,
        limit: Int = APNsPayload.maxBytes
    ) throws(DomainError) -> APNsPayload {
        var w = JSONWriter()
        w.raw("{\"aps\":{\"timestamp\":")
        w.integer(timestamp)
        w.raw(",\"event\":")
        w.string(event.rawValue)
        if let state = content.contentStateJSON {
            w.raw(",\"content-state\":")
            w.raw(state)
        }
        if let attributes {
            w.raw(",\"attributes-type\":")
            w.string(attributes.type)
            w.raw(",\"attributes\":")
            w.raw(attributes.json)
            if attributes.inputPushToken { w.raw(",\"input-push-token\":1") }
            if let channelID = attributes.channelID {
                w.raw(",\"input-push-channel\":")
                w.string(channelID)
            }
        }
        if let alert = content.alert {
            let fields = [("title", alert.title), ("body", alert.body), ("sound", alert.sound)]
                .compactMap { name, value in value.flatMap { $0.isEmpty ? nil : (name, $0) } }
            if !fields.isEmpty {
                w.raw(",\"alert\":{")
                for (i, (name, value)) in fields.enumerated() {
                    if i > 0 { w.raw(",") }
                    w.string(name)
                    w.raw(":")
                    w.string(value)
                }
                w.raw("}")
            }
        }
        if let stale = content.staleDate {
            w.raw(",\"stale-date\":")
            w.integer(stale)
        }
        if let dismissal = content.dismissalDate {
            w.raw(",\"dismissal-date\":")
            w.integer(dismissal)
        }
        if let score = content.relevanceScore {
            w.raw(",\"relevance-score\":")
            w.number(score)
        }
        w.raw("}}")
        if w.bytes.count > limit {
            throw .payloadTooLarge(size: w.bytes.count, limit: limit)
        }
        return APNsPayload(bytes: w.bytes)
    }
}
