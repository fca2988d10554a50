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

/// The flat JSON objects of a JWT header and claims set: string keys, string or
/// integer values (true, false and null are accepted and ignored). Nesting,
/// duplicate keys and trailing bytes are malformed: APNs tokens never have
/// them, and a lenient parser is how JWT libraries get confused.
struct FlatJSONObject: Equatable {
    enum Value: Equatable {
        case string(String)
        case integer(Int64)
        case other
    }

    private(set) var members: [String: Value] = [:]

    subscript(key: String) -> Value? { members[key] }

    func string(_ key: String) -> String? {
        if case .string(let value)? = members[key] { return value }
        return nil
    }

    func integer(_ key: String) -> Int64? {
        if case .integer(let value)? = members[key] { return value }
        return nil
    }

    init?(_ bytes: [UInt8]) {
        var parser = Parser(bytes: bytes)
        guard let members = parser.parseObject() else { return nil }
        parser.skipWhitespace()
        guard parser.index == bytes.count else { return nil }
        self.members = members
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func expect(_ byte: UInt8) -> Bool {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func parseObject() -> [String: Value]? {
            guard expect(UInt8(ascii: "{")) else { return nil }
            var members: [String: Value] = [:]
            if expect(UInt8(ascii: "}")) { return members }
            repeat {
                skipWhitespace()
                guard let key = parseString(), expect(UInt8(ascii: ":")), let value = parseValue(),
                    members.updateValue(value, forKey: key) == nil
                else { return nil }
            } while expect(UInt8(ascii: ","))
            return expect(UInt8(ascii: "}")) ? members : nil
        }

        mutating func parseValue() -> Value? {
            skipWhitespace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "\""):
                return parseString().map(Value.string)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return parseInteger().map(Value.integer)
            default:
                for literal in ["true", "false", "null"] {
                    let utf8 = Array(literal.utf8)
                    if bytes.count - index >= utf8.count, Array(bytes[index..<index + utf8.count]) == utf8 {
                        index += utf8.count
                        return .other
                    }
                }
                return nil
            }
        }

        /// Integers only: `iat` is whole seconds, and a fraction or exponent is not what APNs expects.
        mutating func parseInteger() -> Int64? {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            let digits = index - digitsStart
            guard digits > 0, digits <= 18, !(digits > 1 && bytes[digitsStart] == UInt8(ascii: "0")) else { return nil }
            if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) {
                return nil
            }
            return Int64(String(decoding: bytes[start..<index], as: UTF8.self))
        }

        mutating func parseString() -> String? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            var out: [UInt8] = []
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "u"):
                        // Enough for the ASCII identifiers in JWT headers; surrogates are malformed here.
                        guard bytes.count - index >= 4,
                            let code = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16),
                            let scalar = Unicode.Scalar(code)
                        else { return nil }
                        index += 4
                        out.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default: return nil
                    }
                case 0x00..<0x20:
                    return nil
                default:
                    out.append(byte)
                }
            }
            return nil
        }
    }
}

/// JSON string escaping for the few values LiveRelay writes into a JWT (key and team ids).
func jsonQuoted(_ value: String) -> String {
    var out = "\""
    for scalar in value.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\u{00}"..."\u{1F}":
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
