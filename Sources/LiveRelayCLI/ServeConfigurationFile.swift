import Foundation
import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayBackoff
import LiveRelayComposition
import LiveRelayStore
import LiveRelayTLS
import LiveRelayWebhookDelivery
import LiveRelayWire
import NIOCore

/// The JSON file `liverelay serve --config` reads: a production setup, where
/// certificates and keys are made by the operator, not by LiveRelay.
///
/// ```json
/// {
///   "listen": { "host": "0.0.0.0", "port": 7443 },
///   "ops": { "host": "127.0.0.1", "port": 9090 },
///   "tls": { "certificate": "tls/cert.pem", "private_key": "tls/key.pem",
///            "client_ca": "tls/clients-ca.pem", "client_auth": "require" },
///   "data_dir": "/var/lib/liverelay",
///   "api_key_file": "/etc/liverelay/api-keys.json",
///   "store": { "kind": "postgres", "postgres_url": "postgres://liverelay@db:5432/liverelay?sslmode=require" },
///   "limits": { "max_frame_size": 1048576, "max_requests_in_flight": 100,
///               "idle_timeout_ms": 300000, "hello_timeout_ms": 10000, "drain_time_ms": 30000,
///               "max_unsent_reply_bytes": 1048576, "max_connections": 10000,
///               "max_connections_per_key": 1000, "push_to_start_retention_days": 30 },
///   "admission": { "max_in_flight_per_app": 32, "max_in_flight": 512, "busy_window_ms": 1000,
///                  "retry_after_ms": 50, "refuse_unreachable_deadlines": true },
///   "credential_key_directories": ["/etc/liverelay/apns-keys"],
///   "credential_endpoints": ["apns-relay.internal:8443"]
/// }
/// ```
///
/// Relative paths are relative to the config file, so a config directory can
/// be moved as a whole. Unknown keys are an error: a misspelt limit silently
/// ignored would be worse than a refusal to start.
struct ServeConfigurationFile: Decodable {
    struct Listen: Decodable {
        var host: String?
        var port: Int?
    }

    struct TLS: Decodable {
        var certificate: String
        var privateKey: String
        /// The CA client certificates must chain to; needed when `client_auth` is not "none".
        var clientCA: String?
        /// "none" (default), "optional" (verify if sent) or "require" (mTLS).
        var clientAuth: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case certificate, privateKey = "private_key", clientCA = "client_ca", clientAuth = "client_auth"
        }
    }

    struct Limits: Decodable {
        var maxFrameSize: UInt32?
        var maxRequestsInFlight: UInt32?
        var idleTimeoutMilliseconds: UInt32?
        var helloTimeoutMilliseconds: Int64?
        var drainTimeMilliseconds: Int64?
        var maxUnsentReplyBytes: Int?
        var maxConnections: Int?
        var maxConnectionsPerKey: Int?
        var maxBufferedRequestBytes: Int?
        var maxBufferedRequestBytesPerKey: Int?
        var pushToStartRetentionDays: Int?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case maxFrameSize = "max_frame_size", maxRequestsInFlight = "max_requests_in_flight"
            case idleTimeoutMilliseconds = "idle_timeout_ms", helloTimeoutMilliseconds = "hello_timeout_ms"
            case drainTimeMilliseconds = "drain_time_ms", maxUnsentReplyBytes = "max_unsent_reply_bytes"
            case maxConnections = "max_connections", maxConnectionsPerKey = "max_connections_per_key"
            case maxBufferedRequestBytes = "max_buffered_request_bytes"
            case maxBufferedRequestBytesPerKey = "max_buffered_request_bytes_per_key"
            case pushToStartRetentionDays = "push_to_start_retention_days"
        }
    }

    var listen: Listen?
    /// The operations port (/metrics, /healthz, /readyz): "host" (default 127.0.0.1),
    /// "port" (default 9090; 0 any free port; -1 no operations port).
    var ops: Listen?
    var tls: TLS?
    /// Serving without TLS must be asked for by name: API keys would cross the network in the clear.
    var insecurePlaintext: Bool?
    var dataDir: String?
    var apiKeyFile: String?
    var limits: Limits?
    var nullService: Bool?
    /// The apps LiveRelay pushes for, with their APNs keys and endpoints (``AppConfiguration``).
    var apps: [AppConfiguration]?
    var store: Store?
    var dispatch: Dispatch?
    var events: Events?
    var webhooks: Webhooks?
    var admission: Admission?
    /// Every app's quotas (``QuotaConfiguration``); an app's own "quotas" override them.
    var quotas: QuotaConfiguration?
    /// Directories an app's `private_key_file` (admin API, registry) may be in; none by default.
    var credentialKeyDirectories: [String]?
    /// `host:port` APNs endpoints an app's credentials may name besides Apple's; none by default.
    var credentialEndpoints: [String]?
    /// Any endpoint at all, asked for by name (test and development setups).
    var allowAnyCredentialEndpoint: Bool?

    /// How much work the service accepts before refusing calls (``AdmissionLimits``):
    /// "enabled" (default true), "max_in_flight_per_app" (32, while other apps are busy too),
    /// "max_in_flight" (512; an app alone may use half), "busy_window_ms" (1000),
    /// "retry_after_ms" (50, the least hint a refusal carries), "refuse_unreachable_deadlines" (true).
    struct Admission: Decodable {
        var enabled: Bool?
        var maxInFlightPerApp: Int?
        var maxInFlight: Int?
        var busyWindowMilliseconds: Int64?
        var retryAfterMilliseconds: Int64?
        var refuseUnreachableDeadlines: Bool?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case enabled, maxInFlightPerApp = "max_in_flight_per_app", maxInFlight = "max_in_flight"
            case busyWindowMilliseconds = "busy_window_ms"
            case retryAfterMilliseconds = "retry_after_ms", refuseUnreachableDeadlines = "refuse_unreachable_deadlines"
        }
    }

    /// Durable dispatch intents (docs/PROTOCOL.md, "Delivery guarantees"):
    /// "durable_intents" (default true; false loses accepted pushes on a crash),
    /// "intent_lease_ms" (default 30000: how long a dead node's work waits before another node takes it).
    struct Dispatch: Decodable {
        var durableIntents: Bool?
        var intentLeaseMilliseconds: Int64?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case durableIntents = "durable_intents", intentLeaseMilliseconds = "intent_lease_ms"
        }
    }

    /// Each app's event feed (docs/PROTOCOL.md, "Event feed"): "retention_hours" (default 72) and
    /// "max_per_app" (default 100000); the older bound wins.
    struct Events: Decodable {
        var retentionHours: Int64?
        var maxPerApp: Int?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case retentionHours = "retention_hours", maxPerApp = "max_per_app"
        }
    }

    /// How the apps' webhooks are delivered (docs/PROTOCOL.md, "Webhooks"): "retry_s" (how long
    /// failed deliveries are retried before the webhook is marked failing, default 3600),
    /// "probe_s" (the wait between a failing webhook's probes, default 300), "backoff_max_s"
    /// (the longest wait between retries, default 300), "timeout_s" (one delivery, default 10),
    /// "batch_size" (events per delivery, 1 to 1000, default 100), "ca_file" (PEM roots an
    /// endpoint's certificate must chain to instead of the system's), "allow_private_addresses"
    /// (let endpoints resolve to loopback, link-local and private addresses; default false).
    struct Webhooks: Decodable {
        var retrySeconds: Int64?
        var probeSeconds: Int64?
        var backoffMaxSeconds: Int64?
        var timeoutSeconds: Int64?
        var batchSize: Int?
        var caFile: String?
        var allowPrivateAddresses: Bool?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case retrySeconds = "retry_s", probeSeconds = "probe_s", backoffMaxSeconds = "backoff_max_s"
            case timeoutSeconds = "timeout_s", batchSize = "batch_size", caFile = "ca_file"
            case allowPrivateAddresses = "allow_private_addresses"
        }
    }

    /// "kind": "sqlite" (default), "memory" or "postgres"; "postgres_url" for postgres
    /// (or `LIVERELAY_POSTGRES_URL`, to keep the password out of the file).
    struct Store: Decodable {
        var kind: String?
        var postgresURL: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case kind, postgresURL = "postgres_url"
        }
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case listen, ops, tls, insecurePlaintext = "insecure_plaintext", dataDir = "data_dir", apiKeyFile = "api_key_file"
        case limits, nullService = "null_service", store, apps, dispatch, admission, quotas, events, webhooks
        case credentialKeyDirectories = "credential_key_directories", credentialEndpoints = "credential_endpoints"
        case allowAnyCredentialEndpoint = "allow_any_credential_endpoint"
    }

    var storeKind: StoreKind? {
        get throws {
            guard let kind = store?.kind else { return nil }
            guard let value = StoreKind(rawValue: kind) else {
                throw CLIError(
                    "store.kind must be \(StoreKind.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")), not \"\(kind)\"")
            }
            return value
        }
    }

    static func load(path: String) throws -> ServeConfigurationFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read the config file \(path)")
        }
        try rejectUnknownKeys(data, path: path)
        do {
            return try JSONDecoder().decode(ServeConfigurationFile.self, from: data)
        } catch let error as DecodingError {
            throw CLIError("\(path): \(describe(error))")
        }
    }

    /// The TLS settings, with paths made absolute against `base`.
    func tlsConfiguration(base: String) throws -> TLSConfiguration? {
        guard let tls else {
            guard self.insecurePlaintext == true else {
                throw CLIError("the config file needs a \"tls\" section (or \"insecure_plaintext\": true, for tests only)")
            }
            return nil
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: .file(DevSetup.absolute(tls.certificate, relativeTo: base)),
            privateKey: .file(DevSetup.absolute(tls.privateKey, relativeTo: base))
        )
        switch tls.clientAuth ?? "none" {
        case "none":
            return configuration
        case "optional":
            configuration.certificateVerification = .optional
        case "require":
            configuration.certificateVerification = .fullVerification
        case let other:
            throw CLIError("tls.client_auth must be \"none\", \"optional\" or \"require\", not \"\(other)\"")
        }
        guard let clientCA = tls.clientCA else {
            throw CLIError("tls.client_auth \"\(tls.clientAuth ?? "")\" needs tls.client_ca, the CA client certificates chain to")
        }
        configuration.trustRoots = .pem(.file(DevSetup.absolute(clientCA, relativeTo: base)))
        return configuration
    }

    /// The key files and endpoints an app's credentials may name (``CredentialAllowance``):
    /// the directories made absolute against `base`, the endpoints checked. The file's own
    /// `apps` are allowed besides (the server adds its seed).
    func credentialAllowance(base: String) throws -> CredentialAllowance {
        do {
            return try CredentialAllowance(
                keyDirectories: (credentialKeyDirectories ?? []).map { DevSetup.absolute($0, relativeTo: base) },
                endpoints: credentialEndpoints ?? [], anyEndpoint: allowAnyCredentialEndpoint ?? false)
        } catch {
            throw CLIError("\(error)")
        }
    }

    /// The protocol settings and timeouts, checked against the protocol's valid ranges.
    func connectionConfiguration() throws -> ServerConnectionStateMachine.Configuration {
        var configuration = ServerConnectionStateMachine.Configuration()
        guard let limits else { return configuration }
        if let value = limits.maxFrameSize { configuration.settings.maxFrameSize = value }
        if let value = limits.maxRequestsInFlight { configuration.settings.maxRequestsInFlight = value }
        if let value = limits.idleTimeoutMilliseconds { configuration.settings.idleTimeoutMilliseconds = value }
        if let value = limits.helloTimeoutMilliseconds {
            guard value > 0 else { throw CLIError("limits.hello_timeout_ms must be above 0") }
            configuration.helloTimeout = .milliseconds(value)
        }
        for setting in configuration.settings.settings {
            if let reason = setting.invalidReason { throw CLIError("limits: \(reason)") }
        }
        return configuration
    }

    var drainTime: TimeAmount {
        get throws {
            guard let milliseconds = self.limits?.drainTimeMilliseconds else { return .seconds(30) }
            guard milliseconds >= 0 else { throw CLIError("limits.drain_time_ms must not be negative") }
            return .milliseconds(milliseconds)
        }
    }

    /// The write-side backpressure bound (`RPCServer.Configuration.maxUnsentReplyBytes`).
    var maxUnsentReplyBytes: Int {
        get throws {
            guard let bytes = self.limits?.maxUnsentReplyBytes else { return 1 << 20 }
            guard bytes >= 16_384 else { throw CLIError("limits.max_unsent_reply_bytes must be at least 16384") }
            return bytes
        }
    }

    /// Open connections over all keys (`RPCServer.Configuration.maxConnections`).
    var maxConnections: Int {
        get throws {
            guard let count = self.limits?.maxConnections else { return 10_000 }
            guard count >= 1 else { throw CLIError("limits.max_connections must be at least 1") }
            return count
        }
    }

    /// Authenticated connections of one API key (`RPCServer.Configuration.maxConnectionsPerKey`).
    var maxConnectionsPerKey: Int {
        get throws {
            guard let count = self.limits?.maxConnectionsPerKey else { return 1_000 }
            guard count >= 1 else { throw CLIError("limits.max_connections_per_key must be at least 1") }
            return count
        }
    }

    /// Bytes of partial request frames buffered across all connections and
    /// across one API key's (`RPCServer.Configuration.maxBufferedRequestBytes`,
    /// `maxBufferedRequestBytesPerKey`): 64 MiB and 16 MiB by default.
    var bufferedRequestBytes: (all: Int, perKey: Int) {
        get throws {
            let all = self.limits?.maxBufferedRequestBytes ?? 64 << 20
            let perKey = self.limits?.maxBufferedRequestBytesPerKey ?? min(16 << 20, all)
            guard all >= 65_536 else { throw CLIError("limits.max_buffered_request_bytes must be at least 65536") }
            guard perKey >= 65_536, perKey <= all else {
                throw CLIError("limits.max_buffered_request_bytes_per_key must be at least 65536 and at most max_buffered_request_bytes")
            }
            return (all, perKey)
        }
    }

    /// What each app's event feed keeps: 72 hours and 100,000 events by default.
    var eventRetention: EventRetention {
        get throws {
            let hours = events?.retentionHours ?? 72
            let count = events?.maxPerApp ?? 100_000
            guard hours >= 1 else { throw CLIError("events.retention_hours must be at least 1") }
            guard count >= 1 else { throw CLIError("events.max_per_app must be at least 1") }
            return EventRetention(maxAge: .hours(hours), maxPerApp: count)
        }
    }

    /// How the apps' webhooks are delivered (``Webhooks``).
    func webhookSettings(base: String) throws -> WebhookSettings {
        let section = webhooks
        var settings = WebhookSettings()
        for (name, value) in [
            ("retry_s", section?.retrySeconds), ("probe_s", section?.probeSeconds), ("backoff_max_s", section?.backoffMaxSeconds),
            ("timeout_s", section?.timeoutSeconds),
        ] {
            if let value, !(1...604_800).contains(value) { throw CLIError("webhooks.\(name) must be 1 to 604800 seconds") }
        }
        if let batch = section?.batchSize, !(1...1_000).contains(batch) { throw CLIError("webhooks.batch_size must be 1 to 1000") }
        settings.schedule = WebhookSchedule(
            batchSize: section?.batchSize ?? 100,
            backoff: Backoff(initial: .seconds(1), maximum: .seconds(section?.backoffMaxSeconds ?? 300)),
            retryFor: .seconds(section?.retrySeconds ?? 3_600), probeEvery: .seconds(section?.probeSeconds ?? 300))
        settings.requestTimeout = .seconds(section?.timeoutSeconds ?? 10)
        settings.allowPrivateAddresses = section?.allowPrivateAddresses ?? false
        if let caFile = section?.caFile { settings.trustRoots = .pem(.file(DevSetup.absolute(caFile, relativeTo: base))) }
        return settings
    }

    /// How long a push-to-start token registered without `expires_at` lives
    /// after its last registration: 30 days by default, 0 for no limit.
    var pushToStartRetention: UnixTime.Duration? {
        get throws {
            guard let days = self.limits?.pushToStartRetentionDays else { return .hours(30 * 24) }
            guard days >= 0 else { throw CLIError("limits.push_to_start_retention_days must be 0 (no limit) or more") }
            return days == 0 ? nil : .hours(Int64(days) * 24)
        }
    }

    /// The admission limits, defaults for what the file leaves out, checked.
    var admissionLimits: AdmissionLimits {
        get throws {
            let defaults = AdmissionLimits()
            guard let admission else { return defaults }
            let perApp = admission.maxInFlightPerApp ?? defaults.maxInFlightPerApp
            let total = admission.maxInFlight ?? defaults.maxInFlight
            guard perApp >= 1 else { throw CLIError("admission.max_in_flight_per_app must be at least 1") }
            guard total >= 1 else { throw CLIError("admission.max_in_flight must be at least 1") }
            let retryAfter = admission.retryAfterMilliseconds ?? defaults.retryAfter.nanoseconds / 1_000_000
            guard (0...60_000).contains(retryAfter) else { throw CLIError("admission.retry_after_ms must be 0...60000") }
            let window = admission.busyWindowMilliseconds ?? defaults.busyWindow.nanoseconds / 1_000_000
            guard (1...3_600_000).contains(window) else { throw CLIError("admission.busy_window_ms must be 1...3600000") }
            return AdmissionLimits(
                enabled: admission.enabled ?? defaults.enabled, maxInFlightPerApp: perApp, maxInFlight: total,
                busyWindow: .milliseconds(window), retryAfter: .milliseconds(retryAfter),
                refuseUnreachableDeadlines: admission.refuseUnreachableDeadlines ?? defaults.refuseUnreachableDeadlines)
        }
    }

    private static func rejectUnknownKeys(_ data: Data, path: String) throws {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw CLIError("\(path): not a JSON object")
        }
        func check(_ object: [String: Any], _ known: [String], _ prefix: String) throws {
            for key in object.keys where !known.contains(key) {
                throw CLIError("\(path): unknown key \"\(prefix)\(key)\" (known: \(known.joined(separator: ", ")))")
            }
        }
        try check(object, CodingKeys.allCases.map(\.rawValue), "")
        if let listen = object["listen"] as? [String: Any] { try check(listen, ["host", "port"], "listen.") }
        if let ops = object["ops"] as? [String: Any] { try check(ops, ["host", "port"], "ops.") }
        if let tls = object["tls"] as? [String: Any] { try check(tls, TLS.CodingKeys.allCases.map(\.rawValue), "tls.") }
        if let limits = object["limits"] as? [String: Any] { try check(limits, Limits.CodingKeys.allCases.map(\.rawValue), "limits.") }
        if let store = object["store"] as? [String: Any] { try check(store, Store.CodingKeys.allCases.map(\.rawValue), "store.") }
        if let events = object["events"] as? [String: Any] { try check(events, Events.CodingKeys.allCases.map(\.rawValue), "events.") }
        if let webhooks = object["webhooks"] as? [String: Any] {
            try check(webhooks, Webhooks.CodingKeys.allCases.map(\.rawValue), "webhooks.")
        }
        if let admission = object["admission"] as? [String: Any] {
            try check(admission, Admission.CodingKeys.allCases.map(\.rawValue), "admission.")
        }
        if let dispatch = object["dispatch"] as? [String: Any] {
            try check(dispatch, Dispatch.CodingKeys.allCases.map(\.rawValue), "dispatch.")
        }
        if let quotas = object["quotas"] as? [String: Any] {
            try check(quotas, QuotaConfiguration.CodingKeys.allCases.map(\.rawValue), "quotas.")
        }
        for (i, app) in (object["apps"] as? [[String: Any]] ?? []).enumerated() {
            try check(app, AppConfiguration.CodingKeys.allCases.map(\.rawValue), "apps[\(i)].")
            if let quotas = app["quotas"] as? [String: Any] {
                try check(quotas, QuotaConfiguration.CodingKeys.allCases.map(\.rawValue), "apps[\(i)].quotas.")
            }
            if let apns = app["apns"] as? [String: Any] {
                try check(apns, AppConfiguration.Credentials.CodingKeys.allCases.map(\.rawValue), "apps[\(i)].apns.")
            }
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func at(_ path: [any CodingKey]) -> String {
            path.isEmpty ? "the top level" : path.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .typeMismatch(let type, let context): return "\(at(context.codingPath)): expected \(type)"
        case .valueNotFound(_, let context): return "\(at(context.codingPath)): missing value"
        case .keyNotFound(let key, let context): return "\(at(context.codingPath + [key])): required"
        case .dataCorrupted(let context): return "\(at(context.codingPath)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
