/// Why a message was refused, and which field made it so.
///
/// Every decode and validation failure is one of these so that the server can
/// answer INVALID_ARGUMENT with a `FieldViolation` naming the exact field path
/// (proto field names, e.g. `targets.push_to_start_tokens[3]`) instead of a
/// generic "bad request".
public struct MessageError: Error, Hashable, CustomStringConvertible {
    /// What went wrong, typed so callers can map kinds to status codes without parsing text.
    public enum Kind: Hashable, Sendable {
        /// The encoded message is larger than the limit; refused before protobuf-c sees it.
        case tooLarge(size: Int, limit: Int)
        /// protobuf-c (or the pre-scan) could not parse the wire bytes.
        case malformed
        case invalidUTF8
        /// protobuf-c would silently cut the string at the NUL, so it is refused.
        case embeddedNUL
        case missing
        case invalidToken
        case invalidJSON
        case notJSONObject
        case enumOutOfRange(Int32)
        case tooLong(length: Int, max: Int)
        case tooMany(count: Int, max: Int)
        case outOfRange
        case invalidValue
    }

    public var kind: Kind
    /// The field path in proto names; "" means the whole message.
    public var field: String
    /// Human-readable explanation, without the field path.
    public var detail: String

    public init(_ kind: Kind, field: String = "", detail: String = "") {
        self.kind = kind
        self.field = field
        self.detail = detail.isEmpty ? MessageError.defaultDetail(kind) : detail
    }

    public var description: String {
        field.isEmpty ? detail : "\(field): \(detail)"
    }

    /// The violation to put in an ERROR frame's `ErrorDetails`.
    public var fieldViolation: FieldViolation {
        FieldViolation(field: field, description: detail)
    }

    static func defaultDetail(_ kind: Kind) -> String {
        switch kind {
        case let .tooLarge(size, limit): return "message of \(size) bytes exceeds the limit of \(limit) bytes"
        case .malformed: return "malformed protobuf"
        case .invalidUTF8: return "invalid UTF-8"
        case .embeddedNUL: return "contains a NUL character"
        case .missing: return "required"
        case .invalidToken: return "invalid token"
        case .invalidJSON: return "invalid JSON"
        case .notJSONObject: return "not a JSON object"
        case let .enumOutOfRange(value): return "unknown enum value \(value)"
        case let .tooLong(length, max): return "\(length) bytes, at most \(max) allowed"
        case let .tooMany(count, max): return "\(count) entries, at most \(max) allowed"
        case .outOfRange: return "out of range"
        case .invalidValue: return "invalid value"
        }
    }
}

/// Limits applied before any parsing, so a hostile peer cannot make protobuf-c
/// (which has no depth or size limits of its own in 1.4) allocate without bound.
public enum MessageLimits {
    /// The default cap on one encoded message, checked before unpack.
    public static let maxMessageBytes = 1 << 20
    /// Largest JSON document accepted in a `*_json` field.
    public static let maxJSONBytes = 4096
    /// Deepest JSON nesting accepted (objects and arrays).
    public static let maxJSONDepth = 32
    /// Most entries in each of `Targets`' repeated fields.
    public static let maxTargets = 1000
}
