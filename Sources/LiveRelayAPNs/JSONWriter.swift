/// A JSON string literal of `value`, escaped as the payload builder escapes: the
/// one escaper for the JSON LiveRelay writes by hand (JWTs, APNs error bodies, the
/// mock's records, the CLI's output).
package func jsonQuoted(_ value: String) -> String {
    var writer = JSONWriter()
    writer.string(value)
    return String(decoding: writer.bytes, as: UTF8.self)
}

/// Appends JSON tokens to a byte array.
package struct JSONWriter {
    package var bytes: [UInt8] = []

    package init() { bytes.reserveCapacity(512) }

    package mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    package mutating func integer(_ value: Int64) { bytes.append(contentsOf: String(value).utf8) }

    /// Swift's shortest round-trip form ("0.5", "1e-07", "100.0") is valid JSON for finite values.
    package mutating func number(_ value: Double) {
        precondition(value.isFinite, "validated as finite")
        bytes.append(contentsOf: String(value).utf8)
    }

    /// RFC 8259 escaping: quote, backslash and control characters; everything
    /// else (including non-ASCII) goes out as UTF-8.
    package mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for c in value.utf8 {
            switch c {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x00..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [
                    0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    hex[Int(c >> 4)], hex[Int(c & 0xF)],
                ])
            default: bytes.append(c)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
