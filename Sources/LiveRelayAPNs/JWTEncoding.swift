/// base64url without padding (RFC 7515 §2), as JWS compact serialization uses.
///
/// Hand-written rather than Foundation's because decoding must be strict: a
/// token with padding, a `+` or `/`, or stray bits in the last character is
/// malformed, and the verifier says so instead of guessing.
enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    static func encode<C: Collection<UInt8>>(_ bytes: C) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = iterator.next()
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 { out.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)]) }
            if let b2 { out.append(alphabet[Int(b2 & 0x3F)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil for anything that is not canonical unpadded base64url.
    static func decode<C: Collection<UInt8>>(_ text: C) -> [UInt8]? {
        let count = text.count
        guard count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in text {
            let value = reverse[Int(character)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, or two texts would decode to the same bytes.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}

/// The flat JSON objects of a JWT header and claims set, and of an APNs error
/// body: string keys, string or integer values (true, false and null are
/// accepted and ignored). Nesting, duplicate keys and trailing bytes are
/// malformed: APNs tokens never have them, and a lenient parser is how JWT
/// libraries get confused. Read with ``JSONValue``, then held to those rules.
struct FlatJSONObject: Equatable {
    private var members: [String: JSONValue] = [:]

    func string(_ key: String) -> String? { members[key]?.stringValue }

    func integer(_ key: String) -> Int64? { members[key]?.integerValue }

    init?(_ bytes: [UInt8]) {
        guard case let .object(pairs)? = try? JSONValue.parse(bytes) else { return nil }
        for (key, value) in pairs {
            switch value {
            case .object, .array: return nil
            case .string, .number, .bool, .null: break
            }
            guard members.updateValue(value, forKey: key) == nil else { return nil }
        }
    }
}
