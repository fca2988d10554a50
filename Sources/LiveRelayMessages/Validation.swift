// The field rules shared by the request validators. Each check names the field
// by its proto path; `prefix` ("alert.", "targets.") is only joined on failure,
// so the happy path allocates nothing.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum Rules {
    static let maxIdentifier = 128
    static let maxUserID = 256
    static let maxAlertText = 1024
    static let tokenLengths = 16...512

    @inline(__always)
    static func path(_ prefix: String, _ name: String) -> String { prefix.isEmpty ? name : prefix + name }

    /// app_id: required, 1-128 bytes of [A-Za-z0-9._-].
    static func appID(_ value: String?, _ name: String = "app_id") throws(MessageError) {
        guard let value, !value.isEmpty else { throw MessageError(.missing, field: name) }
        let n = value.utf8.count
        if n > maxIdentifier { throw MessageError(.tooLong(length: n, max: maxIdentifier), field: name) }
        let ok = allBytes(value) { c in
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
        if !ok {
            throw MessageError(.invalidValue, field: name, detail: "only A-Z, a-z, 0-9, '.', '_' and '-' are allowed")
        }
    }

    /// activity_id: 1-128 bytes, no control characters (C0, DEL or C1).
    static func activityID(_ value: String?, required: Bool, _ name: String = "activity_id") throws(MessageError) {
        guard let value, !value.isEmpty else {
            if required { throw MessageError(.missing, field: name) }
            return
        }
        let n = value.utf8.count
        if n > maxIdentifier { throw MessageError(.tooLong(length: n, max: maxIdentifier), field: name) }
        let ok = withBytes(value) { bytes in
            var previous: UInt8 = 0
            for c in bytes {
                // C1 controls U+0080...U+009F are encoded C2 80...C2 9F.
                if c < 0x20 || c == 0x7F || (previous == 0xC2 && c >= 0x80 && c <= 0x9F) { return false }
                previous = c
            }
            return true
        }
        if !ok { throw MessageError(.invalidValue, field: name, detail: "contains a control character") }
    }

    /// A device token: lowercase hex, even length, 16-512 characters.
    static func token(_ value: String, _ name: @autoclosure () -> String) throws(MessageError) {
        if value.isEmpty { throw MessageError(.missing, field: name()) }
        let n = value.utf8.count
        if !tokenLengths.contains(n) {
            throw MessageError(.invalidToken, field: name(), detail: "length \(n) is outside 16...512")
        }
        if n & 1 != 0 { throw MessageError(.invalidToken, field: name(), detail: "odd length") }
        let hex = allBytes(value) { c in
            c &- UInt8(ascii: "0") < 10 || c &- UInt8(ascii: "a") < 6
        }
        if !hex { throw MessageError(.invalidToken, field: name(), detail: "not lowercase hex") }
    }

    /// attributes_type: a Swift type name, [A-Za-z_][A-Za-z0-9_.]*, 1-128 bytes.
    static func typeName(_ value: String?, required: Bool, _ name: String = "attributes_type") throws(MessageError) {
        guard let value, !value.isEmpty else {
            if required { throw MessageError(.missing, field: name) }
            return
        }
        let n = value.utf8.count
        if n > maxIdentifier { throw MessageError(.tooLong(length: n, max: maxIdentifier), field: name) }
        let ok = withBytes(value) { bytes in
            for (i, c) in bytes.enumerated() {
                switch c {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "_"): continue
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."): if i == 0 { return false }
                default: return false
                }
            }
            return true
        }
        if !ok { throw MessageError(.invalidValue, field: name, detail: "not a Swift type name") }
    }

    /// Free text with only a length cap; NUL is refused because protobuf-c would cut it.
    @inline(__always)
    static func text(_ value: String?, max: Int, _ name: String, prefix: String = "") throws(MessageError) {
        guard let value, !value.isEmpty else { return }
        let n = value.utf8.count
        if n > max { throw MessageError(.tooLong(length: n, max: max), field: path(prefix, name)) }
        try noNUL(value, path(prefix, name))
    }

    @inline(__always)
    static func noNUL(_ value: String, _ name: @autoclosure () -> String) throws(MessageError) {
        let hasNUL = withBytes(value) { bytes in
            bytes.count > 0 && memchr(bytes.baseAddress!, 0, bytes.count) != nil
        }
        if hasNUL { throw MessageError(.embeddedNUL, field: name()) }
    }

    /// A *_json field: a single JSON object of at most 4096 bytes.
    static func jsonObject(_ value: String?, required: Bool, _ name: String) throws(MessageError) {
        guard let value else {
            if required { throw MessageError(.missing, field: name) }
            return
        }
        if value.isEmpty {
            if required { throw MessageError(.missing, field: name) }
            throw MessageError(.invalidJSON, field: name, detail: "empty string is not JSON")
        }
        let n = value.utf8.count
        if n > MessageLimits.maxJSONBytes {
            throw MessageError(.tooLong(length: n, max: MessageLimits.maxJSONBytes), field: name)
        }
        switch JSONValidator.check(value) {
        case .object: return
        case .notObject: throw MessageError(.notJSONObject, field: name)
        case let .invalid(offset, reason): throw MessageError(.invalidJSON, field: name, detail: "\(reason) at byte \(offset)")
        }
    }

    static func nonNegative(_ value: Int64?, _ name: String) throws(MessageError) {
        if let value, value < 0 { throw MessageError(.outOfRange, field: name, detail: "must not be negative") }
    }

    static func finite(_ value: Double?, _ name: String) throws(MessageError) {
        if let value, !value.isFinite { throw MessageError(.outOfRange, field: name, detail: "must be finite") }
    }

    static func priority(_ value: Priority?, _ name: String = "priority") throws(MessageError) {
        if case let .unrecognized(n)? = value { throw MessageError(.enumOutOfRange(n), field: name) }
    }

    static func idempotencyKey(_ value: String?) throws(MessageError) {
        try text(value, max: maxIdentifier, "idempotency_key")
    }

    /// Runs `body` on the string's UTF-8 bytes without copying (native strings are contiguous).
    @inline(__always)
    static func withBytes<T>(_ s: String, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        if let result = s.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(s.utf8).withUnsafeBufferPointer(body)
    }

    @inline(__always)
    static func allBytes(_ s: String, _ predicate: (UInt8) -> Bool) -> Bool {
        withBytes(s) { bytes in
            for c in bytes where !predicate(c) { return false }
            return true
        }
    }
}
