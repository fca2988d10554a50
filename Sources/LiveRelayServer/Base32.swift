/// RFC 4648 base32 in lowercase, without padding: key ids stay readable in logs
/// and survive double-click selection (no punctuation), and 12 characters hold 60 bits.
enum Base32 {
    static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)

    /// The first `characters` base32 digits of `bytes` (which must hold at least 5·characters bits).
    static func encode(_ bytes: [UInt8], characters: Int) -> String {
        precondition(bytes.count * 8 >= characters * 5)
        var out: [UInt8] = []
        out.reserveCapacity(characters)
        for index in 0..<characters {
            let bit = index * 5
            let byte = bit / 8
            let shift = bit % 8
            var word = UInt16(bytes[byte]) << 8
            if byte + 1 < bytes.count { word |= UInt16(bytes[byte + 1]) }
            let value = Int((word >> (11 - shift)) & 0x1F)
            out.append(alphabet[value])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func isValid(_ text: Substring.UTF8View) -> Bool {
        text.allSatisfy { alphabet.contains($0) }
    }
}
