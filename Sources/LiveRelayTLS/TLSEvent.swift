import COpenSSL

/// User events fired by `OpenSSLHandler`, so handlers after it can start work
/// only once the connection is authenticated (and know which protocol ALPN chose,
/// e.g. "h2" for the APNs client).
public enum TLSEvent: Sendable, Hashable {
    case handshakeCompleted(negotiatedProtocol: String?)
}

/// The certificate the peer presented, for authorization decisions after an mTLS handshake.
public struct TLSPeerCertificate: Sendable, Hashable {
    /// The certificate in DER, for pinning or fingerprinting.
    public var der: [UInt8]
    /// The subject as an RFC 2253 string, e.g. "CN=client-1,O=LiveRelay".
    public var subject: String

    /// Reads the peer certificate of a connection that finished its handshake.
    static func read(from ssl: OpaquePointer) -> TLSPeerCertificate? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        let length = i2d_X509(certificate, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        der.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_X509(certificate, &cursor)
        }
        var subject = ""
        if let bio = BIO_new(BIO_s_mem()) {
            defer { BIO_free(bio) }
            if X509_NAME_print_ex(bio, X509_get_subject_name(certificate), 0, lr_XN_FLAG_RFC2253) >= 0 {
                subject = memoryBIOString(bio)
            }
        }
        return TLSPeerCertificate(der: der, subject: subject)
    }
}

/// The contents of a memory BIO as a String.
func memoryBIOString(_ bio: OpaquePointer) -> String {
    var data: UnsafeMutablePointer<CChar>? = nil
    let length = lr_BIO_get_mem_data(bio, &data)
    guard let data, length > 0 else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
}
