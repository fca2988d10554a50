import NIOCore

/// Where PEM material comes from.
///
/// Files are the production path (a config file names them, and the key never
/// passes through Swift memory); bytes serve the development setup, whose
/// self-signed certificate is generated in process.
public enum PEMSource: Sendable, Hashable {
    case file(String)
    case bytes([UInt8])

    /// Convenience for PEM text held in a `String`.
    public static func string(_ pem: String) -> PEMSource { .bytes(Array(pem.utf8)) }

    /// Names the source in errors without ever printing key or certificate bytes.
    var redactedDescription: String {
        switch self {
        case .file(let path): return "file '\(path)'"
        case .bytes(let bytes): return "PEM bytes (\(bytes.count) bytes)"
        }
    }
}

/// The roots a peer's certificate chain is checked against.
public enum TrustRoots: Sendable, Hashable {
    /// The operating system's store (Debian: /etc/ssl/certs), as APNs needs.
    case systemDefault
    /// A private CA, as mTLS between LiveRelay's own services needs.
    case pem(PEMSource)
}

/// How much of the peer's identity is checked.
public enum CertificateVerification: Sendable, Hashable {
    /// No check. Servers without mTLS use this; a client using it is only safe in tests.
    case none
    /// Server only: ask for a client certificate and verify it if one is sent,
    /// so a deployment can roll mTLS out before it enforces it. A client treats
    /// it as `.fullVerification`.
    case optional
    /// Verify the chain against the trust roots, but not the host name
    /// (for peers addressed by something other than their certificate's name).
    case noHostnameVerification
    /// Verify the chain and, on a client, the host name or IP address dialled.
    /// A server requires a client certificate (mTLS).
    case fullVerification
}

/// TLS protocol versions LiveRelay accepts; older ones are not expressible on purpose.
public enum TLSVersion: Sendable, Hashable, Comparable {
    case tlsv12
    case tlsv13

    var openSSLValue: Int32 {
        switch self {
        case .tlsv12: return 0x0303  // TLS1_2_VERSION
        case .tlsv13: return 0x0304  // TLS1_3_VERSION
        }
    }
}

/// Settings shared by every connection made from one `TLSContext`.
///
/// One value serves both roles, because OpenSSL's `SSL_CTX` does: the role is
/// chosen per connection by `OpenSSLHandler`. Start from
/// `makeServerConfiguration` or `makeClientConfiguration`, which pick the safe
/// verification default for the role.
public struct TLSConfiguration: Sendable, Hashable {
    /// Our certificate followed by its intermediates. Required on a server; on a client only for mTLS.
    public var certificateChain: PEMSource?
    /// The private key for the first certificate of the chain.
    public var privateKey: PEMSource?
    /// What the peer's chain is checked against when verification is on.
    public var trustRoots: TrustRoots
    public var certificateVerification: CertificateVerification
    /// ALPN: a client offers these in order; a server picks the first of its own list the client offered,
    /// and fails the handshake with `no_application_protocol` if there is none in common.
    public var applicationProtocols: [String]
    /// Client only: the name sent as SNI and, under `.fullVerification`, checked against the certificate.
    /// An IP literal is verified as an IP address and is not sent as SNI (RFC 6066 forbids it).
    public var serverHostname: String?
    public var minimumTLSVersion: TLSVersion
    public var maximumTLSVersion: TLSVersion
    /// TLS 1.2 suites: ECDHE key exchange with AEAD only, so every 1.2 session has forward secrecy.
    public var cipherList: String
    /// TLS 1.3 suites (all are AEAD with ephemeral key exchange).
    public var cipherSuites: String
    /// Key-exchange groups, in preference order.
    public var groups: String
    /// A peer that stalls mid-handshake holds a socket and an SSL object; this bounds how long.
    public var handshakeTimeout: TimeAmount
    /// How long a close waits for the peer's close_notify before closing the socket anyway.
    public var shutdownTimeout: TimeAmount

    public static let defaultCipherList = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")

    public static let defaultCipherSuites =
        "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

    public init(
        certificateChain: PEMSource? = nil,
        privateKey: PEMSource? = nil,
        trustRoots: TrustRoots = .systemDefault,
        certificateVerification: CertificateVerification,
        applicationProtocols: [String] = [],
        serverHostname: String? = nil,
        minimumTLSVersion: TLSVersion = .tlsv12,
        maximumTLSVersion: TLSVersion = .tlsv13,
        cipherList: String = TLSConfiguration.defaultCipherList,
        cipherSuites: String = TLSConfiguration.defaultCipherSuites,
        groups: String = "X25519:P-256:P-384",
        handshakeTimeout: TimeAmount = .seconds(10),
        shutdownTimeout: TimeAmount = .seconds(5)
    ) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.trustRoots = trustRoots
        self.certificateVerification = certificateVerification
        self.applicationProtocols = applicationProtocols
        self.serverHostname = serverHostname
        self.minimumTLSVersion = minimumTLSVersion
        self.maximumTLSVersion = maximumTLSVersion
        self.cipherList = cipherList
        self.cipherSuites = cipherSuites
        self.groups = groups
        self.handshakeTimeout = handshakeTimeout
        self.shutdownTimeout = shutdownTimeout
    }

    /// A server presents a certificate and, by default, does not ask for one (mTLS is opt-in).
    public static func makeServerConfiguration(
        certificateChain: PEMSource,
        privateKey: PEMSource
    ) -> TLSConfiguration {
        TLSConfiguration(certificateChain: certificateChain, privateKey: privateKey, certificateVerification: .none)
    }

    /// A client verifies the server fully against the system store by default (what APNs needs).
    public static func makeClientConfiguration() -> TLSConfiguration {
        TLSConfiguration(certificateVerification: .fullVerification)
    }
}
