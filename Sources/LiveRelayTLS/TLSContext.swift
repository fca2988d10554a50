import COpenSSL

/// One OpenSSL `SSL_CTX`, built once from a `TLSConfiguration` and shared by every connection.
///
/// Building a context parses certificates and keys and loads trust stores,
/// which is far too slow to do per connection; OpenSSL allows one `SSL_CTX`
/// to be used from many threads once it is configured, hence `@unchecked Sendable`:
/// nothing mutates it after `init`.
public final class TLSContext: @unchecked Sendable {
    public let configuration: TLSConfiguration
    let ctx: OpaquePointer
    /// ALPN list in wire format (length-prefixed names); the server's select callback points into it,
    /// so it must live as long as `ctx`.
    private let alpnWire: ALPNWire?

    public init(configuration: TLSConfiguration) throws(TLSContextError) {
        self.configuration = configuration
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(TLS_method()) else {
            throw TLSContextError(setting: "SSL_CTX", source: nil, openSSLError: OpenSSLErrorQueue.message())
        }
        self.ctx = ctx
        do {
            self.alpnWire = try Self.encodeALPN(configuration.applicationProtocols)
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
        do {
            try configure()
        } catch {
            // deinit frees ctx and the ALPN buffer.
            throw error
        }
    }

    deinit {
        SSL_CTX_free(ctx)
    }

    /// Makes the per-connection `SSL` object. Owned (and freed) by the handler.
    func makeSSL() -> OpaquePointer? {
        SSL_new(ctx)
    }

    // MARK: - Configuration

    private func configure() throws(TLSContextError) {
        let config = configuration
        func fail(_ setting: String, _ source: String? = nil) -> TLSContextError {
            TLSContextError(setting: setting, source: source, openSSLError: OpenSSLErrorQueue.message())
        }

        guard config.minimumTLSVersion <= config.maximumTLSVersion,
            lr_SSL_CTX_set_min_proto_version(ctx, config.minimumTLSVersion.openSSLValue) == 1,
            lr_SSL_CTX_set_max_proto_version(ctx, config.maximumTLSVersion.openSSLValue) == 1
        else {
            throw fail("protocol versions \(config.minimumTLSVersion)...\(config.maximumTLSVersion)")
        }
        _ = SSL_CTX_set_options(
            ctx, lr_SSL_OP_NO_COMPRESSION | lr_SSL_OP_NO_RENEGOTIATION | lr_SSL_OP_CIPHER_SERVER_PREFERENCE)
        _ = lr_SSL_CTX_set_mode(ctx, lr_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER)
        // An encrypted key must fail to load rather than prompt on the server's terminal.
        SSL_CTX_set_default_passwd_cb(ctx, noPassphraseCallback)

        guard SSL_CTX_set_cipher_list(ctx, config.cipherList) == 1 else { throw fail("cipher list (TLS 1.2)") }
        guard SSL_CTX_set_ciphersuites(ctx, config.cipherSuites) == 1 else { throw fail("cipher suites (TLS 1.3)") }
        guard lr_SSL_CTX_set1_groups_list(ctx, config.groups) == 1 else { throw fail("groups '\(config.groups)'") }

        // Session resumption with client certificates requires a session id context.
        let sessionContext: [UInt8] = Array("liverelay".utf8)
        _ = SSL_CTX_set_session_id_context(ctx, sessionContext, UInt32(sessionContext.count))

        try loadCertificateChain()
        try loadPrivateKey()
        try loadTrustRoots()

        let verifyMode: Int32
        switch config.certificateVerification {
        case .none: verifyMode = SSL_VERIFY_NONE
        case .optional: verifyMode = SSL_VERIFY_PEER
        case .noHostnameVerification, .fullVerification: verifyMode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
        }
        SSL_CTX_set_verify(ctx, verifyMode, nil)

        if let alpnWire {
            // Client side: offer the list. (Returns 0 on success, unlike most of OpenSSL.)
            guard SSL_CTX_set_alpn_protos(ctx, alpnWire.bytes.baseAddress, UInt32(alpnWire.bytes.count)) == 0 else {
                throw fail("application protocols (ALPN)")
            }
            // Server side: pick from the list.
            SSL_CTX_set_alpn_select_cb(ctx, alpnSelectCallback, Unmanaged.passUnretained(alpnWire).toOpaque())
        }
    }

    private func loadCertificateChain() throws(TLSContextError) {
        guard let source = configuration.certificateChain else { return }
        switch source {
        case .file(let path):
            guard SSL_CTX_use_certificate_chain_file(ctx, path) == 1 else {
                throw TLSContextError(
                    setting: "certificate chain", source: source.redactedDescription, openSSLError: OpenSSLErrorQueue.message())
            }
        case .bytes(let bytes):
            let certificates = try Self.readCertificates(bytes, setting: "certificate chain", source: source)
            guard let leaf = certificates.first else {
                throw TLSContextError(
                    setting: "certificate chain", source: source.redactedDescription, openSSLError: "no certificate found")
            }
            defer { certificates.forEach { X509_free($0) } }
            guard SSL_CTX_use_certificate(ctx, leaf) == 1 else {
                throw TLSContextError(
                    setting: "certificate chain", source: source.redactedDescription, openSSLError: OpenSSLErrorQueue.message())
            }
            for intermediate in certificates.dropFirst() {
                // add0 takes ownership on success: add a reference so the deferred free stays balanced.
                X509_up_ref(intermediate)
                guard lr_SSL_CTX_add0_chain_cert(ctx, intermediate) == 1 else {
                    X509_free(intermediate)
                    throw TLSContextError(
                        setting: "certificate chain", source: source.redactedDescription, openSSLError: OpenSSLErrorQueue.message())
                }
            }
        }
    }

    private func loadPrivateKey() throws(TLSContextError) {
        guard let source = configuration.privateKey else {
            if configuration.certificateChain != nil {
                throw TLSContextError(
                    setting: "private key", source: nil, openSSLError: "a certificate chain was given without its private key")
            }
            return
        }
        switch source {
        case .file(let path):
            guard SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM) == 1 else {
                throw TLSContextError(setting: "private key", source: source.redactedDescription, openSSLError: OpenSSLErrorQueue.message())
            }
        case .bytes(let bytes):
            let key: OpaquePointer? = bytes.withUnsafeBytes { raw in
                guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
                defer { BIO_free(bio) }
                return PEM_read_bio_PrivateKey(bio, nil, noPassphraseCallback, nil)
            }
            guard let key else {
                throw TLSContextError(setting: "private key", source: source.redactedDescription, openSSLError: OpenSSLErrorQueue.message())
            }
            defer { EVP_PKEY_free(key) }
            guard SSL_CTX_use_PrivateKey(ctx, key) == 1 else {
                throw TLSContextError(setting: "private key", source: source.redactedDescription, openSSLError: OpenSSLErrorQueue.message())
            }
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw TLSContextError(
                setting: "private key", source: source.redactedDescription,
                openSSLError: "does not match the certificate: " + OpenSSLErrorQueue.message())
        }
    }

    private func loadTrustRoots() throws(TLSContextError) {
        switch configuration.trustRoots {
        case .systemDefault:
            guard configuration.certificateVerification != .none else { return }
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                throw TLSContextError(setting: "trust roots", source: "system default store", openSSLError: OpenSSLErrorQueue.message())
            }
        case .pem(let source):
            // Load the CAs into the verify store, and also advertise them to clients
            // (CertificateRequest), so a client holding several certificates picks the right one.
            let certificates: [OpaquePointer]
            switch source {
            case .file(let path):
                guard SSL_CTX_load_verify_locations(ctx, path, nil) == 1 else {
                    throw TLSContextError(
                        setting: "trust roots (CA file)", source: source.redactedDescription, openSSLError: OpenSSLErrorQueue.message())
                }
                if let names = SSL_load_client_CA_file(path) {
                    SSL_CTX_set_client_CA_list(ctx, names)
                }
                ERR_clear_error()
                return
            case .bytes(let bytes):
                certificates = try Self.readCertificates(bytes, setting: "trust roots (CA)", source: source)
            }
            defer { certificates.forEach { X509_free($0) } }
            guard !certificates.isEmpty else {
                throw TLSContextError(setting: "trust roots (CA)", source: source.redactedDescription, openSSLError: "no certificate found")
            }
            let store = SSL_CTX_get_cert_store(ctx)
            for certificate in certificates {
                guard X509_STORE_add_cert(store, certificate) == 1, SSL_CTX_add_client_CA(ctx, certificate) == 1 else {
                    throw TLSContextError(
                        setting: "trust roots (CA)", source: source.redactedDescription, openSSLError: OpenSSLErrorQueue.message())
                }
            }
        }
    }

    /// How many certificates `pem` holds, read as a context built with
    /// `trustRoots: .pem(.bytes(pem))` reads them; throws, with OpenSSL's reason,
    /// when there is none. For a trust certificate kept to be used later (an
    /// APNs endpoint's, through the admin API): one that holds none is refused
    /// when it is given, rather than failing every connection made with it.
    public static func certificateCount(pem: [UInt8], setting: String) throws(TLSContextError) -> Int {
        ERR_clear_error()
        let certificates = try readCertificates(pem, setting: setting, source: .bytes(pem))
        certificates.forEach { X509_free($0) }
        return certificates.count
    }

    /// Every certificate in a PEM blob, in order; the caller frees them.
    private static func readCertificates(_ bytes: [UInt8], setting: String, source: PEMSource) throws(TLSContextError) -> [OpaquePointer] {
        var result: [OpaquePointer] = []
        bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return }
            defer { BIO_free(bio) }
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                result.append(certificate)
            }
        }
        let error = OpenSSLErrorQueue.drain()
        // Running off the end of the input reports "no start line": that is the normal stop.
        if result.isEmpty {
            result.forEach { X509_free($0) }
            throw TLSContextError(setting: setting, source: source.redactedDescription, openSSLError: error.message)
        }
        return result
    }

    private static func encodeALPN(_ protocols: [String]) throws(TLSContextError) -> ALPNWire? {
        guard !protocols.isEmpty else { return nil }
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw TLSContextError(
                    setting: "application protocols (ALPN)", source: nil, openSSLError: "protocol name '\(name)' must be 1 to 255 bytes")
            }
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        return ALPNWire(wire)
    }
}

/// The ALPN list in wire format at a stable address: OpenSSL keeps pointers into it
/// (the selected protocol), so it lives exactly as long as the context.
final class ALPNWire {
    let bytes: UnsafeMutableBufferPointer<UInt8>

    init(_ wire: [UInt8]) {
        bytes = .allocate(capacity: wire.count)
        _ = bytes.initialize(from: wire)
    }

    deinit { bytes.deallocate() }
}

/// Refuses passphrase prompts: LiveRelay keys are unencrypted files protected by file permissions.
private let noPassphraseCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = {
    _, _, _, _ in
    -1
}

/// Server ALPN selection: the first protocol of our list that the client offered.
/// `arg` is the context's wire-format list, which outlives every connection.
private let alpnSelectCallback:
    @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
        UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
    ) -> Int32 = { _, out, outLength, clientList, clientLength, arg in
        guard let out, let outLength, let clientList, let arg else { return SSL_TLSEXT_ERR_ALERT_FATAL }
        let serverList = Unmanaged<ALPNWire>.fromOpaque(arg).takeUnretainedValue().bytes
        var selected: UnsafeMutablePointer<UInt8>? = nil
        let result = SSL_select_next_proto(
            &selected, outLength, serverList.baseAddress, UInt32(serverList.count), clientList, clientLength)
        guard result == OPENSSL_NPN_NEGOTIATED, let selected else {
            // RFC 7301: no protocol in common is a fatal no_application_protocol alert.
            return SSL_TLSEXT_ERR_ALERT_FATAL
        }
        out.pointee = UnsafePointer(selected)
        return SSL_TLSEXT_ERR_OK
    }
