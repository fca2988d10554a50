import CLiveRelayProto
import NIOCore

// admin.proto: PutAPNsCredentials, an app's APNs signing key and endpoint.

extension Admin {
    /// Sets an app's APNs signing key and endpoint. The key comes from exactly one
    /// of three sources: the PEM itself (kept in the registry), a file or an
    /// environment variable every node has. Whether the PEM parses as a P-256 key,
    /// and the trust certificate as X.509, is the server's check; the shape of
    /// every field is checked here.
    public struct PutAPNsCredentialsRequest: LiveRelayMessage {
        public static let protoName = "liverelay.admin.v1.PutAPNsCredentialsRequest"

        public var appID: String?
        /// Apple's 10-character team id.
        public var teamID: String?
        /// The 10-character id of the signing key.
        public var keyID: String?
        /// The .p8 file's contents (PEM, PKCS#8). `bytes` on the wire.
        public var privateKeyPEM: [UInt8]?
        /// A path every node can read.
        public var privateKeyFile: String?
        /// An environment variable every node has.
        public var privateKeyEnv: String?
        /// "apple" (the default when absent) or "host:port": a DNS name, an IPv4
        /// address or an IPv6 address in brackets, and a port of 1-65535.
        public var endpoint: String?
        /// PEM certificates a "host:port" endpoint's certificate chains to. `bytes` on the wire.
        public var trustCertificatePEM: [UInt8]?

        /// The parameters without a default are the fields the server requires of every such request; one of
        /// `privateKeyPEM`, `privateKeyFile` and `privateKeyEnv` is needed too.
        public init(
            appID: String, teamID: String, keyID: String, privateKeyPEM: [UInt8]? = nil,
            privateKeyFile: String? = nil, privateKeyEnv: String? = nil, endpoint: String? = nil,
            trustCertificatePEM: [UInt8]? = nil
        ) {
            self.init(
                appID: .some(appID), teamID: .some(teamID), keyID: .some(keyID), privateKeyPEM: privateKeyPEM,
                privateKeyFile: privateKeyFile, privateKeyEnv: privateKeyEnv, endpoint: endpoint, trustCertificatePEM: trustCertificatePEM)
        }

        /// Any subset of the fields, for tests and tools in this package that build malformed requests on purpose.
        @_disfavoredOverload
        package init(
            appID: String? = nil, teamID: String? = nil, keyID: String? = nil, privateKeyPEM: [UInt8]? = nil,
            privateKeyFile: String? = nil, privateKeyEnv: String? = nil, endpoint: String? = nil,
            trustCertificatePEM: [UInt8]? = nil
        ) {
            self.appID = appID
            self.teamID = teamID
            self.keyID = keyID
            self.privateKeyPEM = privateKeyPEM
            self.privateKeyFile = privateKeyFile
            self.privateKeyEnv = privateKeyEnv
            self.endpoint = endpoint
            self.trustCertificatePEM = trustCertificatePEM
        }

        public init(serializedBytes bytes: UnsafeRawBufferPointer, limit: Int) throws(MessageError) {
            try self.init(unpacking: bytes, limit: limit)
            try validate()
        }

        public func serializedBytes() -> [UInt8] { Codec.encode(self) }
        public func serialize(into buffer: inout ByteBuffer) { Codec.encode(self, into: &buffer) }

        public func validate() throws(MessageError) {
            try Rules.appID(appID)
            try Rules.appleID(teamID, "team_id")
            try Rules.appleID(keyID, "key_id")
            try validateKeySource()
            let kind = try Rules.endpoint(endpoint)
            if let trustCertificatePEM {
                let n = trustCertificatePEM.count
                if n > Rules.maxTrustCertificatePEM {
                    throw MessageError(.tooLong(length: n, max: Rules.maxTrustCertificatePEM), field: "trust_certificate_pem")
                }
                if kind != .hostPort {
                    throw MessageError(
                        .invalidValue, field: "trust_certificate_pem",
                        detail: "only with a \"host:port\" endpoint: Apple's servers chain to the system's roots")
                }
            }
        }

        static let keySources = "private_key_pem, private_key_file and private_key_env"

        /// Exactly one of the three sources, and that one well-formed.
        private func validateKeySource() throws(MessageError) {
            var given: [String] = []
            if privateKeyPEM != nil { given.append("private_key_pem") }
            if privateKeyFile != nil { given.append("private_key_file") }
            if privateKeyEnv != nil { given.append("private_key_env") }
            if given.isEmpty {
                throw MessageError(.missing, field: "private_key_pem", detail: "set one of \(Self.keySources)")
            }
            if given.count > 1 {
                throw MessageError(
                    .invalidValue, field: given[1], detail: "set only one of \(Self.keySources) (\(given[0]) is set too)")
            }
            if let privateKeyPEM {
                let n = privateKeyPEM.count
                if n == 0 { throw MessageError(.invalidValue, field: "private_key_pem", detail: "empty") }
                if n > Rules.maxPrivateKeyPEM {
                    throw MessageError(.tooLong(length: n, max: Rules.maxPrivateKeyPEM), field: "private_key_pem")
                }
                if !Rules.containsText(privateKeyPEM, Rules.privateKeyPEMHeader) {
                    throw MessageError(
                        .invalidValue, field: "private_key_pem",
                        detail: "not a PKCS#8 PEM private key (the .p8 file): no \"\(Rules.privateKeyPEMHeader)\" line")
                }
            }
            if let privateKeyFile {
                if privateKeyFile.isEmpty { throw MessageError(.invalidValue, field: "private_key_file", detail: "empty") }
                try Rules.text(privateKeyFile, max: Rules.maxKeyFilePath, "private_key_file")
            }
            if let privateKeyEnv {
                if privateKeyEnv.isEmpty { throw MessageError(.invalidValue, field: "private_key_env", detail: "empty") }
                try Rules.environmentName(privateKeyEnv, "private_key_env")
            }
        }
    }
}

extension Admin.PutAPNsCredentialsRequest: CMessageConvertible {
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { lr_admin_put_apns_credentials_request_descriptor() }

    init(c: UnsafePointer<LrAdminPutAPNsCredentialsRequest>) {
        let m = c.pointee
        appID = cOptionalString(m.app_id)
        teamID = cOptionalString(m.team_id)
        keyID = cOptionalString(m.key_id)
        privateKeyPEM = m.has_private_key_pem != 0 ? cBytes(m.private_key_pem) : nil
        privateKeyFile = cOptionalString(m.private_key_file)
        privateKeyEnv = cOptionalString(m.private_key_env)
        endpoint = cOptionalString(m.endpoint)
        trustCertificatePEM = m.has_trust_certificate_pem != 0 ? cBytes(m.trust_certificate_pem) : nil
    }

    func build(in a: inout Arena) -> UnsafeMutablePointer<LrAdminPutAPNsCredentialsRequest> {
        let c = a.allocate(LrAdminPutAPNsCredentialsRequest.self)
        lr_admin_put_apns_credentials_request_init(c)
        c.pointee.app_id = a.copy(appID)
        c.pointee.team_id = a.copy(teamID)
        c.pointee.key_id = a.copy(keyID)
        if let privateKeyPEM { c.pointee.has_private_key_pem = 1; c.pointee.private_key_pem = a.binary(privateKeyPEM) }
        c.pointee.private_key_file = a.copy(privateKeyFile)
        c.pointee.private_key_env = a.copy(privateKeyEnv)
        c.pointee.endpoint = a.copy(endpoint)
        if let trustCertificatePEM {
            c.pointee.has_trust_certificate_pem = 1
            c.pointee.trust_certificate_pem = a.binary(trustCertificatePEM)
        }
        return c
    }
}
