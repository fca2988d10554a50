// The field rules shared by the request validators. Each check names the field
// by its proto path; `prefix` ("alert.", "targets.") is only joined on failure,
// so the happy path allocates nothing.
//
// The rules are SPI (`@_spi(Benchmarks)`) for one reason: the codec benchmark
// validates swift-protobuf's messages with these very functions, so that its
// "decode + validation" comparison runs the same checks on both sides.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@_spi(Benchmarks) public enum Rules {
    public static let maxIdentifier = 128
    public static let maxUserID = 256
    public static let maxAlertText = 1024
    static let tokenLengths = 16...512

    @inline(__always)
    static func path(_ prefix: String, _ name: String) -> String { prefix.isEmpty ? name : prefix + name }

    /// app_id: required, 1-128 bytes of [A-Za-z0-9._-].
    public static func appID(_ value: String?, _ name: String = "app_id") throws(MessageError) {
        guard let value, !value.isEmpty else { throw MessageError(.missing, field: name) }
        let n = value.utf8.count
        if n > maxIdentifier { throw MessageError(.tooLong(length: n, max: maxIdentifier), field: name) }
        let ok = withBytes(value) { bytes in allInSet(bytes, identifierSet) }
        if !ok {
            throw MessageError(.invalidValue, field: name, detail: "only A-Z, a-z, 0-9, '.', '_' and '-' are allowed")
        }
    }

    /// activity_id: 1-128 bytes, no control characters (C0, DEL or C1).
    public static func activityID(_ value: String?, required: Bool, _ name: String = "activity_id") throws(MessageError) {
        guard let value, !value.isEmpty else {
            if required { throw MessageError(.missing, field: name) }
            return
        }
        let n = value.utf8.count
        if n > maxIdentifier { throw MessageError(.tooLong(length: n, max: maxIdentifier), field: name) }
        let ok = withBytes(value) { bytes in noControlCharacters(bytes) }
        if !ok { throw MessageError(.invalidValue, field: name, detail: "contains a control character") }
    }

    /// A device token: lowercase hex, even length, 16-512 characters.
    public static func token(_ value: String, _ name: @autoclosure () -> String) throws(MessageError) {
        if value.isEmpty { throw MessageError(.missing, field: name()) }
        let n = value.utf8.count
        if !tokenLengths.contains(n) {
            throw MessageError(.invalidToken, field: name(), detail: "length \(n) is outside 16...512")
        }
        if n & 1 != 0 { throw MessageError(.invalidToken, field: name(), detail: "odd length") }
        let hex = withBytes(value) { bytes in isLowercaseHex(bytes) }
        if !hex { throw MessageError(.invalidToken, field: name(), detail: "not lowercase hex") }
    }

    /// attributes_type: a Swift type name, [A-Za-z_][A-Za-z0-9_.]*, 1-128 bytes.
    public static func typeName(_ value: String?, required: Bool, _ name: String = "attributes_type") throws(MessageError) {
        guard let value, !value.isEmpty else {
            if required { throw MessageError(.missing, field: name) }
            return
        }
        let n = value.utf8.count
        if n > maxIdentifier { throw MessageError(.tooLong(length: n, max: maxIdentifier), field: name) }
        let ok = withBytes(value) { bytes in
            // First character [A-Za-z_], then [A-Za-z0-9_.].
            bytes.count > 0 && inSet(bytes[0], typeNameStartSet) && allInSet(bytes, typeNameSet)
        }
        if !ok { throw MessageError(.invalidValue, field: name, detail: "not a Swift type name") }
    }

    /// Free text with only a length cap; NUL is refused because protobuf-c would cut it.
    /// `decoded`: the value comes from a decode, which already refused any NUL (see
    /// `WireTally`), so the scan for one would find nothing and is skipped.
    @inline(__always)
    public static func text(
        _ value: String?, max: Int, _ name: String, prefix: String = "", decoded: Bool = false
    ) throws(MessageError) {
        guard let value, !value.isEmpty else { return }
        let n = value.utf8.count
        if n > max { throw MessageError(.tooLong(length: n, max: max), field: path(prefix, name)) }
        if !decoded { try noNUL(value, path(prefix, name)) }
    }

    @inline(__always)
    public static func noNUL(_ value: String, _ name: @autoclosure () -> String) throws(MessageError) {
        let hasNUL = withBytes(value) { bytes in containsNUL(bytes) }
        if hasNUL { throw MessageError(.embeddedNUL, field: name()) }
    }

    /// A *_json field: a single JSON object of at most 4096 bytes.
    public static func jsonObject(_ value: String?, required: Bool, _ name: String) throws(MessageError) {
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

    public static func nonNegative(_ value: Int64?, _ name: String) throws(MessageError) {
        if let value, value < 0 { throw MessageError(.outOfRange, field: name, detail: "must not be negative") }
    }

    public static func finite(_ value: Double?, _ name: String) throws(MessageError) {
        if let value, !value.isFinite { throw MessageError(.outOfRange, field: name, detail: "must be finite") }
    }

    static func priority(_ value: Priority?, _ name: String = "priority") throws(MessageError) {
        if case let .unrecognized(n)? = value { throw MessageError(.enumOutOfRange(n), field: name) }
    }

    public static func idempotencyKey(_ value: String?, decoded: Bool = false) throws(MessageError) {
        try text(value, max: maxIdentifier, "idempotency_key", decoded: decoded)
    }

    /// APNs's channel ids are base64 of a few dozen bytes; 128 leaves room and bounds the store's key.
    public static let maxChannelID = 128

    /// A broadcast channel id (``BroadcastChannel/isValidID(_:)``): a malformed id is
    /// INVALID_ARGUMENT at decode, never a store lookup or a send. A proto2
    /// field that is present but empty is refused too: leaving it out is how to
    /// name no channel.
    public static func channelID(_ value: String?, required: Bool, _ name: String = "channel_id") throws(MessageError) {
        guard let value else {
            if required { throw MessageError(.missing, field: name) }
            return
        }
        if value.isEmpty {
            if required { throw MessageError(.missing, field: name) }
            throw MessageError(.invalidValue, field: name, detail: "empty: leave it out to name no channel")
        }
        let n = value.utf8.count
        if n > maxChannelID { throw MessageError(.tooLong(length: n, max: maxChannelID), field: name) }
        if !BroadcastChannel.isValidID(value) {
            throw MessageError(
                .invalidValue, field: name, detail: "only base64 characters (A-Z, a-z, 0-9, '+', '/', '=', '-', '_') are allowed")
        }
    }

    /// channel_id and channel_only of an update or end: channel_only = true sends
    /// to the channel alone, so without a channel the call would reach nobody.
    public static func channel(_ channelID: String?, only channelOnly: Bool?) throws(MessageError) {
        try Rules.channelID(channelID, required: false)
        if channelOnly == true, channelID == nil {
            throw MessageError(.invalidValue, field: "channel_only", detail: "true needs channel_id: the call would reach nobody")
        }
    }

    // MARK: Byte-class checks
    //
    // ASCII sets as 128-bit masks (bit c set when byte c is allowed): one shift and
    // test per byte instead of a chain of range comparisons through a closure.

    struct ByteSet {
        /// Bytes 0-63 and 64-127.
        var low: UInt64
        var high: UInt64
    }

    /// [A-Za-z0-9._-]
    static var identifierSet: ByteSet { ByteSet(low: 0x03FF_6000_0000_0000, high: 0x07FF_FFFE_87FF_FFFE) }
    /// [A-Za-z0-9+/=_-]: both base64 alphabets and the padding.
    static var channelIDSet: ByteSet { ByteSet(low: 0x23FF_A800_0000_0000, high: 0x07FF_FFFE_87FF_FFFE) }
    /// [A-Za-z_]
    static var typeNameStartSet: ByteSet { ByteSet(low: 0, high: 0x07FF_FFFE_87FF_FFFE) }
    /// [A-Za-z0-9_.]
    static var typeNameSet: ByteSet { ByteSet(low: 0x03FF_4000_0000_0000, high: 0x07FF_FFFE_87FF_FFFE) }

    @inline(__always)
    static func inSet(_ c: UInt8, _ set: ByteSet) -> Bool {
        let word = c < 64 ? set.low : set.high
        return c < 128 && (word >> UInt64(c & 63)) & 1 != 0
    }

    @inline(__always)
    static func allInSet(_ bytes: UnsafeBufferPointer<UInt8>, _ set: ByteSet) -> Bool {
        for c in bytes where !inSet(c, set) { return false }
        return true
    }

    /// Lowercase hex ([0-9a-f]*), 8 bytes at a time. For bytes below 0x80,
    /// b + (0x80 - lo) sets the byte's high bit exactly when b >= lo, and
    /// b + (0x7F - hi) sets it exactly when b > hi, without carries between bytes.
    @inline(__always)
    static func isLowercaseHex(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = bytes.count
        guard let base = bytes.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        var i = 0
        while n &- i >= 8 {
            if !hexWord(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { return false }
            i &+= 8
        }
        while i < n {
            let c = base[i]
            if !(c &- UInt8(ascii: "0") < 10 || c &- UInt8(ascii: "a") < 6) { return false }
            i &+= 1
        }
        return true
    }

    @inline(__always)
    static func hexWord(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        if w & high != 0 { return false }
        let geDigit = w &+ ones &* (0x80 - 0x30)  // >= '0'
        let gtDigit = w &+ ones &* (0x7F - 0x39)  // >  '9'
        let geLetter = w &+ ones &* (0x80 - 0x61)  // >= 'a'
        let gtLetter = w &+ ones &* (0x7F - 0x66)  // >  'f'
        let ok = (geDigit & ~gtDigit) | (geLetter & ~gtLetter)
        return ok & high == high
    }

    /// Whether a zero byte occurs: 8 bytes at a time for short strings (a libc call
    /// costs more than the scan), memchr for long ones.
    @inline(__always)
    static func containsNUL(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = bytes.count
        guard n > 0, let base = bytes.baseAddress else { return false }
        if n > 64 { return memchr(base, 0, n) != nil }
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        var i = 0
        while n &- i >= 8 {
            let w = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            if (w &- ones) & ~w & high != 0 { return true }
            i &+= 8
        }
        while i < n {
            if base[i] == 0 { return true }
            i &+= 1
        }
        return false
    }

    /// No C0 control, DEL or C1 control (U+0080...U+009F, encoded C2 80...C2 9F).
    /// ASCII words without a byte below 0x20 or equal to 0x7F are skipped 8 bytes at a time.
    @inline(__always)
    static func noControlCharacters(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = bytes.count
        guard let base = bytes.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        var i = 0
        while n &- i >= 8 {
            let w = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            let below20 = (w &- ones &* 0x20) & ~w & high
            let x = w ^ (ones &* 0x7F)
            let del = (x &- ones) & ~x & high
            if (w & high) | below20 | del != 0 { break }
            i &+= 8
        }
        // The byte before `i` (if any) is ASCII here, so it cannot be a C2 lead byte.
        var previous: UInt8 = 0
        while i < n {
            let c = base[i]
            // C1 controls U+0080...U+009F are encoded C2 80...C2 9F.
            if c < 0x20 || c == 0x7F || (previous == 0xC2 && c >= 0x80 && c <= 0x9F) { return false }
            previous = c
            i &+= 1
        }
        return true
    }

    /// Runs `body` on the string's UTF-8 bytes without copying (native strings are contiguous).
    @inline(__always)
    static func withBytes<T>(_ s: String, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        if let result = s.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(s.utf8).withUnsafeBufferPointer(body)
    }
}
