import COpenSSL

/// A development certificate made in process, so `liverelay serve` can come up
/// over TLS on a fresh machine without the operator running `openssl` by hand.
public enum SelfSignedCertificate {
    public struct GenerationError: Error, Sendable, Hashable, CustomStringConvertible {
        public var step: String
        public var openSSLError: String
        public var description: String { "self-signed certificate: \(step): \(openSSLError)" }
    }

    /// Generates an EC P-256 key and a self-signed certificate for it.
    ///
    /// The certificate is its own trust anchor: a client trusts it by loading the
    /// certificate PEM as its CA file. `subjectAltNames` entries that parse as IP
    /// addresses become IP SANs, the rest DNS SANs (modern clients ignore the CN).
    public static func generate(
        commonName: String = "localhost",
        subjectAltNames: [String] = ["localhost", "127.0.0.1"],
        validity: Duration = .seconds(365 * 24 * 3600)
    ) throws(GenerationError) -> (certificatePEM: String, privateKeyPEM: String) {
        func fail(_ step: String) -> GenerationError {
            GenerationError(step: step, openSSLError: OpenSSLErrorQueue.message())
        }
        ERR_clear_error()
        guard let key = lr_EVP_EC_gen("P-256") else { throw fail("EC P-256 key generation") }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { throw fail("X509_new") }
        defer { X509_free(certificate) }

        guard X509_set_version(certificate, 2) == 1 else { throw fail("version") }  // v3
        // A random 127-bit serial: browsers and OpenSSL reject reused serials from one issuer.
        var serialBytes = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&serialBytes, Int32(serialBytes.count)) == 1 else { throw fail("serial number") }
        serialBytes[0] &= 0x7F
        guard let serial = BN_bin2bn(serialBytes, Int32(serialBytes.count), nil) else { throw fail("serial number") }
        defer { BN_free(serial) }
        guard BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(certificate)) != nil else { throw fail("serial number") }

        let seconds = validity.components.seconds
        guard seconds > 0,
            X509_gmtime_adj(X509_getm_notBefore(certificate), -300) != nil,  // tolerate small clock skew
            X509_gmtime_adj(X509_getm_notAfter(certificate), Int(seconds)) != nil
        else { throw fail("validity period") }

        guard let name = X509_get_subject_name(certificate),
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, commonName, -1, -1, 0) == 1,
            X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, "LiveRelay development", -1, -1, 0) == 1,
            X509_set_issuer_name(certificate, name) == 1
        else { throw fail("subject name") }
        guard X509_set_pubkey(certificate, key) == 1 else { throw fail("public key") }

        let sans = subjectAltNames.map { entry -> String in
            if let parsed = a2i_IPADDRESS(entry) {
                ASN1_OCTET_STRING_free(parsed)
                return "IP:\(entry)"
            }
            return "DNS:\(entry)"
        }
        var extensions: [(Int32, String)] = [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, "critical,digitalSignature,keyAgreement"),
            (NID_ext_key_usage, "serverAuth,clientAuth"),
            (NID_subject_key_identifier, "hash"),
        ]
        if !sans.isEmpty {
            extensions.append((NID_subject_alt_name, sans.joined(separator: ",")))
        }
        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value) else { throw fail("extension \(nid)") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(certificate, ext, -1) == 1 else { throw fail("extension \(nid)") }
        }

        guard X509_sign(certificate, key, EVP_sha256()) > 0 else { throw fail("signing") }

        guard let certificateBIO = BIO_new(BIO_s_mem()) else { throw fail("BIO") }
        defer { BIO_free(certificateBIO) }
        guard PEM_write_bio_X509(certificateBIO, certificate) == 1 else { throw fail("certificate PEM") }
        guard let keyBIO = BIO_new(BIO_s_mem()) else { throw fail("BIO") }
        defer { BIO_free(keyBIO) }
        guard PEM_write_bio_PrivateKey(keyBIO, key, nil, nil, 0, nil, nil) == 1 else { throw fail("private key PEM") }
        return (memoryBIOString(certificateBIO), memoryBIOString(keyBIO))
    }
}
