import CLiveRelayProto

/// A pre-scan of the raw wire bytes, guided by the protobuf-c descriptor, run
/// before `protobuf_c_message_unpack`.
///
/// Why: protobuf-c 1.4 neither checks UTF-8 nor keeps string lengths; it copies
/// strings into NUL-terminated `char *`, so "abc\0def" arrives as "abc" without
/// error. Only the wire bytes still show the truth. The scan checks every
/// string field (in sub-messages and repeated fields too) and reports the proto
/// field path, e.g. `targets.push_to_start_tokens[3]`. It also rejects framing
/// errors (truncated varints, lengths past the end, groups) with a byte offset,
/// before protobuf-c's error paths are reached. Unknown fields are only skipped.
enum WireScan {
    struct Failure: Error {
        var kind: MessageError.Kind
        var detail: String
        /// Path components, innermost first.
        var path: [String]
    }

    static func check(
        _ p: UnsafePointer<UInt8>, count: Int, descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    ) throws(MessageError) {
        do {
            try scan(p, 0, count, descriptor)
        } catch {
            throw MessageError(error.kind, field: error.path.reversed().joined(separator: "."), detail: error.detail)
        }
    }

    private static func scan(
        _ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int,
        _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    ) throws(Failure) {
        var i = start
        while i < end {
            let tagOffset = i
            guard let tag = readVarint(p, &i, end) else {
                throw Failure(kind: .malformed, detail: "truncated tag at byte \(tagOffset)", path: [])
            }
            let number = tag >> 3
            guard number != 0, number <= 0x1FFF_FFFF else {
                throw Failure(kind: .malformed, detail: "invalid field number at byte \(tagOffset)", path: [])
            }
            switch tag & 7 {
            case 0:
                let at = i
                guard readVarint(p, &i, end) != nil else {
                    throw Failure(kind: .malformed, detail: "truncated varint at byte \(at)", path: [])
                }
            case 1, 5:
                let width = tag & 7 == 1 ? 8 : 4
                guard end - i >= width else {
                    throw Failure(kind: .malformed, detail: "truncated fixed\(width * 8) at byte \(i)", path: [])
                }
                i += width
            case 2:
                let at = i
                guard let length = readVarint(p, &i, end), length <= UInt64(end - i) else {
                    throw Failure(kind: .malformed, detail: "length past the end at byte \(at)", path: [])
                }
                let valueStart = i
                i += Int(length)
                guard let field = fieldDescriptor(descriptor, UInt32(truncatingIfNeeded: number)) else {
                    continue  // unknown field: skipped here, dropped after unpack
                }
                if field.pointee.type == PROTOBUF_C_TYPE_STRING {
                    if let (kind, detail) = checkString(p + valueStart, Int(length)) {
                        throw Failure(
                            kind: kind, detail: detail,
                            path: [component(field, p, start, tagOffset, UInt32(number))])
                    }
                } else if field.pointee.type == PROTOBUF_C_TYPE_MESSAGE {
                    let sub = field.pointee.descriptor.assumingMemoryBound(to: ProtobufCMessageDescriptor.self)
                    do {
                        try scan(p, valueStart, i, sub)
                    } catch {
                        var failure = error
                        failure.path.append(component(field, p, start, tagOffset, UInt32(number)))
                        throw failure
                    }
                }
            default:
                throw Failure(kind: .malformed, detail: "unsupported wire type \(tag & 7) at byte \(tagOffset)", path: [])
            }
        }
    }

    /// The field with this number, or nil. Fields are sorted by number, so when
    /// they are numbered 1...n the number is the index; otherwise protobuf-c's
    /// binary search.
    @inline(__always)
    static func fieldDescriptor(
        _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>, _ number: UInt32
    ) -> UnsafePointer<ProtobufCFieldDescriptor>? {
        let d = descriptor.pointee
        if number >= 1, number <= d.n_fields, let fields = d.fields {
            let candidate = fields + Int(number - 1)
            if candidate.pointee.id == number { return candidate }
        }
        return protobuf_c_message_descriptor_get_field(descriptor, number)
    }

    /// Reads a base-128 varint of at most 10 bytes; nil when truncated or overlong.
    @inline(__always)
    static func readVarint(_ p: UnsafePointer<UInt8>, _ i: inout Int, _ end: Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while i < end, shift < 70 {
            let byte = p[i]
            i += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
        return nil
    }

    /// "name" or "name[k]", k counting earlier occurrences of the field in this
    /// message. Computed only on the error path, by re-walking the message.
    private static func component(
        _ field: UnsafePointer<ProtobufCFieldDescriptor>, _ p: UnsafePointer<UInt8>,
        _ start: Int, _ tagOffset: Int, _ number: UInt32
    ) -> String {
        let name = String(cString: field.pointee.name)
        guard field.pointee.label == PROTOBUF_C_LABEL_REPEATED else { return name }
        var index = 0
        var i = start
        while i < tagOffset, let tag = readVarint(p, &i, tagOffset) {
            if UInt32(truncatingIfNeeded: tag >> 3) == number { index += 1 }
            switch tag & 7 {
            case 0: _ = readVarint(p, &i, tagOffset)
            case 1: i += 8
            case 5: i += 4
            case 2: if let n = readVarint(p, &i, tagOffset) { i += Int(n) }
            default: return "\(name)[\(index)]"
            }
        }
        return "\(name)[\(index)]"
    }

    /// Checks UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF)
    /// and the absence of NUL. Returns the failure, or nil when the string is fine.
    @inline(__always)
    static func checkString(_ s: UnsafePointer<UInt8>, _ n: Int) -> (MessageError.Kind, String)? {
        let raw = UnsafeRawPointer(s)
        if n >= 8 {
            // ASCII fast path, 8 bytes at a time (no high bit, no zero byte); the
            // last word overlaps the previous one instead of a byte-by-byte tail.
            var i = 0
            while i < n &- 8 {
                if !asciiNonZero(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) {
                    return checkStringSlow(s, i, n)
                }
                i &+= 8
            }
            if !asciiNonZero(raw.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)) {
                return checkStringSlow(s, i, n)
            }
            return nil
        }
        var i = 0
        while i < n {
            let b = s[i]
            if b == 0 || b >= 0x80 { return checkStringSlow(s, i, n) }
            i &+= 1
        }
        return nil
    }

    /// True when none of the 8 bytes has its high bit set or is zero.
    @inline(__always)
    static func asciiNonZero(_ w: UInt64) -> Bool {
        let high = w & 0x8080_8080_8080_8080
        let zero = (w &- 0x0101_0101_0101_0101) & ~w & 0x8080_8080_8080_8080
        return high | zero == 0
    }

    /// From a character boundary `from`: the full check, returning to 8-byte steps over ASCII runs.
    private static func checkStringSlow(_ s: UnsafePointer<UInt8>, _ from: Int, _ n: Int) -> (MessageError.Kind, String)? {
        var i = from
        while i < n {
            if n &- i >= 8, asciiNonZero(UnsafeRawPointer(s + i).loadUnaligned(as: UInt64.self)) {
                i &+= 8
                continue
            }
            let b0 = s[i]
            if b0 < 0x80 {
                if b0 == 0 { return (.embeddedNUL, "NUL character at byte \(i)") }
                i += 1
                continue
            }
            let length: Int
            var lower: UInt8 = 0x80, upper: UInt8 = 0xBF
            switch b0 {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; upper = 0x9F
            case 0xF0: length = 4; lower = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; upper = 0x8F
            default: return (.invalidUTF8, "invalid UTF-8 at byte \(i)")
            }
            guard n - i >= length else { return (.invalidUTF8, "truncated UTF-8 sequence at byte \(i)") }
            let b1 = s[i + 1]
            guard b1 >= lower, b1 <= upper else { return (.invalidUTF8, "invalid UTF-8 at byte \(i)") }
            var k = 2
            while k < length {
                guard s[i + k] & 0xC0 == 0x80 else { return (.invalidUTF8, "invalid UTF-8 at byte \(i)") }
                k += 1
            }
            i += length
        }
        return nil
    }
}
