/// A small strict JSON reader: the mock looks at the shape of a push's `aps`
/// dictionary with it, and JWT headers and claims and APNs error bodies are
/// read with it (``FlatJSONObject``).
///
/// Why not JSONSerialization: it cannot tell `1` from `1.0` portably (the
/// `timestamp` must be an integer), it accepts some non-RFC input, and its
/// depth is not bounded by us. Payloads are at most 4 KiB, so building a tree
/// is cheap; nesting is capped so a hostile body cannot blow the stack.
package enum JSONValue: Equatable, Sendable {
    case object([(String, JSONValue)])
    case array([JSONValue])
    case string(String)
    /// The literal text, so integer-ness is decided by the text (`1` vs `1.0` vs `1e3`).
    case number(String)
    case bool(Bool)
    case null

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case let (.object(a), .object(b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case let (.array(a), .array(b)): a == b
        case let (.string(a), .string(b)): a == b
        case let (.number(a), .number(b)): a == b
        case let (.bool(a), .bool(b)): a == b
        case (.null, .null): true
        default: false
        }
    }

    /// The first member named `key` of an object (JSON leaves duplicates undefined; APNs's parser
    /// is not documented, and the first is what a streaming reader sees first).
    package subscript(key: String) -> JSONValue? {
        guard case let .object(members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    package var isObject: Bool { if case .object = self { true } else { false } }

    /// The value as an Int64 when it is written as one: digits with an optional minus sign, no
    /// fraction or exponent, in range.
    package var integerValue: Int64? {
        guard case let .number(text) = self, !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) else {
            return nil
        }
        return Int64(text)
    }

    package var stringValue: String? { if case let .string(s) = self { s } else { nil } }

    package struct ParseError: Error, Equatable {
        package var offset: Int
        package var message: String
    }

    package static let maxDepth = 32

    package static func parse(_ bytes: [UInt8]) throws(ParseError) -> JSONValue {
        var parser = Parser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.i == bytes.count else { throw parser.error("trailing characters") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0

        func error(_ message: String) -> ParseError { ParseError(offset: i, message: message) }

        mutating func skipWhitespace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 {
                i += 1
            }
        }

        mutating func expect(_ literal: String) throws(ParseError) {
            for byte in literal.utf8 {
                guard i < bytes.count, bytes[i] == byte else { throw error("expected \(literal)") }
                i += 1
            }
        }

        mutating func value(depth: Int) throws(ParseError) -> JSONValue {
            guard depth <= JSONValue.maxDepth else { throw error("nested too deeply") }
            guard i < bytes.count else { throw error("unexpected end") }
            switch bytes[i] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "n"): try expect("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw error("unexpected character")
            }
        }

        mutating func object(depth: Int) throws(ParseError) -> JSONValue {
            i += 1
            var members: [(String, JSONValue)] = []
            skipWhitespace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            while true {
                skipWhitespace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("expected a member name") }
                let key = try string()
                skipWhitespace()
                try expect(":")
                skipWhitespace()
                members.append((key, try value(depth: depth + 1)))
                skipWhitespace()
                guard i < bytes.count else { throw error("unterminated object") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                throw error("expected , or }")
            }
        }

        mutating func array(depth: Int) throws(ParseError) -> JSONValue {
            i += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(elements) }
            while true {
                skipWhitespace()
                elements.append(try value(depth: depth + 1))
                skipWhitespace()
                guard i < bytes.count else { throw error("unterminated array") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(elements) }
                throw error("expected , or ]")
            }
        }

        mutating func number() throws(ParseError) -> JSONValue {
            let start = i
            if bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { throw error("bad number") }
            if bytes[i] == UInt8(ascii: "0") {
                i += 1
            } else {
                while i < bytes.count, isDigit(bytes[i]) { i += 1 }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                i += 1
                guard i < bytes.count, isDigit(bytes[i]) else { throw error("bad fraction") }
                while i < bytes.count, isDigit(bytes[i]) { i += 1 }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                i += 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
                guard i < bytes.count, isDigit(bytes[i]) else { throw error("bad exponent") }
                while i < bytes.count, isDigit(bytes[i]) { i += 1 }
            }
            return .number(String(decoding: bytes[start..<i], as: UTF8.self))
        }

        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

        /// Decodes escapes; rejects raw control characters, bad escapes, unpaired surrogates and invalid UTF-8.
        mutating func string() throws(ParseError) -> String {
            i += 1
            var out: [UInt8] = []
            while true {
                guard i < bytes.count else { throw error("unterminated string") }
                let b = bytes[i]
                if b == UInt8(ascii: "\"") { i += 1; break }
                if b < 0x20 { throw error("control character in string") }
                if b != UInt8(ascii: "\\") { out.append(b); i += 1; continue }
                i += 1
                guard i < bytes.count else { throw error("unterminated escape") }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        try expect("\\u")
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("unpaired surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("bad escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw error("bad escape")
                }
            }
            guard let text = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8") }
            return text
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard i + 4 <= bytes.count else { throw error("short \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[i]
                let digit: UInt32
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
                default: throw error("bad \\u escape")
                }
                value = value << 4 | digit
                i += 1
            }
            return value
        }
    }
}
