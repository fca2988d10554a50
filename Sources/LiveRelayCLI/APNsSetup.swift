import Foundation
import LiveRelayAPNs
import LiveRelayAPNsClient
import LiveRelayActivities
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMockAPNs
import LiveRelayStore
import LiveRelayTLS
import Logging
import NIOCore

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
struct AppConfiguration: Decodable {
    var id: String
    var bundleID: String
    var queueCapacity: Int?
    /// Share of send slots when apps compete (deficit round robin weight).
    var weight: Int?
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
        case id, bundleID = "bundle_id", queueCapacity = "queue_capacity", weight, apns
    }
}

/// Where an app's pushes go, per token environment.
enum APNsDestination: Hashable {
    /// Apple: production tokens to production, sandbox tokens to the sandbox.
    case apple
    /// Every token to one server (a mock, a staging relay).
    case custom(host: String, port: Int)

    init(parsing text: String?) throws {
        guard let text, text != "apple" else { self = .apple; return }
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
              (1...65535).contains(port), colon > text.startIndex else {
            throw CLIError("apns.endpoint must be \"apple\" or \"host:port\", not \"\(text)\"")
        }
        self = .custom(host: String(text[..<colon]), port: port)
    }

    func endpoint(for environment: APNsEnvironment) -> APNsEndpoint {
        switch self {
        case .apple: environment == .sandbox ? .sandbox : .production
        case let .custom(host, port): .custom(host: host, port: port)
        }
    }
}

/// An app with everything its pushes need, read and checked before the server starts.
struct PushingApp {
    var app: App
    var key: APNsSigningKey
    var destination: APNsDestination
    /// The PEM a non-Apple endpoint must present (its certificate or CA).
    var trustPEM: String?
    var queueCapacity: Int
    var weight: Int

    static let defaultQueueCapacity = 100_000

    /// Reads the key file (relative paths against `base`); the key's bytes stay in memory only.
    init(_ configuration: AppConfiguration, base: String) throws {
        let credentials = configuration.apns
        let keyPath = DevSetup.absolute(credentials.keyFile, relativeTo: base)
        do {
            key = try APNsSigningKey(contentsOfFile: keyPath, keyID: credentials.keyID, teamID: credentials.teamID)
        } catch {
            throw CLIError("app \(configuration.id): \(error)")
        }
        destination = try APNsDestination(parsing: credentials.endpoint)
        if let trust = credentials.trustCertificate {
            let path = DevSetup.absolute(trust, relativeTo: base)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError("app \(configuration.id): cannot read apns.trust_certificate \(path)")
            }
            trustPEM = String(decoding: data, as: UTF8.self)
        }
        app = App(id: configuration.id, bundleID: configuration.bundleID)
        queueCapacity = configuration.queueCapacity ?? Self.defaultQueueCapacity
        weight = configuration.weight ?? 1
        guard queueCapacity > 0, weight > 0 else {
            throw CLIError("app \(configuration.id): queue_capacity and weight must be above 0")
        }
    }

    init(app: App, key: APNsSigningKey, destination: APNsDestination, trustPEM: String?) {
        self.app = app
        self.key = key
        self.destination = destination
        self.trustPEM = trustPEM
        self.queueCapacity = Self.defaultQueueCapacity
        self.weight = 1
    }
}

/// The APNs side of a running `liverelay serve`: the transports, the
/// dispatcher that feeds them, and in the development setup the mock APNs
/// they talk to. Built before the RPC server starts; shut down after it has
/// drained, so every call that was answered has its pushes accounted for.
final class APNsRuntime: Sendable {
    let dispatcher: Dispatcher
    let directory: AppDirectory
    let mock: MockAPNsServer?
    private let logger: Logger

    /// One connection pool per (endpoint, signing key), shared by the apps
    /// that share both; one provider token per key, shared by its pools.
    init(apps: [PushingApp], mock: MockAPNsServer?, store: any ActivityStore, clock: any DomainClock,
         group: any EventLoopGroup, logger: Logger) throws {
        var sources: [String: ProviderTokenSource] = [:]
        var pools: [String: any APNsTransport] = [:]
        func pool(_ endpoint: APNsEndpoint, _ pushing: PushingApp) throws -> any APNsTransport {
            let name = "\(endpoint)/\(pushing.key.teamID)/\(pushing.key.keyID)"
            if let existing = pools[name] { return existing }
            let sourceName = "\(pushing.key.teamID)/\(pushing.key.keyID)"
            let source = sources[sourceName] ?? ProviderTokenSource(key: pushing.key, clock: clock)
            sources[sourceName] = source
            var configuration = APNsClientConfiguration(endpoint: endpoint)
            if let trust = pushing.trustPEM {
                configuration = .trusting(certificatePEM: trust, endpoint: endpoint)
            }
            let made = try APNsConnectionPool(configuration: configuration, tokenSource: source, group: group, logger: logger)
            pools[name] = made
            return made
        }
        var dispatchApps: [DispatchApp] = []
        for pushing in apps {
            let transport: any APNsTransport
            switch pushing.destination {
            case .apple:
                transport = APNsEnvironmentRouter(production: try pool(.production, pushing), sandbox: try pool(.sandbox, pushing))
            case let .custom(host, port):
                transport = try pool(.custom(host: host, port: port), pushing)
            }
            dispatchApps.append(DispatchApp(appID: pushing.app.id, queueCapacity: pushing.queueCapacity,
                                            transport: transport, weight: pushing.weight))
        }
        self.dispatcher = Dispatcher(
            configuration: DispatcherConfiguration(apps: dispatchApps),
            eventLoop: group.next(), clock: clock, pruner: StoreTokenPruner(store: store, clock: clock), logger: logger)
        // No apps at all (a config file without "apps"): every app id is
        // accepted and its pushes fail as AppNotConfigured, visibly, in the summary.
        self.directory = apps.isEmpty ? .open : AppDirectory(apps: apps.map(\.app))
        self.mock = mock
        self.logger = logger
    }

    /// Sends or fails what is queued (within `gracePeriod`); the dispatcher
    /// then closes the APNs connections; the mock stops last, so it answers to the end.
    func shutdown(gracePeriod: TimeAmount = .seconds(10)) async {
        do {
            try await dispatcher.shutdown(gracePeriod: gracePeriod).get()
        } catch {
            logger.error("dispatcher shutdown", metadata: ["error": "\(error)"])
        }
        try? await mock?.shutdown()
    }
}

extension DevSetup {
    static let apnsKeyID = "LRDEVKEY01"
    static let apnsTeamID = "LRDEVTEAM1"

    /// The development setup's APNs side: a signing key for dev.app kept in
    /// the data directory (made once), and a mock APNs in this process that
    /// knows its public half and records every push to `mock-apns.jsonl`.
    static func startMockAPNs(dataDirectory: String, port: Int, group: any EventLoopGroup, logger: Logger)
        async throws -> (app: PushingApp, mock: MockAPNsServer, announcement: String)
    {
        let (key, keyPath) = try devSigningKey(dataDirectory: dataDirectory)
        let recordPath = dataDirectory + "/mock-apns.jsonl"
        let configuration = MockAPNsConfiguration(
            host: "127.0.0.1", port: port,
            apps: [MockAPNsApp(bundleID: appID, teamID: apnsTeamID, keyID: apnsKeyID, publicKeyPEM: try key.publicKeyPEM)],
            recordFile: recordPath)
        let mock = try await MockAPNsServer.start(configuration: configuration, group: group, logger: logger)
        let app = PushingApp(app: App(id: appID, bundleID: appID), key: key,
                             destination: .custom(host: "127.0.0.1", port: mock.port), trustPEM: mock.certificatePEM)
        let announcement = "  mock APNs on 127.0.0.1:\(mock.port) (key \(apnsKeyID) in \(keyPath)); every push it receives is appended to \(recordPath)"
        return (app, mock, announcement)
    }

    /// The development setup pushing to an APNs endpoint of the caller's instead
    /// (a `liverelay mock-apns` of its own process, so that a benchmark measures
    /// the server and the mock apart), trusting the certificate in `trustFile`.
    static func externalAPNs(dataDirectory: String, endpoint: String, trustFile: String?) throws
        -> (app: PushingApp, announcement: String)
    {
        let destination = try APNsDestination(parsing: endpoint)
        var trustPEM: String?
        if let trustFile {
            guard let data = FileManager.default.contents(atPath: trustFile) else {
                throw CLIError("cannot read --apns-trust \(trustFile)")
            }
            trustPEM = String(decoding: data, as: UTF8.self)
        }
        let (key, keyPath) = try devSigningKey(dataDirectory: dataDirectory)
        let app = PushingApp(app: App(id: appID, bundleID: appID), key: key, destination: destination, trustPEM: trustPEM)
        return (app, "  dev.app pushes to APNs at \(endpoint) (key \(apnsKeyID) in \(keyPath))")
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
