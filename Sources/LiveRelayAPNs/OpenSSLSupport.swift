import COpenSSL

/// Why a key could not be loaded, generated, exported or used.
///
/// It names the step and OpenSSL's own message, never the key material or the
/// PEM text: these errors end up in logs.
public struct APNsKeyError: Error, Hashable, Sendable, CustomStringConvertible {
    public var step: String
    public var openSSLError: String

    public init(step: String, openSSLError: String) {
        self.step = step
        self.openSSLError = openSSLError
    }

    public var description: String {
        openSSLError.isEmpty ? "APNs signing key: \(step)" : "APNs signing key: \(step): \(openSSLError)"
    }

    /// Captures (and clears) the thread's OpenSSL error queue for `step`.
    static func fromQueue(_ step: String) -> APNsKeyError {
        APNsKeyError(step: step, openSSLError: drainOpenSSLErrors())
    }
}

/// The thread's OpenSSL errors as one line, through COpenSSL's one drain;
/// every failure path calls it so no stale entry is blamed on a later call.
func drainOpenSSLErrors() -> String {
    var text = [CChar](repeating: 0, count: 4096)
    lr_ERR_drain(&text, text.count, nil, 0)
    return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Owns one `EVP_PKEY` and frees it. OpenSSL 3 allows concurrent signing and
/// verifying with a key that is no longer modified, which is how it is used
/// here, hence `@unchecked Sendable`.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// APNs keys are P-256 only: anything else would sign tokens APNs rejects.
    func requireP256(_ step: String) throws(APNsKeyError) {
        guard EVP_PKEY_is_a(pointer, "EC") == 1 else {
            throw APNsKeyError(step: step, openSSLError: "not an EC key")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pointer, &name, name.count, &length) == 1 else {
            throw APNsKeyError.fromQueue(step)
        }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard group == "prime256v1" || group == "P-256" else {
            throw APNsKeyError(step: step, openSSLError: "curve \(group), APNs needs P-256")
        }
    }

    /// PEM text from one of OpenSSL's `PEM_write_bio_*` functions.
    func pem(_ step: String, _ write: (OpaquePointer, OpaquePointer) -> Int32) throws(APNsKeyError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw APNsKeyError.fromQueue(step) }
        defer { BIO_free(bio) }
        guard write(bio, pointer) == 1 else { throw APNsKeyError.fromQueue(step) }
        var data: UnsafeMutablePointer<CChar>?
        let length = lr_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { throw APNsKeyError.fromQueue(step) }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    /// Reads a key from PEM text with one of OpenSSL's `PEM_read_bio_*` functions.
    static func read(pem: String, step: String, _ read: (OpaquePointer) -> OpaquePointer?) throws(APNsKeyError) -> EVPKey {
        ERR_clear_error()
        let bytes = Array(pem.utf8)
        let key: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return read(bio)
        }
        guard let key else { throw APNsKeyError.fromQueue(step) }
        return EVPKey(taking: key)
    }
}

/// ES256 signatures: OpenSSL speaks DER `ECDSA-Sig-Value`, JWS (RFC 7518 §3.4)
/// wants the fixed 64-byte r||s. These convert between the two and run the
/// digest-sign and digest-verify operations.
enum ES256 {
    /// The order n of the P-256 group (SEC 2). r and s must be in [1, n-1].
    static let groupOrder: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    /// True when a 32-byte big-endian scalar is in [1, n-1].
    static func isValidScalar<C: Collection<UInt8>>(_ scalar: C) -> Bool {
        guard scalar.count == 32, scalar.contains(where: { $0 != 0 }) else { return false }
        return scalar.lexicographicallyPrecedes(groupOrder)
    }

    /// Signs `message` with SHA-256 and returns raw r||s.
    static func sign(_ message: [UInt8], with key: EVPKey) throws(APNsKeyError) -> [UInt8] {
        ERR_clear_error()
        guard let ctx = EVP_MD_CTX_new() else { throw APNsKeyError.fromQueue("signing") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, key.pointer) == 1 else {
            throw APNsKeyError.fromQueue("signing")
        }
        var der = [UInt8](repeating: 0, count: 80)  // a P-256 DER signature is at most 72 bytes
        var length = der.count
        guard EVP_DigestSign(ctx, &der, &length, message, message.count) == 1 else {
            throw APNsKeyError.fromQueue("signing")
        }
        guard let raw = rawSignature(fromDER: Array(der.prefix(length))) else {
            throw APNsKeyError(step: "signing", openSSLError: "unexpected DER signature")
        }
        return raw
    }

    /// Verifies raw r||s over `message`. Rejects anything but 64 bytes with both
    /// scalars in range before OpenSSL sees it, so a DER signature, a truncated
    /// one or r = 0 never reaches the curve arithmetic.
    static func verify(rawSignature raw: [UInt8], message: [UInt8], with key: EVPKey) -> Bool {
        guard raw.count == 64, isValidScalar(raw[0..<32]), isValidScalar(raw[32..<64]),
            let der = derSignature(fromRaw: raw)
        else { return false }
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, key.pointer) == 1 else { return false }
        return EVP_DigestVerify(ctx, der, der.count, message, message.count) == 1
    }

    /// DER `SEQUENCE { r INTEGER, s INTEGER }` to 64-byte r||s; nil if it is not one.
    static func rawSignature(fromDER der: [UInt8]) -> [UInt8]? {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature = parsed else { ERR_clear_error(); return nil }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        guard let r, let s else { return nil }
        var raw = [UInt8](repeating: 0, count: 64)
        let ok = raw.withUnsafeMutableBufferPointer { buffer -> Bool in
            BN_bn2binpad(r, buffer.baseAddress, 32) == 32 && BN_bn2binpad(s, buffer.baseAddress! + 32, 32) == 32
        }
        return ok ? raw : nil
    }

    /// 64-byte r||s to DER, for OpenSSL's verifier and for tests that hand the signature to `openssl dgst`.
    static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let scalars: (OpaquePointer?, OpaquePointer?) = raw.withUnsafeBufferPointer { buffer in
            (BN_bin2bn(buffer.baseAddress, 32, nil), BN_bin2bn(buffer.baseAddress! + 32, 32, nil))
        }
        guard let r = scalars.0, let s = scalars.1 else {
            BN_free(scalars.0)
            BN_free(scalars.1)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &out)
        guard length > 0, let out else { return nil }
        defer { CRYPTO_free(out, nil, 0) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
