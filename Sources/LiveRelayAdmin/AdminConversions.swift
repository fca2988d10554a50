import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayService
import LiveRelayTLS

// The registry's values as admin.proto's messages and back. Secrets never
// cross: a key's hash and a stored PEM have no field in any reply.

extension RegisteredQuotas {
    /// admin.proto's Quotas: absent is the server's default, 0 no limit (the registry's own convention).
    init(_ quotas: Admin.Quotas?) {
        self.init(
            callsPerSecond: quotas?.callsPerSecond, burst: quotas?.burst.map(Int.init),
            pushesPerHour: quotas?.pushesPerHour.map { Int(clamping: $0) }, maxTokens: quotas?.maxTokens.map { Int(clamping: $0) },
            maxLiveActivities: quotas?.maxLiveActivities.map { Int(clamping: $0) },
            priorityBudgetPerHour: quotas?.priorityBudgetPerHour.map(Int.init))
    }
}

extension Admin.Quotas {
    init(_ quotas: RegisteredQuotas) {
        self.init(
            callsPerSecond: quotas.callsPerSecond, burst: quotas.burst.map { UInt32(clamping: $0) },
            pushesPerHour: quotas.pushesPerHour.map { UInt64($0) }, maxTokens: quotas.maxTokens.map { UInt64($0) },
            maxLiveActivities: quotas.maxLiveActivities.map { UInt64($0) },
            priorityBudgetPerHour: quotas.priorityBudgetPerHour.map { UInt32(clamping: $0) })
    }
}

extension Admin.App {
    init(_ app: RegisteredApp) {
        self.init(
            appID: app.id, bundleID: app.bundleID, enabled: app.enabled, queueCapacity: app.queueCapacity.map { UInt32(clamping: $0) },
            weight: app.weight.map { UInt32(clamping: $0) },
            maxPushLifetimeSeconds: app.maxPushLifetimeSeconds.map { UInt32(clamping: $0) },
            quotas: Admin.Quotas(app.quotas),
            credentials: app.credentials.map {
                Admin.APNsCredentialsInfo(
                    teamID: $0.teamID, keyID: $0.keyID, endpoint: $0.endpoint, keySource: $0.keySource.description,
                    publicKeySHA256: Self.publicKeySHA256(of: $0), updatedAtMS: $0.updatedAt.milliseconds)
            },
            createdAtMS: app.createdAt.milliseconds, updatedAtMS: app.updatedAt.milliseconds, owner: app.source.rawValue)
    }

    /// The fingerprint of a key the registry holds. File and environment keys have none here: only
    /// the nodes configured for them may read them, and the admin call may land on any node.
    static func publicKeySHA256(of credentials: RegisteredCredentials) -> String? {
        guard case let .stored(pem) = credentials.keySource else { return nil }
        return try? APNsSigningKey(pkcs8PEM: pem, keyID: credentials.keyID, teamID: credentials.teamID).publicKeySHA256
    }
}

extension Admin.APIKey {
    init(_ key: RegisteredAPIKey) {
        switch key.role {
        case .admin:
            self.init(keyID: key.keyID, admin: true)
        case let .tenant(apps, methods):
            switch apps {
            case .all: self.init(keyID: key.keyID, allApps: true, allowedMethods: methods)
            case let .only(ids): self.init(keyID: key.keyID, appIDs: ids.sorted(), allowedMethods: methods)
            }
        }
        label = key.label
        createdAtMS = key.createdAt.milliseconds
        lastUsedAtMS = key.lastUsedAt?.milliseconds
        revokedAtMS = key.revokedAt?.milliseconds
        owner = key.source.rawValue
    }
}

extension Admin.AppStats {
    init(_ appID: String, _ figures: AppUsageFigures) {
        self.init(
            appID: appID, queueDepth: UInt64(max(0, figures.queueDepth)), queueCapacity: UInt64(max(0, figures.queueCapacity)),
            pushes: figures.pushes.map { Admin.OutcomeCount(outcome: $0.outcome, reason: $0.reason, count: UInt64(max(0, $0.count))) },
            pushesLastHour: UInt64(max(0, figures.pushesLastHour)), tokens: UInt64(max(0, figures.tokens)),
            liveActivities: UInt64(max(0, figures.liveActivities)),
            quotas: Admin.Quotas(
                callsPerSecond: figures.callsPerSecond, burst: figures.burst.map { UInt32(clamping: $0) },
                pushesPerHour: figures.pushesPerHour.map { UInt64($0) }, maxTokens: figures.maxTokens.map { UInt64($0) },
                maxLiveActivities: figures.maxLiveActivities.map { UInt64($0) },
                priorityBudgetPerHour: figures.priorityBudgetPerHour.map { UInt32(clamping: $0) }),
            nodes: UInt32(clamping: figures.nodes), heldReason: figures.held?.reason,
            heldForMS: figures.held.map { UInt64(max(0, $0.forMS)) })
    }
}

extension RegisteredAPIKey {
    /// Whether the key may act for `appID` (ListAPIKeys' filter): admin keys act for no app.
    func mayActFor(appID: String) -> Bool {
        switch role {
        case .admin: false
        case .tenant(.all, _): true
        case let .tenant(.only(ids), _): ids.contains(appID)
        }
    }
}

extension RegistryError {
    /// The status the admin API answers with: ALREADY_EXISTS, NOT_FOUND, INVALID_ARGUMENT naming the field.
    var rpcError: RPCError {
        switch code {
        case .alreadyExists: return RPCError(.alreadyExists, description)
        case .notFound: return RPCError(.notFound, description)
        case .invalidArgument:
            guard case let .invalid(field, detail) = self else { return RPCError(.invalidArgument, description) }
            return RPCError(
                .invalidArgument, description, details: ErrorDetails(fieldViolations: [FieldViolation(field: field, description: detail)]))
        default: return RPCError(.failedPrecondition, description)
        }
    }
}

/// PutAPNsCredentials' key checked before anything is stored: it must parse
/// as a P-256 private key here and now, wherever it is read from, so that a
/// bad key is refused with a clear message and never fails the first push.
/// The trust certificate likewise: it must hold at least one X.509
/// certificate, read as the APNs client's TLS context will read it, or every
/// connection to the endpoint would fail. A key file outside the directories
/// the operator allows, or an endpoint the operator does not allow
/// (``CredentialAllowance``), is refused before anything is read.
enum CredentialsCheck {
    static func registered(
        _ request: Admin.PutAPNsCredentialsRequest, allowance: CredentialAllowance
    ) throws(RPCError) -> RegisteredCredentials {
        let teamID = request.teamID ?? "", keyID = request.keyID ?? ""
        let endpoint = request.endpoint ?? "apple"
        var keyFile: String?
        do {
            try allowance.endpoint(endpoint)
            keyFile = try request.privateKeyFile.map { path throws(CredentialRefusal) in try allowance.keyFile(path) }
        } catch {
            throw RPCError(
                .invalidArgument, error.description,
                details: ErrorDetails(fieldViolations: [FieldViolation(field: error.field, description: error.detail)]))
        }
        let source: RegisteredCredentials.KeySource
        do {
            if let pem = request.privateKeyPEM {
                let text = String(decoding: pem, as: UTF8.self)
                _ = try APNsSigningKey(pkcs8PEM: text, keyID: keyID, teamID: teamID)
                source = .stored(pem: text)
            } else if let path = request.privateKeyFile, let keyFile {
                _ = try APNsSigningKey(contentsOfFile: keyFile, keyID: keyID, teamID: teamID)
                source = .file(path: path)
            } else if let name = request.privateKeyEnv {
                guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
                    throw RPCError(
                        .invalidArgument, "private_key_env: \(name) is not set on this node",
                        details: ErrorDetails(fieldViolations: [FieldViolation(field: "private_key_env", description: "\(name) is not set")]
                        ))
                }
                _ = try APNsSigningKey(pkcs8PEM: value, keyID: keyID, teamID: teamID)
                source = .environment(name: name)
            } else {
                throw RPCError(.invalidArgument, "one of private_key_pem, private_key_file, private_key_env is required")
            }
        } catch let error as RPCError {
            throw error
        } catch {
            // The key's own error names what failed (never the key); the PEM is not echoed.
            let which =
                request.privateKeyPEM != nil ? "private_key_pem" : request.privateKeyFile != nil ? "private_key_file" : "private_key_env"
            throw RPCError(
                .invalidArgument, "\(which): not a usable APNs signing key (a P-256 private key in PKCS#8 PEM, as Apple's .p8): \(error)",
                details: ErrorDetails(fieldViolations: [FieldViolation(field: which, description: "not a P-256 PKCS#8 private key")]))
        }
        do {
            _ = try APNsDestination(parsing: endpoint)
        } catch {
            throw RPCError(
                .invalidArgument, "endpoint: \(error)",
                details: ErrorDetails(fieldViolations: [FieldViolation(field: "endpoint", description: "\(error)")]))
        }
        if let trust = request.trustCertificatePEM {
            do {
                _ = try TLSContext.certificateCount(pem: trust, setting: "trust certificate")
            } catch {
                // OpenSSL's reason says what failed; the PEM is not echoed.
                throw RPCError(
                    .invalidArgument, "trust_certificate_pem: no PEM X.509 certificate could be read: \(error.openSSLError)",
                    details: ErrorDetails(fieldViolations: [
                        FieldViolation(field: "trust_certificate_pem", description: "not a PEM X.509 certificate")
                    ]))
            }
        }
        return RegisteredCredentials(
            teamID: teamID, keyID: keyID, endpoint: endpoint, keySource: source,
            trustPEM: request.trustCertificatePEM.map { String(decoding: $0, as: UTF8.self) })
    }
}
