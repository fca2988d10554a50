/// A strict RFC 8259 validator for the `*_json` fields.
///
/// Why not JSONSerialization: it allocates a whole object tree just to say yes
/// or no, accepts some non-RFC input, and has no depth limit we control. This
/// scanner allocates nothing on success, stops at the first error with its byte
/// offset, bounds nesting at `MessageLimits.maxJSONDepth` (a 64-bit stack of
/// object/array flags), and rejects trailing garbage, bad escapes and numbers,
/// raw control characters in strings and unpaired surrogate escapes.
/// Input is a Swift `String`, so it is already valid UTF-8.
enum JSONValidator {
    enum Outcome: Equatable {
        case object
        case notObject
        case invalid(offset: Int, reason: String)
    }

    static func check(_ text: String, maxDepth: Int = MessageLimits.maxJSONDepth) -> Outcome {
        if let outcome = text.utf8.withContiguousStorageIfAvailable({ check($0, maxDepth: maxDepth) }) {
            return outcome
        }
        return Array(text.utf8).withUnsafeBufferPointer { check($0, maxDepth: maxDepth) }
    }

    static func check(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = MessageLimits.maxJSONDepth) -> Outcome {
        var scanner = Scanner(p: bytes, maxDepth: min(maxDepth, 64))
        switch scanner.run() {
        case nil:
            return scanner.topIsObject ? .object : .notObject
        case let reason?:
            return .invalid(offset: scanner.i, reason: String(describing: reason))
        }
    }

    private struct Scanner {
        let p: UnsafeBufferPointer<UInt8>
        let maxDepth: Int
        var i = 0
        var depth = 0
        /// Bit d-1 set when the container at depth d is an object.
        var stack: UInt64 = 0
        var topIsObject = false

        init(p: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
            self.p = p
            self.maxDepth = maxDepth
        }

        @inline(__always)
        mutating func skipWhitespace() {
            while i < p.count {
                switch p[i] {
                case 0x20, 0x09, 0x0A, 0x0D: i += 1
                default: return
                }
            }
        }

        @inline(__always)
        var inObject: Bool { stack & (1 << UInt64(depth - 1)) != 0 }

        /// nil on success, else the reason; `i` is the error offset.
        mutating func run() -> StaticString? {
            skipWhitespace()
            guard i < p.count else { return "empty document" }
            topIsObject = p[i] == UInt8(ascii: "{")
            var needValue = true
            while true {
                if needValue {
                    skipWhitespace()
                    guard i < p.count else { return "unexpected end" }
                    switch p[i] {
                    case UInt8(ascii: "{"), UInt8(ascii: "["):
                        let isObject = p[i] == UInt8(ascii: "{")
                        guard depth < maxDepth else { return "nesting too deep" }
                        depth += 1
                        if isObject { stack |= 1 << UInt64(depth - 1) } else { stack &= ~(1 << UInt64(depth - 1)) }
                        i += 1
                        skipWhitespace()
                        guard i < p.count else { return "unexpected end" }
                        if p[i] == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                            i += 1
                            depth -= 1
                            needValue = false
                            continue
                        }
                        if isObject, let error = key() { return error }
                        continue  // needValue stays true
                    case UInt8(ascii: "\""):
                        if let error = string() { return error }
                    case UInt8(ascii: "t"):
                        if let error = literal("true") { return error }
                    case UInt8(ascii: "f"):
                        if let error = literal("false") { return error }
                    case UInt8(ascii: "n"):
                        if let error = literal("null") { return error }
                    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                        if let error = number() { return error }
                    default:
                        return "unexpected character"
                    }
                    needValue = false
                }
                // After a value.
                skipWhitespace()
                if depth == 0 {
                    return i == p.count ? nil : "trailing characters after the document"
                }
                guard i < p.count else { return "unexpected end" }
                let c = p[i]
                if c == UInt8(ascii: ",") {
                    i += 1
                    if inObject {
                        skipWhitespace()
                        if let error = key() { return error }
                    }
                    needValue = true
                } else if c == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    i += 1
                    depth -= 1
                } else {
                    return inObject ? "expected ',' or '}'" : "expected ',' or ']'"
                }
            }
        }

        /// A member name and its colon.
        @inline(__always)
        mutating func key() -> StaticString? {
            guard i < p.count, p[i] == UInt8(ascii: "\"") else { return "expected a member name" }
            if let error = string() { return error }
            skipWhitespace()
            guard i < p.count, p[i] == UInt8(ascii: ":") else { return "expected ':'" }
            i += 1
            return nil
        }

        mutating func literal(_ word: StaticString) -> StaticString? {
            let n = word.utf8CodeUnitCount
            guard p.count - i >= n else { return "invalid literal" }
            let w = word.utf8Start
            for k in 0..<n where p[i + k] != w[k] { return "invalid literal" }
            i += n
            return nil
        }

        @inline(__always)
        mutating func number() -> StaticString? {
            if p[i] == UInt8(ascii: "-") { i += 1 }
            guard i < p.count else { return "invalid number" }
            if p[i] == UInt8(ascii: "0") {
                i += 1
            } else if isDigit(p[i]) {
                while i < p.count, isDigit(p[i]) { i += 1 }
            } else {
                return "invalid number"
            }
            if i < p.count, p[i] == UInt8(ascii: ".") {
                i += 1
                guard i < p.count, isDigit(p[i]) else { return "invalid number: digit expected after '.'" }
                while i < p.count, isDigit(p[i]) { i += 1 }
            }
            if i < p.count, p[i] | 0x20 == UInt8(ascii: "e") {
                i += 1
                if i < p.count, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") { i += 1 }
                guard i < p.count, isDigit(p[i]) else { return "invalid number: digit expected in exponent" }
                while i < p.count, isDigit(p[i]) { i += 1 }
            }
            return nil
        }

        /// The high bit of each byte of `w` that is '"', '\\' or a control character
        /// (< 0x20); bytes >= 0x80 are ordinary string content (the text is valid UTF-8).
        /// Only the lowest set bit is exact (borrows can mark bytes above it), which is
        /// all `string()` uses: it is the first byte that needs a look.
        @inline(__always)
        static func specialBytes(_ w: UInt64) -> UInt64 {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let high: UInt64 = 0x8080_8080_8080_8080
            let quote = w ^ (ones &* 0x22)
            let backslash = w ^ (ones &* 0x5C)
            let hasQuote = (quote &- ones) & ~quote
            let hasBackslash = (backslash &- ones) & ~backslash
            let hasControl = (w &- ones &* 0x20) & ~w
            return (hasQuote | hasBackslash | hasControl) & high
        }

        @inline(__always)
        mutating func string() -> StaticString? {
            i += 1  // opening quote
            let base = UnsafeRawPointer(p.baseAddress!)
            while i < p.count {
                // 8 bytes at a time: skip plain runs, or jump straight to the first special byte.
                if p.count &- i >= 8 {
                    let special = Scanner.specialBytes(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                    if special == 0 {
                        i &+= 8
                        continue
                    }
                    i &+= special.trailingZeroBitCount &>> 3
                }
                let c = p[i]
                if c == UInt8(ascii: "\"") {
                    i += 1
                    return nil
                }
                if c < 0x20 { return "control character in string" }
                if c != UInt8(ascii: "\\") {
                    i += 1
                    continue
                }
                i += 1
                guard i < p.count else { return "unterminated string" }
                switch p[i] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    i += 1
                case UInt8(ascii: "u"):
                    i += 1
                    guard let unit = hex4() else { return "invalid \\u escape" }
                    if unit >= 0xDC00, unit <= 0xDFFF { return "unpaired low surrogate escape" }
                    if unit >= 0xD800, unit <= 0xDBFF {
                        guard p.count - i >= 2, p[i] == UInt8(ascii: "\\"), p[i + 1] == UInt8(ascii: "u") else {
                            return "unpaired high surrogate escape"
                        }
                        i += 2
                        guard let low = hex4() else { return "invalid \\u escape" }
                        guard low >= 0xDC00, low <= 0xDFFF else { return "unpaired high surrogate escape" }
                    }
                default:
                    return "invalid escape"
                }
            }
            return "unterminated string"
        }

        mutating func hex4() -> UInt32? {
            guard p.count - i >= 4 else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let c = p[i]
                let digit: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                i += 1
            }
            return value
        }

        @inline(__always)
        func isDigit(_ c: UInt8) -> Bool { c &- UInt8(ascii: "0") < 10 }
    }
}
