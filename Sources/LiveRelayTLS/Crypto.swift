import COpenSSL

/// The few primitives API keys and webhook signatures need, from the libcrypto the TLS
/// layer links, so neither adds a dependency nor hand-rolled cryptography.
package enum Crypto {
    /// SHA-256 through the EVP interface (the low-level SHA256_* calls are deprecated in OpenSSL 3).
    package static func sha256<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [UInt8] {
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

    /// HMAC-SHA256 of `message` keyed with `key` (OpenSSL's one-shot HMAC).
    package static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let result = key.withUnsafeBytes { key in
            message.withUnsafeBufferPointer { message in
                HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), message.baseAddress, message.count, &digest, &length)
            }
        }
        // HMAC fails only on allocation failure or a missing SHA-256 provider: nothing can be signed then.
        precondition(result != nil && length == 32, "OpenSSL HMAC-SHA256 failed")
        return digest
    }

    /// Compares in time that depends only on the length, so a response time
    /// says nothing about how many leading bytes of a guessed hash were right.
    package static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, pa.count) == 0 }
        }
    }

    /// Bytes from OpenSSL's CSPRNG; a failure here means the process cannot make keys safely at all.
    package static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        precondition(ok == 1, "RAND_bytes failed: the CSPRNG is unavailable")
        return bytes
    }
}

/// Lowercase hex, as key hashes and signatures are written.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    package static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Lowercase or uppercase hex to bytes; nil if the text is not an even number of hex digits.
    package static func decode(_ text: String) -> [UInt8]? {
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
