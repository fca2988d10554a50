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

/// An app with everything its pushes need, read and checked before the server starts.
struct PushingApp {
    var app: App
    var credentials: APNsCredentials
    var queueCapacity: Int
    var weight: Int
    var maxPushLifetime: TimeAmount?

    static let defaultQueueCapacity = 100_000

    /// Reads the key file (relative paths against `base`); the key's bytes stay in memory only.
    init(_ configuration: AppConfiguration, base: String) throws {
        let apns = configuration.apns
        let keyPath = DevSetup.absolute(apns.keyFile, relativeTo: base)
        let key: APNsSigningKey
        do {
            key = try APNsSigningKey(contentsOfFile: keyPath, keyID: apns.keyID, teamID: apns.teamID)
        } catch {
            throw CLIError("app \(configuration.id): \(error)")
        }
        let destination: APNsDestination
        do {
            destination = try APNsDestination(parsing: apns.endpoint)
        } catch {
            throw CLIError("app \(configuration.id): apns.endpoint: \(error)")
        }
        var trustPEM: String?
        if let trust = apns.trustCertificate {
            let path = DevSetup.absolute(trust, relativeTo: base)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError("app \(configuration.id): cannot read apns.trust_certificate \(path)")
            }
            trustPEM = String(decoding: data, as: UTF8.self)
        }
        app = App(id: configuration.id, bundleID: configuration.bundleID)
        credentials = APNsCredentials(key: key, destination: destination, trustPEM: trustPEM)
        queueCapacity = configuration.queueCapacity ?? Self.defaultQueueCapacity
        weight = configuration.weight ?? 1
        guard queueCapacity > 0, weight > 0 else {
            throw CLIError("app \(configuration.id): queue_capacity and weight must be above 0")
        }
        if let seconds = configuration.maxPushLifetimeSeconds {
            // Up to a year: far beyond any activity's life, and far from TimeAmount's overflow.
            guard seconds > 0, seconds <= 31_536_000 else {
                throw CLIError("app \(configuration.id): max_push_lifetime_s must be above 0 and at most 31536000")
            }
            maxPushLifetime = .nanoseconds(Int64(seconds * 1_000_000_000))
        }
    }

    init(app: App, credentials: APNsCredentials) {
        self.app = app
        self.credentials = credentials
        self.queueCapacity = Self.defaultQueueCapacity
        self.weight = 1
    }
}

/// The event loops of the APNs side (the dispatcher and every APNs connection),
/// apart from the RPC server's.
///
/// A fan-out's answers free send slots by the hundred, and each APNs connection
/// opens the streams it is handed in one task on its loop: 250–500 streams, 2–15 ms
/// on 2 cores. NIO runs every task that is ready before it polls for I/O again, so
/// on a loop shared with RPC connections every call of every app on that loop waited
/// for those tasks back to back. On loops of their own, the kernel's scheduler
/// shares the cores between the two sides instead.
///
/// The default is half the cores: with one loop per core on each side (4 threads on
/// 2 cores) the realistic mix cost more CPU per call than with the loops shared, as
/// the dispatcher's hand-offs to the connections crossed threads that had to be woken;
/// with one APNs loop on 2 cores it cost less (docs/BENCHMARKS.md, "Dispatcher and
/// APNs client"). `--apns-threads` sets it.
enum APNsEventLoops {
    /// Threads show as `APNs-ELT-…` (`top -H`). Made once per process, at start, and
    /// kept as long as the process, as NIO's own shared group is.
    static func make(threads: Int) -> MultiThreadedEventLoopGroup {
        MultiThreadedEventLoopGroup._makePerpetualGroup(threadNamePrefix: "APNs-ELT-", numberOfThreads: threads)
    }
}

/// The APNs side of a running `liverelay serve`, as services: the APNs client
/// (every connection pool, by route), the dispatcher that feeds it, and in
/// the development setup the mock APNs they talk to. `Serve` lists them in
/// its `ServiceGroup` so that shutdown runs in the right order.
struct APNsRuntime {
    let client: APNsClient
    let dispatcher: Dispatcher
    let directory: AppDirectory
    let mock: MockAPNsServer?
    /// The apps it started with (the tenant registry may add and change apps later).
    let apps: [PushingApp]

    /// Registers every app's credentials with the APNs client (apps that share
    /// a destination and a key share its pool and provider token) and gives
    /// the dispatcher each app's route.
    init(
        apps: [PushingApp], mock: MockAPNsServer?, store: any ActivityStore, clock: any WallClock,
        ledger: (any DispatchLedger)?, group: any EventLoopGroup, logger: Logger
    ) throws {
        let client = APNsClient(group: group, clock: clock, logger: logger)
        let dispatchApps = try apps.map { pushing in
            DispatchApp(
                appID: pushing.app.id, queueCapacity: pushing.queueCapacity,
                route: try client.register(pushing.credentials), weight: pushing.weight,
                maxPushLifetime: pushing.maxPushLifetime)
        }
        self.client = client
        self.dispatcher = Dispatcher(
            configuration: DispatcherConfiguration(apps: dispatchApps), transports: client,
            eventLoop: group.next(), clock: clock, pruner: StoreTokenPruner(store: store, clock: clock),
            ledger: ledger, logger: logger)
        // No apps at all (a config file without "apps"): every app id is
        // accepted and its pushes fail as AppNotConfigured, visibly, in the summary.
        self.directory = apps.isEmpty ? .open : AppDirectory(apps: apps.map(\.app))
        self.mock = mock
        self.apps = apps
    }

    /// Adds an app, or changes its key, endpoint, queue or weight, while serving:
    /// its pushes go by the new route from now on.
    func configure(_ pushing: PushingApp) throws {
        dispatcher.configure(
            DispatchApp(
                appID: pushing.app.id, queueCapacity: pushing.queueCapacity, route: try client.register(pushing.credentials),
                weight: pushing.weight, maxPushLifetime: pushing.maxPushLifetime))
    }

    /// In `ServiceGroup` order: the mock (stops last, so it answers to the
    /// end), the APNs client (closes the connections once the dispatcher has
    /// drained), the dispatcher.
    var services: [any Service] {
        (mock.map { [$0] } ?? []) + [client, dispatcher]
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
        async throws -> (app: PushingApp, mock: MockAPNsServer, announcement: String)
    {
        let (key, keyPath) = try devSigningKey(dataDirectory: dataDirectory)
        let recordPath = dataDirectory + "/mock-apns.jsonl"
        let configuration = MockAPNsConfiguration(
            host: "127.0.0.1", port: port,
            apps: [MockAPNsApp(bundleID: appID, teamID: apnsTeamID, keyID: apnsKeyID, publicKeyPEM: try key.publicKeyPEM)],
            recordFile: recordPath)
        let mock = try await MockAPNsServer.start(configuration: configuration, group: group, logger: logger)
        let app = PushingApp(
            app: App(id: appID, bundleID: appID),
            credentials: APNsCredentials(
                key: key, destination: .custom(host: "127.0.0.1", port: mock.port), trustPEM: mock.certificatePEM))
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
        -> (app: PushingApp, announcement: String)
    {
        let destination: APNsDestination
        do {
            destination = try APNsDestination(parsing: endpoint)
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
        let (key, keyPath) = try devSigningKey(dataDirectory: dataDirectory)
        let app = PushingApp(
            app: App(id: appID, bundleID: appID),
            credentials: APNsCredentials(key: key, destination: destination, trustPEM: trustPEM))
        return (app, "  dev.app pushes to APNs at \(endpoint) (key \(apnsKeyID) in \(keyPath))")
    }

    /// dev.app as the tenant registry's seed: its key file in the data
    /// directory, and the endpoint and trust of this start's mock.
    static func registered(_ pushing: PushingApp, dataDirectory: String) -> RegisteredApp {
        RegisteredApp(
            id: pushing.app.id, bundleID: pushing.app.bundleID,
            credentials: RegisteredCredentials(
                teamID: apnsTeamID, keyID: apnsKeyID, endpoint: pushing.credentials.destination.description,
                keySource: .file(path: dataDirectory + "/apns-dev-key.p8"), trustPEM: pushing.credentials.trustPEM),
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
