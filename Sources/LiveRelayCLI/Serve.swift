import ArgumentParser
import Foundation
import LiveRelayAPNs
import LiveRelayActivities
import LiveRelayAdmin
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
            APNs for dev.app. SIGTERM or SIGINT shut down gracefully (GOAWAY,
            in-flight calls finish).

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
                  "max_connections_per_key", "push_to_start_retention_days"}
              "dispatch": {"durable_intents": true, "intent_lease_ms": 30000}
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
        let setup = try self.resolve()
        if let announcement = setup.announcement {
            writeStandardOutput(announcement)
        }
        // Before anything makes a metric: swift-metrics hands out the factory's
        // handlers at creation, so a counter made before the bootstrap would
        // stay a no-op. Without an operations port nothing could read the
        // metrics, and the no-op backend costs nothing.
        let registry: PrometheusCollectorRegistry?
        if setup.ops != nil {
            let prometheus = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: prometheus)
            factory.valueHistogramBuckets[StoreMetrics.batchSizeLabel] = StoreMetrics.batchSizeBuckets
            MetricsSystem.bootstrap(factory)
            registry = prometheus
        } else {
            registry = nil
        }
        let tlsContext: TLSContext?
        do {
            tlsContext = try setup.tls.map { try TLSContext(configuration: $0) }
        } catch let error as TLSContextError {
            throw CLIError(error.description)
        }
        let keyUsage = KeyUsage()
        let authenticator: ReloadableAuthenticator
        let seedKeys: [RegisteredAPIKey]
        do {
            authenticator = ReloadableAuthenticator(try setup.keyFile.makeAuthenticator(), onUse: { keyUsage.note($0) })
            seedKeys = try setup.keyFile.keys.map(RegistrySeed.key)
        } catch {
            throw CLIError("\(setup.keyFilePath): \(error)")
        }

        let selection = StoreSelection(
            kind: self.store ?? setup.storeKind ?? .sqlite, postgresURL: self.postgresURL ?? setup.postgresURL,
            nullService: setup.nullService, dataDirectory: setup.dataDirectory)
        let (store, storeDescription) = try await selection.open(logger: logger)
        let tenantRegistry = try await selection.openRegistry(logger: logger)
        // The broadcast channels' store, for the service that creates and sends to channels.
        let channelStore = try await selection.openChannels(logger: logger)
        // The services in start order; graceful shutdown runs them down in reverse:
        // the RPC server drains first, then the sweeper stops, the dispatcher sends or
        // accounts for what is queued, the APNs client closes its connections, the
        // in-process mock stops, the dispatch intents' settlements are written, and
        // the store closes last.
        // The ops server is listed first so that it stops last: /readyz answers
        // 503 through the whole drain, and a final scrape sees the final counts.
        // The drain signal, listed last, hears of the shutdown first and marks the node draining.
        let probeLoop = MultiThreadedEventLoopGroup.singleton.next()
        let readiness = ServingReadiness(storeProbe: {
            // One keyed read through the store's normal read path: a closed store,
            // a SQLite store poisoned by a failed fsync, or an unreachable PostgreSQL fails it.
            _ = try await store.activity(ActivityKey(appID: "liverelay.readyz", activityID: "probe"), on: probeLoop).get()
        })
        let ops: OpsServer?
        let queueGauges = QueueGauges()
        if let address = setup.ops, let registry {
            ops = OpsServer(
                configuration: OpsServer.Configuration(host: address.host, port: address.port), registry: registry,
                readiness: readiness, beforeScrape: { queueGauges.update() }, logger: logger)
        } else {
            ops = nil
        }
        var services: [any Service] = ops.map { [$0] } ?? []
        services.append(ActivityStoreService(store, logger: logger))
        services.append(ChannelStoreService(channelStore))
        let (defaultQuota, quotaNodes) = setup.quotaDefaults
        let quotas = QuotaGate(settings: QuotaSettings(defaults: defaultQuota, nodes: quotaNodes))
        var parts = TenantRuntime.Parts(
            authenticator: authenticator, activities: nil, apns: nil, quotas: quotas, defaultQuota: defaultQuota, nodes: quotaNodes)
        var seedApps = setup.seedApps
        let service: any LiveRelayService
        if setup.nullService {
            service = NullLiveRelayService()
        } else {
            let clock = SystemClock()
            let storeKind = self.store ?? setup.storeKind ?? .sqlite
            let lease = IntentLease(owner: Self.nodeName(), duration: setup.intentLease)
            let priorityBudget = PriorityBudgetGate(budgets: setup.priorityBudgets)
            var intents: DispatchIntents?
            if self.durableIntents ?? setup.durableIntents ?? (storeKind != .memory) {
                intents = DispatchIntents(
                    configuration: DispatchIntents.Configuration(
                        lease: lease, takeOverAtStart: storeKind != .postgres, releaseAtShutdown: storeKind == .postgres),
                    store: store, clock: clock, logger: logger, on: MultiThreadedEventLoopGroup.singleton.next())
            }
            let apns = try await self.startAPNs(setup: setup, store: store, clock: clock, ledger: intents, logger: logger)
            if setup.isDevelopment, let directory = setup.dataDirectory {
                seedApps = apns.apps.map { DevSetup.registered($0, dataDirectory: directory) }
            }
            intents?.attach(apns.dispatcher)
            queueGauges.attach(apns.dispatcher)
            let activities = ActivityService(
                store: store, clock: clock, logger: logger, sink: apns.dispatcher,
                apps: apns.directory, intents: intents == nil ? IntentLease?.none : lease,
                pushToStartRetention: setup.pushToStartRetention,
                admission: AdmissionGate(limits: setup.admission),
                quotas: quotas,
                channels: ChannelService(
                    store: channelStore,
                    managers: { [dispatcher = apns.dispatcher, client = apns.client] app in
                        dispatcher.route(appID: app.id).flatMap { client.channelManager(for: $0) }
                    },
                    clock: clock, logger: logger),
                priorityBudget: priorityBudget)
            // Before the dispatcher: it stops after the dispatcher's drain, writing its settlements.
            if let intents { services.append(intents) }
            services += apns.services
            services.append(ActivitySweeper(service: activities, on: MultiThreadedEventLoopGroup.singleton.next()))
            services.append(PriorityBudgetSweeper(gate: priorityBudget))
            services.append(
                QuotaUsageRefresher(
                    gate: quotas, store: store, clock: clock, logger: logger, on: MultiThreadedEventLoopGroup.singleton.next()))
            service = activities
            parts.activities = activities
            parts.apns = apns
        }
        logger.info("service", metadata: ["kind": "\(setup.nullService ? "null" : "activities, \(storeDescription)")"])

        // The tenant registry: the config file's (or the development setup's) apps and keys
        // seeded into it, then its whole content applied before the first connection.
        let tenants = TenantRuntime(registry: tenantRegistry, parts: parts, keyUsage: keyUsage, logger: logger)
        do {
            try await tenantRegistry.apply(.seed(apps: seedApps, keys: seedKeys), actor: "config", now: SystemClock().now())
            try await tenants.reload()
        } catch {
            throw CLIError("cannot load the tenant registry: \(error)")
        }
        // After the store, before everything that uses the registry: it closes the registry after their drain.
        services.insert(tenants, at: services.firstIndex { $0 is ActivityStoreService }.map { $0 + 1 } ?? services.count)

        let server = RPCServer(
            configuration: RPCServer.Configuration(
                host: setup.host, port: setup.port, tls: tlsContext, connection: setup.connection, maxDrainTime: setup.drainTime,
                maxUnsentReplyBytes: setup.maxUnsentReplyBytes, maxConnections: setup.maxConnections,
                maxConnectionsPerKey: setup.maxConnectionsPerKey
            ),
            service: service, authenticator: authenticator,
            admin: RegistryAdminService(
                registry: tenantRegistry, mintKey: AdminWiring.mintKey,
                usage: { [dispatcher = parts.apns?.dispatcher] appID in
                    AdminWiring.usage(appID: appID, dispatcher: dispatcher, quotas: quotas)
                }),
            logger: logger
        )
        tenants.attach(server)
        services.append(server)
        services.append(readiness.drainSignal)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        )
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                let address = try await server.boundAddress
                writeStandardOutput("listening on \(setup.host):\(address.port ?? setup.port)\(tlsContext == nil ? " (plaintext)" : "")")
                readiness.listenerBound()
                // After the RPC line: scripts and tests take the first "listening on" line for the RPC port.
                if let ops, let opsAddress = setup.ops {
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
                throw CLIError("cannot serve on \(setup.host):\(setup.port): \(error)")
            }
        }
    }

    /// The dispatcher and its transports: the config file's apps, or in the
    /// development setup dev.app pushing to an in-process mock APNs.
    /// Names this process as the holder of dispatch intent leases: unique per start.
    static func nodeName() -> String { nodeNameOnce }
    private static let nodeNameOnce =
        "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"

    private func startAPNs(
        setup: Setup, store: any ActivityStore, clock: any WallClock, ledger: (any DispatchLedger)?, logger: Logger
    ) async throws -> APNsRuntime {
        let threads = self.apnsThreads ?? max(1, System.coreCount / 2)
        guard (1...256).contains(threads) else { throw CLIError("--apns-threads must be 1...256") }
        let group = APNsEventLoops.make(threads: threads)
        do {
            if setup.isDevelopment, let directory = setup.dataDirectory, let endpoint = self.apnsEndpoint {
                let dev = try DevSetup.externalAPNs(dataDirectory: directory, endpoint: endpoint, trustFile: self.apnsTrust)
                writeStandardOutput(dev.announcement)
                return try APNsRuntime(apps: [dev.app], mock: nil, store: store, clock: clock, ledger: ledger, group: group, logger: logger)
            }
            if setup.isDevelopment, let directory = setup.dataDirectory {
                // The mock stands in for Apple's servers, not for our APNs side: it keeps the process's shared loops.
                let dev = try await DevSetup.startMockAPNs(
                    dataDirectory: directory, port: self.mockAPNsPort, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
                writeStandardOutput(dev.announcement)
                return try APNsRuntime(
                    apps: [dev.app], mock: dev.mock, store: store, clock: clock, ledger: ledger, group: group, logger: logger)
            }
            if setup.apps.isEmpty {
                logger.warning("no apps configured: every push fails with AppNotConfigured (add \"apps\" to the config file)")
            }
            return try APNsRuntime(apps: setup.apps, mock: nil, store: store, clock: clock, ledger: ledger, group: group, logger: logger)
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("cannot set up APNs: \(error)")
        }
    }

    /// Everything `serve` needs, from the config file or the development setup, with flags on top.
    private struct Setup {
        var host: String
        var port: Int
        var tls: TLSConfiguration?
        var keyFile: APIKeyFile
        var keyFilePath: String
        var connection = ServerConnectionStateMachine.Configuration()
        var drainTime = TimeAmount.seconds(30)
        var maxUnsentReplyBytes = 1 << 20
        var maxConnections = 10_000
        var maxConnectionsPerKey = 1_000
        var nullService: Bool
        var announcement: String?
        /// Where the SQLite store lives; nil for a config file without "data_dir".
        var dataDirectory: String?
        /// The config file's "store" section.
        var storeKind: StoreKind? = nil
        var postgresURL: String? = nil
        /// The config file's apps, keys read; empty in the development setup.
        var apps: [PushingApp] = []
        /// No config file: dev.app pushes to an in-process mock APNs.
        var isDevelopment = false
        /// The config file's dispatch.durable_intents.
        var durableIntents: Bool? = nil
        var intentLease = Duration.seconds(30)
        var pushToStartRetention: UnixTime.Duration? = .hours(30 * 24)
        /// The operations port; nil: none.
        var ops: (host: String, port: Int)? = nil
        /// The config file's admission section (defaults in the development setup).
        var admission = AdmissionLimits()
        /// The config file's "quotas" section: every app's default and how many nodes share the rates; none in the development setup.
        var quotaDefaults: (quota: AppQuota, nodes: Int) = (AppQuota(), 1)
        /// The config file's apps as the tenant registry's seed.
        var seedApps: [RegisteredApp] = []
        /// The config file's priority-10 budgets, for a ``PriorityBudgetGate``; none in the development setup.
        var priorityBudgets = PriorityBudgets()
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

    private func resolve() throws -> Setup {
        var setup = try resolveFileOrDevelopment()
        if let value = admissionMaxInFlightPerApp { setup.admission.maxInFlightPerApp = value }
        if let value = admissionMaxInFlight { setup.admission.maxInFlight = value }
        return setup
    }

    private func resolveFileOrDevelopment() throws -> Setup {
        guard let config else {
            let host = self.host ?? "127.0.0.1"
            let prepared = try DevSetup.prepare(dataDirectory: self.dataDir ?? DevSetup.defaultDataDirectory, host: host)
            return Setup(
                host: host, port: self.port ?? 7443,
                tls: TLSConfiguration.makeServerConfiguration(
                    certificateChain: .file(prepared.certificatePath), privateKey: .file(prepared.privateKeyPath)),
                keyFile: prepared.keyFile, keyFilePath: prepared.keyFilePath, nullService: self.nullService,
                announcement: prepared.announcement, dataDirectory: prepared.dataDirectory, isDevelopment: true,
                intentLease: .milliseconds(intentLeaseMs ?? 30_000),
                ops: try opsAddress(file: nil, defaultPort: 0)
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
        return Setup(
            host: self.host ?? file.listen?.host ?? "127.0.0.1",
            port: self.port ?? file.listen?.port ?? 7443,
            tls: try file.tlsConfiguration(base: base),
            keyFile: keyFile, keyFilePath: keyFilePath,
            connection: try file.connectionConfiguration(),
            drainTime: try file.drainTime,
            maxUnsentReplyBytes: try file.maxUnsentReplyBytes,
            maxConnections: try file.maxConnections,
            maxConnectionsPerKey: try file.maxConnectionsPerKey,
            nullService: self.nullService || file.nullService == true,
            dataDirectory: dataDirectory,
            storeKind: try file.storeKind, postgresURL: file.store?.postgresURL,
            apps: try (file.apps ?? []).map { try PushingApp($0, base: base) },
            durableIntents: file.dispatch?.durableIntents,
            intentLease: .milliseconds(intentLeaseMs.map(Int64.init) ?? max(1_000, file.dispatch?.intentLeaseMilliseconds ?? 30_000)),
            pushToStartRetention: try file.pushToStartRetention,
            ops: try opsAddress(file: file.ops, defaultPort: 9090),
            admission: try file.admissionLimits,
            quotaDefaults: try QuotaConfiguration.defaults(section: file.quotas),
            seedApps: try (file.apps ?? []).map { try RegistrySeed.app($0, base: base) },
            priorityBudgets: try QuotaConfiguration.priorityBudgets(section: file.quotas, apps: file.apps ?? [])
        )
    }
}

/// `serve --store`: the embedded SQLite file (default, durable, one node), memory
/// (development, tests and benchmarks), or PostgreSQL (several nodes).
enum StoreKind: String, ExpressibleByArgument, CaseIterable {
    case sqlite, memory, postgres
}
