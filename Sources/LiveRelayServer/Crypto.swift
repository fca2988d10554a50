import COpenSSL

/// The few primitives API keys need, from the libcrypto the TLS layer already links,
/// so authentication adds no dependency and no hand-rolled cryptography.
enum Crypto {
    /// SHA-256 through the EVP interface (the low-level SHA256_* calls are deprecated in OpenSSL 3).
    static func sha256<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let ok: Int32 =
            bytes.withContiguousStorageIfAvailable { input in
                digest.withUnsafeMutableBufferPointer { out in
                    var size: UInt32 = 0
                    return EVP_Digest(input.baseAddress, input.count, out.baseAddress, &size, EVP_sha256(), nil)
                }
            }
            ?? {
                let copy = Array(bytes)
                return copy.withUnsafeBufferPointer { input in
                    digest.withUnsafeMutableBufferPointer { out in
                        var size: UInt32 = 0
                        return EVP_Digest(input.baseAddress, input.count, out.baseAddress, &size, EVP_sha256(), nil)
                    }
                }
            }()
        precondition(ok == 1, "EVP_Digest(SHA-256) failed")
        return digest
    }

    /// Compares in time that depends only on the length, so a response time
    /// says nothing about how many leading bytes of a guessed hash were right.
    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, pa.count) == 0 }
        }
    }

    /// Bytes from OpenSSL's CSPRNG; a failure here means the process cannot make keys safely at all.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        precondition(ok == 1, "RAND_bytes failed: the CSPRNG is unavailable")
        return bytes
    }
}

enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Lowercase or uppercase hex to bytes; nil if the text is not an even number of hex digits.
    static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = value(utf8[index]), let low = value(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

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
