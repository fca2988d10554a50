import LiveRelayMessages

/// The `event` of a Live Activity push.
public enum APNsEvent: String, Hashable, Sendable {
    case start, update, end
}

/// The exact bytes of one push's JSON body, `{"aps":{...}}`.
///
/// Bytes rather than a dictionary: the same buffer goes to every token of a
/// fan-out (arrays are copy-on-write), the size APNs enforces is the size of
/// exactly these bytes, and tests and the mock APNs compare them verbatim.
public struct APNsPayload: Hashable, Sendable {
    /// APNs's limit for a per-device push (broadcasts allow 5 KB; LiveRelay does not broadcast).
    public static let maxBytes = 4096

    public let bytes: [UInt8]
    public var count: Int { bytes.count }

    /// Bytes as they are: for peers (the mock APNs, tests) that received a payload, not built one.
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// The JSON as text, for logs and tests.
    public var text: String { String(decoding: bytes, as: UTF8.self) }
}

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

/// Builds the `aps` JSON that ActivityKit expects (../shared/apns-facts.md).
///
/// Written by hand rather than through a JSON encoder so that the caller's
/// content-state and attributes objects, already validated as JSON objects,
/// pass through unchanged (no re-encoding of numbers, no reordering of keys
/// the app's Decodable may be sensitive to), and so the key order is fixed:
/// timestamp, event, content-state, attributes-type, attributes,
/// input-push-token, alert, stale-date, dismissal-date, relevance-score.
public enum APNsPayloadBuilder {
    /// A push-to-start push. It asks the new activity for an update token
    /// (`input-push-token: 1`), without which LiveRelay could never update it.
    public static func start(
        timestamp: Int64, attributesType: String, attributesJSON: String, content: LiveActivityContent
    ) throws(DomainError) -> APNsPayload {
        try build(event: .start, timestamp: timestamp, content: content,
                  attributes: (attributesType, attributesJSON))
    }

    public static func update(timestamp: Int64, content: LiveActivityContent) throws(DomainError) -> APNsPayload {
        try build(event: .update, timestamp: timestamp, content: content, attributes: nil)
    }

    public static func end(timestamp: Int64, content: LiveActivityContent) throws(DomainError) -> APNsPayload {
        try build(event: .end, timestamp: timestamp, content: content, attributes: nil)
    }

    /// Fails with ``DomainError/payloadTooLarge(size:limit:)`` above
    /// ``APNsPayload/maxBytes``: APNs would answer 413 for every token, so the
    /// call is refused before anything is stored or queued.
    static func build(
        event: APNsEvent, timestamp: Int64, content: LiveActivityContent,
        attributes: (type: String, json: String)?
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
            w.raw(",\"input-push-token\":1")
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
        if w.bytes.count > APNsPayload.maxBytes {
            throw .payloadTooLarge(size: w.bytes.count, limit: APNsPayload.maxBytes)
        }
        return APNsPayload(bytes: w.bytes)
    }
}

/// A JSON string literal of `value`, escaped as the payload builder escapes: the
/// one escaper for the JSON LiveRelay writes by hand (JWTs, APNs error bodies, the
/// mock's records, the CLI's output).
package func jsonQuoted(_ value: String) -> String {
    var writer = JSONWriter()
    writer.string(value)
    return String(decoding: writer.bytes, as: UTF8.self)
}

/// Appends JSON tokens to a byte array.
struct JSONWriter {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(512) }

    mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    mutating func integer(_ value: Int64) { bytes.append(contentsOf: String(value).utf8) }

    /// Swift's shortest round-trip form ("0.5", "1e-07", "100.0") is valid JSON for finite values.
    mutating func number(_ value: Double) {
        precondition(value.isFinite, "validated as finite")
        bytes.append(contentsOf: String(value).utf8)
    }

    /// RFC 8259 escaping: quote, backslash and control characters; everything
    /// else (including non-ASCII) goes out as UTF-8.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for c in value.utf8 {
            switch c {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x00..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex[Int(c >> 4)], hex[Int(c & 0xF)]])
            default: bytes.append(c)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// The HTTP/2 headers of one Live Activity push, besides `authorization`
/// (the APNs issue signs those) and the `:path` with the token.
public struct APNsHeaders: Hashable, Sendable {
    /// Always `liveactivity`: APNs rejects a Live Activity payload under any other push type.
    public var pushType: String
    /// `<bundle id>.push-type.liveactivity`.
    public var topic: String
    /// 10 (immediate, counts against the activity's hourly budget) or 5 (opportunistic, free).
    public var priority: Int
    /// UNIX seconds until which APNs may store and retry the push for an offline device.
    public var expiration: Int64

    public init(bundleID: String, priority: Priority?, expiration: Int64) {
        self.pushType = "liveactivity"
        self.topic = bundleID + ".push-type.liveactivity"
        self.priority = priority == .low ? 5 : 10
        self.expiration = expiration
    }

    /// In the order they go on the wire.
    public var fields: [(name: String, value: String)] {
        [("apns-push-type", pushType), ("apns-topic", topic), ("apns-priority", String(priority)),
         ("apns-expiration", String(expiration))]
    }
}
