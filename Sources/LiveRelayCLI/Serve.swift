import ArgumentParser
import Foundation
import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayAdmin
import LiveRelayComposition
import LiveRelayDomain
import LiveRelayOps
import LiveRelayPushOutlet
import LiveRelayServer
import LiveRelayService
import LiveRelayStore
import LiveRelayTLS
import LiveRelayWire
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import ServiceLifecycle

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension LogFormat: ExpressibleByArgument {}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the LiveRelay server.",
        discussion: """
            Without --config: a development setup in --data-dir (default \(DevSetup.defaultDataDirectory)):
            a self-signed certificate (cert.pem, key.pem), an API key for the app
            "dev.app" (printed once, on the first start) and an in-process mock
            APNs for dev.app; apps added through the admin API may name key
            files in the data directory and any APNs endpoint. SIGTERM or
            SIGINT shut down gracefully (GOAWAY, in-flight calls finish).

            The operations port (plain HTTP, loopback by default): GET /metrics
            (Prometheus text format), GET /healthz (the process is alive),
            GET /readyz (200 when the RPC listener is bound, the store answers
            and the node is not draining; 503 with the reason otherwise, at once
            when a graceful shutdown begins). Default 127.0.0.1:9090 with
            --config, any free port in the development setup; printed as
            "ops listening on HOST:PORT" after the "listening on" line.

            --config FILE, a JSON object (relative paths are relative to the
            file; unknown keys are refused):
              "listen": {"host", "port"}
              "ops": {"host", "port"}   the operations port (-1: none)
              "tls": {"certificate", "private_key", "client_ca",
                      "client_auth": "none" | "optional" | "require"}
              "insecure_plaintext": true   serve without TLS (tests only)
              "api_key_file": path of the API keys, {"keys": [{"key_id",
                  "secret_sha256", "app_ids" | "all_apps": true,
                  "allowed_methods", "created_at", "label"}]}; an empty
                  "app_ids" is refused (an operator key says "all_apps");
                  empty "allowed_methods": no RPC at all
              "data_dir": holds liverelay.sqlite3 (and api-keys.json when
                  there is no "api_key_file")
              "store": {"kind": "sqlite" | "memory" | "postgres",
                        "postgres_url"}
              "limits": {"max_frame_size", "max_requests_in_flight",
                  "idle_timeout_ms", "hello_timeout_ms", "drain_time_ms",
                  "max_unsent_reply_bytes", "max_connections",
                  "max_connections_per_key", "max_buffered_request_bytes",
                  "max_buffered_request_bytes_per_key",
                  "push_to_start_retention_days"}
              "dispatch": {"durable_intents": true, "intent_lease_ms": 30000}
              "events": {"retention_hours": 72, "max_per_app": 100000}
                  what each app's event feed keeps (the older bound wins)
              "webhooks": {"retry_s": 3600, "probe_s": 300,
                  "backoff_max_s": 300, "timeout_s": 10, "batch_size": 100,
                  "ca_file", "allow_private_addresses": false}   how the
                  apps' webhooks are delivered (docs/PROTOCOL.md, "Webhooks")
              "admission": {"enabled": true, "max_in_flight_per_app": 32,
                  "max_in_flight": 512, "busy_window_ms": 1000,
                  "retry_after_ms": 50, "refuse_unreachable_deadlines": true}
              "quotas": {"calls_per_second", "burst", "pushes_per_hour"
                  (default 250000), "max_tokens", "max_live_activities",
                  "priority_budget_per_hour" (default unlimited),
                  "nodes": 1}   each a number or "unlimited"; rates are
                  split over "nodes", counts are the store's
              "apps": [{"id", "bundle_id", "queue_capacity", "weight",
                  "max_push_lifetime_s", "quotas": {...the app's own},
                  "apns": {"team_id", "key_id", "key_file",
                           "endpoint": "apple" | "HOST:PORT",
                           "trust_certificate"}}]
              "credential_key_directories": [paths]   where the admin
                  API's private_key_file (and the registry's key files)
                  may be; default none: refused
              "credential_endpoints": ["HOST:PORT"]   APNs endpoints the
                  admin API and the registry may name besides apple;
                  default none ("allow_any_credential_endpoint": true:
                  any, for tests); "apps" are allowed their own
              "null_service": true   empty OK replies (benchmarks)
            """
    )

    @Option(help: "A JSON config file for a production setup (its keys are listed above).")
    var config: String?

    @Option(help: "Address to listen on (default 127.0.0.1, or the config file's).")
    var host: String?

    @Option(help: "Port to listen on (default 7443, or the config file's).")
    var port: Int?

    @Option(help: "Address of the operations port (default 127.0.0.1, or the config file's ops.host).")
    var opsHost: String?

    @Option(
        help:
            "The operations port: /metrics, /healthz, /readyz (default 9090 with --config or the config file's ops.port; any free port in the development setup; 0: any free port; --ops-port=-1: none)."
    )
    var opsPort: Int?

    @Flag(help: "Serve no operations port (the same as --ops-port=-1): metrics are then not collected at all.")
    var noOps = false

    @Option(help: "Directory for the development setup, or overriding the config file's data_dir.")
    var dataDir: String?

    @Flag(help: "Answer every call with an empty OK reply: measures the protocol's ceiling.")
    var nullService = false

    @Option(
        help:
            "Where tokens and activities live: sqlite (<data dir>/liverelay.sqlite3, durable; the default), memory (forgotten on exit) or postgres (shared by several nodes; see --postgres-url)."
    )
    var store: StoreKind?

    @Option(
        help:
            "For --store postgres: postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=require&schema=liverelay (default: $LIVERELAY_POSTGRES_URL, which keeps the password out of ps)."
    )
    var postgresURL: String?

    // Named explicitly: the automatic name of `mockAPNsPort` would be --mock-ap-ns-port.
    @Option(
        name: .customLong("mock-apns-port"),
        help: "Development setup only: the port of the in-process mock APNs that receives dev.app's pushes (0: any free port).")
    var mockAPNsPort: Int = 0

    @Option(
        name: .customLong("apns-endpoint"),
        help:
            "Development setup only: send dev.app's pushes to this host:port (e.g. a `liverelay mock-apns` of its own) instead of the in-process mock; the key stays <data dir>/apns-dev-key.p8."
    )
    var apnsEndpoint: String?

    @Option(name: .customLong("apns-trust"), help: "With --apns-endpoint: the PEM certificate that endpoint presents.")
    var apnsTrust: String?

    @Option(
        name: .customLong("apns-threads"),
        help:
            "Event-loop threads of the APNs side (the dispatcher and every APNs connection), apart from the RPC server's (default: half the cores, at least 1)."
    )
    var apnsThreads: Int?

    @Option(
        name: .customLong("rpc-threads"),
        help: "Event-loop threads of the RPC side (the listener and every client connection); default: one per core.")
    var rpcThreads: Int?

    @Flag(
        inversion: .prefixedNo,
        help:
            "Record each accepted call's pushes in the store and resume them after a crash (default: on, except for --store memory; the config file's dispatch.durable_intents)."
    )
    var durableIntents: Bool?

    @Option(
        help:
            "How long this node's dispatch intents stay leased after their last renewal, in milliseconds, at least 1000: how long another node waits before it takes over the work of a node that died (default 30000, or the config file's dispatch.intent_lease_ms)."
    )
    var intentLeaseMs: Int?

    @Option(
        help:
            "Calls of one app in progress, while other apps are busy too, before its next ones are refused RESOURCE_EXHAUSTED (AppOverloaded); default 32, or the config file's admission.max_in_flight_per_app."
    )
    var admissionMaxInFlightPerApp: Int?

    @Option(
        help:
            "Calls in progress over every app before more are refused RESOURCE_EXHAUSTED (ServerOverloaded); an app alone may use half; default 512, or the config file's admission.max_in_flight."
    )
    var admissionMaxInFlight: Int?

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    @Option(
        help:
            "text (swift-log's lines), logfmt or json (one object per line): the structured two give every field (request_id, app, apns_id, ...) its own key for a log shipper."
    )
    var logFormat: LogFormat = .text

    func validate() throws {
        if let opsPort, !(-1...65_535).contains(opsPort) {
            throw ValidationError("--ops-port must be -1 (none), 0 (any free port) or a port number, got \(opsPort)")
        }
        if let rpcThreads, !(1...256).contains(rpcThreads) {
            throw ValidationError("--rpc-threads must be 1...256, got \(rpcThreads)")
        }
        if let intentLeaseMs, intentLeaseMs < 1_000 {
            throw ValidationError("--intent-lease-ms must be at least 1000, got \(intentLeaseMs)")
        }
        for (flag, value) in [
            ("--admission-max-in-flight-per-app", admissionMaxInFlightPerApp), ("--admission-max-in-flight", admissionMaxInFlight),
        ] {
            if let value, value < 1 { throw ValidationError("\(flag) must be at least 1, got \(value)") }
        }
    }

    func run() async throws {
        let level = self.logLevel
        let format = self.logFormat
        LoggingSystem.bootstrap { label in
            if format == .text {
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
            var handler = StructuredLogHandler(label: label, format: format)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "liverelay")
        do {
            try await self.serve(logger: logger)
        } catch let error as CLIError {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }

    private func serve(logger: Logger) async throws {
        var (description, setup) = try self.describe(logger: logger)
        if let announcement = setup.announcement {
            writeStandardOutput(announcement)
        }
        // Before anything makes a metric: swift-metrics hands out the factory's
        // handlers at creation, so a counter made before the bootstrap would
        // stay a no-op. Without an operations port nothing could read the
        // metrics, and the no-op backend costs nothing.
        if let address = setup.ops {
            let prometheus = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: prometheus)
            factory.valueHistogramBuckets[StoreMetrics.batchSizeLabel] = StoreMetrics.batchSizeBuckets
            MetricsSystem.bootstrap(factory)
            description.ops = ServerDescription.Ops(host: address.host, port: address.port, registry: prometheus)
            // From the environment only, like every secret: a config file is read by more people than it should.
            if let token = ProcessInfo.processInfo.environment["LIVERELAY_METRICS_TOKEN"], !token.isEmpty {
                description.ops?.metricsToken = token
            }
        }
        if setup.isDevelopment, case .activities = description.calls, let directory = description.store.dataDirectory {
            try await self.developmentAPNs(&description, dataDirectory: directory, logger: logger)
        } else if case .activities = description.calls, description.seedApps.isEmpty {
            logger.warning("no apps configured: every push fails with AppNotConfigured (add \"apps\" to the config file)")
        }
        let built = try await ServerBuilder.build(description)
        let (host, port, plaintext) = (description.host, description.port, description.tls == nil)
        let opsAddress = setup.ops
        logger.info("service", metadata: ["kind": "\(description.calls.isNull ? "null" : "activities, \(built.storeDescription)")"])
        let group = built.serviceGroup(logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                let address = try await built.server.boundAddress
                writeStandardOutput(
                    "listening on \(host):\(address.port ?? port)\(plaintext ? " (plaintext)" : "")")
                built.readiness.listenerBound()
                // After the RPC line: scripts and tests take the first "listening on" line for the RPC port.
                if let ops = built.ops, let opsAddress {
                    let bound = try await ops.boundAddress
                    writeStandardOutput("ops listening on \(opsAddress.host):\(bound.port ?? opsAddress.port)")
                }
            }
            do {
                try await tasks.waitForAll()
            } catch let error as OpsServerError {
                tasks.cancelAll()
                throw CLIError(error.description)
            } catch {
                tasks.cancelAll()
                throw CLIError("cannot serve on \(host):\(port): \(error)")
            }
        }
    }

    /// The development setup's APNs side: dev.app, seeded into the registry, pushing to an
    /// in-process mock APNs, or to `--apns-endpoint` (a `liverelay mock-apns` of its own).
    private func developmentAPNs(_ description: inout ServerDescription, dataDirectory: String, logger: Logger) async throws {
        do {
            if let endpoint = self.apnsEndpoint {
                let dev = try DevSetup.externalAPNs(dataDirectory: dataDirectory, endpoint: endpoint, trustFile: self.apnsTrust)
                writeStandardOutput(dev.announcement)
                description.seedApps = [dev.app]
            } else {
                // The mock stands in for Apple's servers, not for our APNs side: it keeps the process's shared loops.
                let dev = try await DevSetup.startMockAPNs(
                    dataDirectory: dataDirectory, port: self.mockAPNsPort, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
                writeStandardOutput(dev.announcement)
                description.seedApps = [dev.app]
                description.mockAPNs = dev.mock
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("cannot set up APNs: \(error)")
        }
    }

    /// What `serve` prints and decides beside the server's description.
    private struct Setup {
        var announcement: String?
        /// No config file: dev.app pushes to an in-process mock APNs.
        var isDevelopment = false
        /// The operations port; nil: none.
        var ops: (host: String, port: Int)?
    }

    /// The operations address from the flags over the config file's "ops"; nil when disabled.
    /// `defaultPort` is 9090 for a config file (a fixed port for probes and
    /// scrapers) and 0 in the development setup, where several servers (tests,
    /// benchmarks, two nodes) run side by side on one machine.
    private func opsAddress(file: ServeConfigurationFile.Listen?, defaultPort: Int) throws -> (host: String, port: Int)? {
        let port = self.opsPort ?? file?.port ?? defaultPort
        guard !self.noOps, port != -1 else { return nil }
        guard (0...65_535).contains(port) else {
            throw CLIError("ops.port must be -1 (none), 0 (any free port) or a port number, got \(port)")
        }
        return (self.opsHost ?? file?.host ?? "127.0.0.1", port)
    }

    /// The server's description from the config file or the development setup, with the flags on top.
    private func describe(logger: Logger) throws -> (ServerDescription, Setup) {
        var (description, setup) = try describeFileOrDevelopment()
        description.logger = logger
        if self.nullService { description.calls = .null }
        if let store = self.store { description.store.kind = store }
        if let url = self.postgresURL { description.store.postgresURL = url }
        if let value = self.durableIntents { description.durableIntents = value }
        if let value = self.intentLeaseMs { description.intentLease = .milliseconds(value) }
        if let value = self.apnsThreads { description.apnsThreads = value }
        if let value = self.rpcThreads { description.rpcThreads = value }
        if let value = admissionMaxInFlightPerApp { description.admission.maxInFlightPerApp = value }
        if let value = admissionMaxInFlight { description.admission.maxInFlight = value }
        return (description, setup)
    }

    private func describeFileOrDevelopment() throws -> (ServerDescription, Setup) {
        var description = ServerDescription()
        guard let config else {
            let host = self.host ?? "127.0.0.1"
            let prepared = try DevSetup.prepare(dataDirectory: self.dataDir ?? DevSetup.defaultDataDirectory, host: host)
            description.host = host
            description.port = self.port ?? 7443
            description.tls = try Self.tlsContext(
                TLSConfiguration.makeServerConfiguration(
                    certificateChain: .file(prepared.certificatePath), privateKey: .file(prepared.privateKeyPath)))
            description.seedKeys = try Self.seedKeys(prepared.keyFile, path: prepared.keyFilePath)
            description.store = StoreSelection(kind: .sqlite, dataDirectory: prepared.dataDirectory)
            // One machine's setup for trying things and for tests: any key file on the machine
            // (development nodes sharing a PostgreSQL registry each seed dev.app with a key in
            // their own data directory) and any endpoint (a mock APNs on whatever port it got).
            description.credentialAllowance = try Self.developmentAllowance()
            return (
                description,
                Setup(announcement: prepared.announcement, isDevelopment: true, ops: try opsAddress(file: nil, defaultPort: 0))
            )
        }
        let path = DevSetup.absolute(config)
        let base = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let file = try ServeConfigurationFile.load(path: path)
        let dataDirectory = self.dataDir.map { DevSetup.absolute($0) } ?? file.dataDir.map { DevSetup.absolute($0, relativeTo: base) }
        let keyFilePath: String
        if let apiKeyFile = file.apiKeyFile {
            keyFilePath = DevSetup.absolute(apiKeyFile, relativeTo: base)
        } else if let dataDirectory {
            keyFilePath = dataDirectory + "/api-keys.json"
        } else {
            throw CLIError("\(path): set \"api_key_file\" (or \"data_dir\", which holds api-keys.json)")
        }
        guard FileManager.default.fileExists(atPath: keyFilePath) else {
            throw CLIError("no API key file at \(keyFilePath) (the development setup of `liverelay serve` writes one in the same format)")
        }
        let keyFile: APIKeyFile
        do {
            keyFile = try APIKeyFile.load(path: keyFilePath)
        } catch {
            throw CLIError("\(error)")
        }
        description.host = self.host ?? file.listen?.host ?? "127.0.0.1"
        description.port = self.port ?? file.listen?.port ?? 7443
        description.tls = try file.tlsConfiguration(base: base).map(Self.tlsContext)
        description.seedKeys = try Self.seedKeys(keyFile, path: keyFilePath)
        description.connection = try file.connectionConfiguration()
        description.drainTime = try file.drainTime
        description.maxUnsentReplyBytes = try file.maxUnsentReplyBytes
        description.maxConnections = try file.maxConnections
        description.maxConnectionsPerKey = try file.maxConnectionsPerKey
        (description.maxBufferedRequestBytes, description.maxBufferedRequestBytesPerKey) = try file.bufferedRequestBytes
        if file.nullService == true { description.calls = .null }
        description.store = StoreSelection(
            kind: try file.storeKind ?? .sqlite, postgresURL: file.store?.postgresURL, dataDirectory: dataDirectory)
        description.durableIntents = file.dispatch?.durableIntents
        description.eventRetention = try file.eventRetention
        description.webhooks = try file.webhookSettings(base: base)
        description.intentLease = .milliseconds(max(1_000, file.dispatch?.intentLeaseMilliseconds ?? 30_000))
        description.pushToStartRetention = try file.pushToStartRetention
        description.admission = try file.admissionLimits
        (description.quotaDefaults, description.quotaNodes) = try QuotaConfiguration.defaults(section: file.quotas)
        description.seedApps = try (file.apps ?? []).map { try RegistrySeed.app($0, base: base) }
        description.credentialAllowance = try file.credentialAllowance(base: base)
        // A key file that cannot be read stops the start here rather than failing the app's every push.
        let allowance = description.credentialAllowance.allowing(seeds: description.seedApps)
        for app in description.seedApps { _ = try PushingApp(app, allowance: allowance) }
        return (description, Setup(ops: try opsAddress(file: file.ops, defaultPort: 9090)))
    }

    private static func developmentAllowance() throws -> CredentialAllowance {
        do {
            return try CredentialAllowance(keyDirectories: ["/"], anyEndpoint: true)
        } catch {
            throw CLIError("\(error)")
        }
    }

    private static func tlsContext(_ configuration: TLSConfiguration) throws -> TLSContext {
        do {
            return try TLSContext(configuration: configuration)
        } catch {
            throw CLIError(error.description)
        }
    }

    private static func seedKeys(_ file: APIKeyFile, path: String) throws -> [RegisteredAPIKey] {
        do {
            return try file.keys.map { try RegisteredAPIKey(seed: $0) }
        } catch {
            throw CLIError("\(path): \(error)")
        }
    }
}

extension ServerDescription.Calls {
    var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension StoreKind: ExpressibleByArgument {}
