/// A request's header fields as one run of bytes and their bounds: what
/// `nghttp2_submit_request` reads (it copies them), built without a string or
/// an array per field. The APNs client keeps the fields every push of a call
/// shares in one list and writes each push's own values at its end (a template:
/// ``setValue(ofField:valuePrefix:value:)``, ``truncateBytes(to:)``).
public struct HTTP2HeaderList: Sendable, Equatable {
    struct Field: Sendable, Equatable {
        var nameStart: Int
        var nameCount: Int
        var valueStart: Int
        var valueCount: Int
        /// False for values unique to one request: HPACK sends them literally, never
        /// into the dynamic table, where they would only evict the shared ones.
        var indexable: Bool
    }

    private(set) var bytes: [UInt8] = []
    private(set) var fields: [Field] = []

    public init() {}

    public var count: Int { fields.count }

    /// `name` must be lowercase (RFC 9113 §8.2.1); ours are literals. The value is
    /// `valuePrefix` followed by `value` (a device push's path is a fixed prefix and
    /// its token: joined here rather than in a string made for one push).
    public mutating func append(name: String, valuePrefix: String = "", value: String, indexable: Bool = true) {
        let nameStart = bytes.count
        appendBytes(of: name)
        let valueStart = bytes.count
        appendBytes(of: valuePrefix)
        appendBytes(of: value)
        fields.append(
            Field(
                nameStart: nameStart, nameCount: valueStart - nameStart, valueStart: valueStart,
                valueCount: bytes.count - valueStart, indexable: indexable))
    }

    /// A string's UTF-8 in one copy (its contiguous storage, small strings included),
    /// not element by element.
    private mutating func appendBytes(of string: String) {
        var string = string
        string.withUTF8 { bytes.append(contentsOf: $0) }
    }

    // MARK: A list as a template

    /// The bytes the fields take so far.
    public var byteCount: Int { bytes.count }

    /// Points field `index` at `valuePrefix` followed by `value`, written after the
    /// bytes already there. With ``truncateBytes(to:)`` a list serves as a template
    /// of the fields many requests share, with the few that change per request
    /// written at its end: no field is copied and nothing allocated per request.
    public mutating func setValue(ofField index: Int, valuePrefix: String = "", value: String) {
        let valueStart = bytes.count
        appendBytes(of: valuePrefix)
        appendBytes(of: value)
        fields[index].valueStart = valueStart
        fields[index].valueCount = bytes.count - valueStart
    }

    /// Drops the bytes after the first `count`, keeping the storage. Fields whose
    /// values were there must be given new ones (``setValue(ofField:valuePrefix:value:)``)
    /// before the list is used.
    public mutating func truncateBytes(to count: Int) {
        bytes.removeSubrange(count...)
    }

    /// The fields in order, as strings: for tests and logs, not for the send path.
    public var entries: [(name: String, value: String, indexable: Bool)] {
        fields.map { field in
            (
                String(decoding: bytes[field.nameStart..<field.nameStart + field.nameCount], as: UTF8.self),
                String(decoding: bytes[field.valueStart..<field.valueStart + field.valueCount], as: UTF8.self),
                field.indexable
            )
        }
    }

    /// The first value of `name`.
    public func first(name: String) -> String? {
        entries.first { $0.name == name }?.value
    }
}
