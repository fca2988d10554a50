import Foundation
import LiveRelayAPNs
import LiveRelayAPNsClient
import LiveRelayActivities
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMockAPNs
import LiveRelayPushOutlet
import LiveRelayStore
import LiveRelayTLS
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// One entry of the config file's `"apps"` list: an app LiveRelay pushes for.
///
/// ```json
/// "apps": [{
///   "id": "orders", "bundle_id": "com.example.orders", "queue_capacity": 200000,
///   "apns": { "team_id": "ABCDE12345", "key_id": "KEY1234567", "key_file": "keys/AuthKey_KEY1234567.p8",
///             "endpoint": "apple" }
/// }]
/// ```
///
/// `endpoint` "apple" (the default) sends each token to the environment it
/// was registered for (production tokens to api.push.apple.com, sandbox
/// tokens to api.sandbox.push.apple.com): a sandbox token sent to production
/// answers BadDeviceToken and would be pruned. "host:port" sends every token
/// there (a mock or a staging relay), trusting `trust_certificate`.
///
/// `max_push_lifetime_s` (optional, seconds) caps how long a push of the app
/// is tried (queued, retried through APNs errors and outages) after its call;
/// without it a push lives until its activity's expiry. Either way a call
/// that does not wait for delivery does not shorten its pushes' life by its
/// own deadline.
struct AppConfiguration: Decodable {
    var id: String
    var bundleID: String
    var queueCapacity: Int?
    /// Share of send slots when apps compete (deficit round robin weight).
    var weight: Int?
    /// Seconds a push is tried at most (``LiveRelayDispatch/DispatchApp/maxPushLifetime``).
    var maxPushLifetimeSeconds: Double?
    /// The app's own quotas over the file's "quotas" section (``QuotaConfiguration``).
    var quotas: QuotaConfiguration?
    var apns: Credentials

    struct Credentials: Decodable {
        var teamID: String
        var keyID: String
        var keyFile: String
        var endpoint: String?
        var trustCertificate: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case teamID = "team_id", keyID = "key_id", keyFile = "key_file", endpoint
            case trustCertificate = "trust_certificate"
        }
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case id, bundleID = "bundle_id", queueCapacity = "queue_capacity", weight
        case maxPushLifetimeSeconds = "max_push_lifetime_s", quotas, apns
    }
}

extension DevSetup {
    static let apnsKeyID = "LRDEVKEY01"
    static let apnsTeamID = "LRDEVTEAM1"

    /// The development setup's APNs side: a signing key for dev.app kept in
    /// the data directory (made once), and a mock APNs in this process that
    /// knows its public half and records every push to `mock-apns.jsonl`.
    static func startMockAPNs(
        dataDirectory: String, port: Int, group: any EventLoopGroup, logger: Logger
    )
        async throws -> (app: RegisteredApp, mock: MockAPNsServer, announcement: String)
    {
        let (key, keyPath) = try devSigningKey(dataDirectory: dataDirectory)
        let recordPath = dataDirectory + "/mock-apns.jsonl"
        let configuration = MockAPNsConfiguration(
            host: "127.0.0.1", port: port,
            apps: [MockAPNsApp(bundleID: appID, teamID: apnsTeamID, keyID: apnsKeyID, publicKeyPEM: try key.publicKeyPEM)],
            recordFile: recordPath)
        let mock = try await MockAPNsServer.start(configuration: configuration, group: group, logger: logger)
        let app = registered(endpoint: "127.0.0.1:\(mock.port)", trustPEM: mock.certificatePEM, dataDirectory: dataDirectory)
        let announcement =
            "  mock APNs on 127.0.0.1:\(mock.port) (key \(apnsKeyID) in \(keyPath)); every push it receives is appended to \(recordPath)"
        return (app, mock, announcement)
    }

    /// The development setup pushing to an APNs endpoint of the caller's instead
    /// (a `liverelay mock-apns` of its own process, so that a benchmark measures
    /// the server and the mock apart), trusting the certificate in `trustFile`.
    static func externalAPNs(
        dataDirectory: String, endpoint: String, trustFile: String?
    ) throws
        -> (app: RegisteredApp, announcement: String)
    {
        do {
            _ = try APNsDestination(parsing: endpoint)
        } catch {
            throw CLIError("--apns-endpoint: \(error)")
        }
        var trustPEM: String?
        if let trustFile {
            guard let data = FileManager.default.contents(atPath: trustFile) else {
                throw CLIError("cannot read --apns-trust \(trustFile)")
            }
            trustPEM = String(decoding: data, as: UTF8.self)
        }
        let (_, keyPath) = try devSigningKey(dataDirectory: dataDirectory)
        let app = registered(endpoint: endpoint, trustPEM: trustPEM, dataDirectory: dataDirectory)
        return (app, "  dev.app pushes to APNs at \(endpoint) (key \(apnsKeyID) in \(keyPath))")
    }

    /// dev.app as the tenant registry's seed: its key file in the data
    /// directory, and the endpoint and trust of this start's APNs.
    private static func registered(endpoint: String, trustPEM: String?, dataDirectory: String) -> RegisteredApp {
        RegisteredApp(
            id: appID, bundleID: appID,
            credentials: RegisteredCredentials(
                teamID: apnsTeamID, keyID: apnsKeyID, endpoint: endpoint,
                keySource: .file(path: dataDirectory + "/apns-dev-key.p8"), trustPEM: trustPEM),
            source: .seed)
    }

    /// dev.app's signing key, made once and kept in the data directory.
    private static func devSigningKey(dataDirectory: String) throws -> (APNsSigningKey, String) {
        let keyPath = dataDirectory + "/apns-dev-key.p8"
        if FileManager.default.fileExists(atPath: keyPath) {
            return (try APNsSigningKey(contentsOfFile: keyPath, keyID: apnsKeyID, teamID: apnsTeamID), keyPath)
        }
        let key = try APNsSigningKey.generate(keyID: apnsKeyID, teamID: apnsTeamID)
        try writeFile(keyPath, try key.pkcs8PEM, mode: 0o600)
        return (key, keyPath)
    }
}
