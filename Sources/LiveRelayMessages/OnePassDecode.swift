import CLiveRelayProto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The request decode in one pass over the wire bytes.
//
// Why: the WireScan pre-scan walked every request's bytes once before
// protobuf-c's unpack walked them again, only to prove that every string is
// UTF-8 without NUL. Reading the unpacked struct proves the same on the common
// path at no extra walk:
//
// - UTF-8 is checked while the Swift `String` is made from the C string (the
//   ASCII test that was already there; the full check only for non-ASCII text).
// - A NUL that protobuf-c cut a string at, and a string lost to a later
//   duplicate of its field, both leave wire bytes that the struct does not
//   account for. So while reading, `WireTally` adds up a lower bound of the
//   wire size of everything the struct holds: tag + length + bytes of each
//   string, the smallest varint of each number, and so on. Each value in the
//   struct came from its own field on the wire, at least that long, so a total
//   equal to the input's size proves that nothing on the wire was cut or
//   dropped, and that every string checked here is every string on the wire.
// - Unknown fields (protobuf-c keeps them, unchecked) also send the message
//   down the exact path.
//
// Anything else (a smaller total, an invalid string, an unknown field, a
// failed unpack) runs the old pre-scan over the bytes, which finds the same
// first error, with the same field path and byte offset, as before; inputs it
// accepts decode to the same value as before. Canonical encoders (ours,
// Google's, swift-protobuf) always take the one-pass path.

/// Counts what an unpacked struct holds, as a lower bound of its wire size.
struct WireTally {
    /// The lower bound, in bytes.
    var size = 0
    /// False once a string failed the UTF-8 check or a message kept unknown fields.
    var exact = true

    /// The length of `v` as a base-128 varint.
    @inline(__always)
    static func varintSize(_ v: UInt64) -> Int { ((64 &- (v | 1).leadingZeroBitCount) &+ 6) / 7 }

    /// The length of the tag of field `number` (any wire type).
    @inline(__always)
    static func tagSize(_ number: Int) -> Int { number < 16 ? 1 : varintSize(UInt64(number) << 3) }

    /// Unknown fields are not walked here: the pre-scan decides.
    @inline(__always)
    mutating func noUnknownFields(_ base: ProtobufCMessage) {
        if base.n_unknown_fields != 0 { exact = false }
    }

    // MARK: Strings

    /// A string present on the wire: counted, checked, copied into a `String`.
    /// A string that fails the UTF-8 check becomes "" (the pre-scan then refuses the message).
    @inline(__always)
    mutating func string(_ p: UnsafeMutablePointer<CChar>, field: Int) -> String {
        let n = strlen(p)
        size &+= WireTally.tagSize(field) &+ WireTally.varintSize(UInt64(n)) &+ n
        if n == 0 { return "" }
        let raw = UnsafeRawPointer(p)
        let bytes = UnsafeBufferPointer(start: raw.assumingMemoryBound(to: UInt8.self), count: n)
        let ascii = isASCII(raw, n)
        // strlen stops at the first NUL, so only UTF-8 is left to check.
        if !ascii, WireScan.checkString(bytes.baseAddress!, n) != nil {
            exact = false
            return ""
        }
        return String(copying: unsafe UTF8Span(unchecked: unsafe Span(_unsafeElements: bytes), isKnownASCII: ascii))
    }

    /// A proto2 optional string: nil when absent.
    @inline(__always)
    mutating func optionalString(_ p: UnsafeMutablePointer<CChar>?, field: Int) -> String? {
        guard let p else { return nil }
        return string(p, field: field)
    }

    /// A proto3 string: protobuf_c_empty_string when absent (not on the wire, not counted).
    @inline(__always)
    mutating func string3(_ p: UnsafeMutablePointer<CChar>?, field: Int) -> String {
        guard let p, p != lr_empty_string() else { return "" }
        return string(p, field: field)
    }

    /// A repeated string: one tag and length per element.
    mutating func strings(
        _ n: Int, _ p: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, field: Int
    ) -> [String] {
        guard n > 0, let p else { return [] }
        var out = [String]()
        out.reserveCapacity(n)
        for i in 0..<n {
            if let s = p[i] { out.append(string(s, field: field)) } else { out.append("") }
        }
        return out
    }

    /// A proto3 bytes field; not counted when empty (proto3 omits it).
    @inline(__always)
    mutating func bytes3(_ d: ProtobufCBinaryData, field: Int) -> [UInt8] {
        guard d.len > 0, let data = d.data else { return [] }
        size &+= WireTally.tagSize(field) &+ WireTally.varintSize(UInt64(d.len)) &+ d.len
        return [UInt8](UnsafeBufferPointer(start: data, count: d.len))
    }

    // MARK: Numbers (each counted at the smallest encoding that could have made it)

    @inline(__always)
    mutating func varint(_ v: UInt64, field: Int) {
        size &+= WireTally.tagSize(field) &+ WireTally.varintSize(v)
    }

    /// int64: the value's own varint (negative values are always 10 bytes).
    @inline(__always)
    mutating func int64(_ v: Int64, field: Int) { varint(UInt64(bitPattern: v), field: field) }

    /// int32 and enums: protobuf-c keeps the low 32 bits of whatever varint came,
    /// so only their varint length is a lower bound (a canonical negative value
    /// is 10 bytes and makes the total too small: exact path).
    @inline(__always)
    mutating func int32(_ v: Int32, field: Int) { varint(UInt64(UInt32(bitPattern: v)), field: field) }

    @inline(__always)
    mutating func fixed64(field: Int) { size &+= WireTally.tagSize(field) &+ 8 }

    /// A sub-message's content, counted by `sub`.
    @inline(__always)
    mutating func message(_ sub: WireTally, field: Int) {
        size &+= WireTally.tagSize(field) &+ WireTally.varintSize(UInt64(sub.size)) &+ sub.size
        if !sub.exact { exact = false }
    }

    // proto2 optionals: counted when present.

    @inline(__always)
    mutating func optionalInt64(_ has: protobuf_c_boolean, _ v: Int64, field: Int) -> Int64? {
        guard has != 0 else { return nil }
        int64(v, field: field)
        return v
    }

    @inline(__always)
    mutating func optionalDouble(_ has: protobuf_c_boolean, _ v: Double, field: Int) -> Double? {
        guard has != 0 else { return nil }
        fixed64(field: field)
        return v
    }

    @inline(__always)
    mutating func optionalBool(_ has: protobuf_c_boolean, _ v: protobuf_c_boolean, field: Int) -> Bool? {
        guard has != 0 else { return nil }
        size &+= WireTally.tagSize(field) &+ 1
        return v != 0
    }

    @inline(__always)
    mutating func optionalPriority(_ has: protobuf_c_boolean, _ v: LrPriority, field: Int) -> Priority? {
        guard has != 0 else { return nil }
        let raw = cEnumValue(v)
        int32(raw, field: field)
        return Priority(rawValue: raw)
    }

    // proto3 scalars: counted when not zero (proto3 omits zero).

    @inline(__always)
    mutating func int64_3(_ v: Int64, field: Int) -> Int64 {
        if v != 0 { int64(v, field: field) }
        return v
    }

    @inline(__always)
    mutating func enum3<E: RawRepresentable>(_ e: E, field: Int) -> Int32 where E.RawValue: FixedWidthInteger {
        let raw = cEnumValue(e)
        if raw != 0 { int32(raw, field: field) }
        return raw
    }

    @inline(__always)
    mutating func uint32_3(_ v: UInt32, field: Int) -> UInt32 {
        if v != 0 { varint(UInt64(v), field: field) }
        return v
    }

    @inline(__always)
    mutating func uint64_3(_ v: UInt64, field: Int) -> UInt64 {
        if v != 0 { varint(v, field: field) }
        return v
    }

    @inline(__always)
    mutating func bool3(_ v: protobuf_c_boolean, field: Int) -> Bool {
        if v != 0 { size &+= WireTally.tagSize(field) &+ 1 }
        return v != 0
    }
}

/// A message decoded in one pass: its conversion from the unpacked struct
/// counts what it reads (see `WireTally`).
protocol OnePassDecodable: CMessageConvertible {
    init(c: UnsafePointer<CStruct>, tally: inout WireTally)
}

extension OnePassDecodable {
    /// The conversion without the proof, for callers that ran the pre-scan themselves.
    init(c: UnsafePointer<CStruct>) {
        var tally = WireTally()
        self.init(c: c, tally: &tally)
    }

    /// The size limit, protobuf-c's unpack, then the struct read once; the
    /// pre-scan only when the tally cannot prove the bytes clean.
    @inline(__always)
    init(onePass bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
        let message = try Codec.unpack(bytes, limit: limit, descriptor: Self.cDescriptor, prescan: false)
        var tally = WireTally()
        self.init(c: UnsafeRawPointer(message).assumingMemoryBound(to: CStruct.self), tally: &tally)
        if !tally.exact || tally.size != bytes.count {
            do {
                try Codec.scan(bytes, descriptor: Self.cDescriptor)
            } catch {
                lr_free_unpacked(message)
                throw error
            }
        }
        lr_free_unpacked(message)
    }
}
