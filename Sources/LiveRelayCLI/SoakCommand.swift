import ArgumentParser
import Foundation
import LiveRelayAPNs
import LiveRelayAPNsClient
import LiveRelayActivities
import LiveRelayBench
import LiveRelayClient
import LiveRelayComposition
import LiveRelayDispatch
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayMockAPNs
import LiveRelayPushOutlet
import LiveRelayServer
import LiveRelayStore
import LiveRelayStorePostgres
import LiveRelayStoreSQLite
import LiveRelayTLS
import Logging
import Metrics
import NIOCore
import NIOPosix
import ServiceLifecycle

/// `liverelay soak`: the APNs fault soak (docs/BENCHMARKS.md, "Fault soak").
///
/// The server `serve` runs, built by the same ``ServerBuilder`` in this process
/// (RPC server over TLS, the tenant registry, the activity service with its
/// admission and quotas, durable dispatch intents on the store given, the
/// dispatcher and the HTTP/2 APNs client), pushing to an in-process mock APNs
/// with every fault it knows switched on, loaded through `LiveRelayClient` by
/// ``SoakDriver``. One process, so the soak needs nothing installed and its
/// peak RSS is one reading; it bounds server, mock and load generator together.
struct Soak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "APNs fault soak: push through the whole server to a mock APNs injecting every fault, and check the account.",
        discussion: """
            Runs activity lifecycles (RegisterToken, StartActivity, UpdateActivity, EndActivity, all waiting for \
            delivery) over several apps and two signing keys until --pushes pushes are targeted. The mock answers \
            500, 503, 429 with and without retry-after, 403 ExpiredProviderToken, 400 BadDeviceToken and 410 \
            (Unregistered, with its timestamp) at small rates, answers a share of the tokens 410, sends GOAWAY or \
            drops the connection abruptly after some thousand streams, answers a slow tail late, and goes down \
            (503 to everything) for --outage-s every --outage-every-s. Each push expires --lifetime-s after its \
            call, so outages expire some.

            Checks: every call succeeded and its reply adds up (targeted = delivered + failed + pruned + superseded \
            + expired); the replies add up to the dispatcher's totals; nothing is left queued; no push reached the \
            mock more than --expiry-allowance-ms after its apns-expiration; the peak RSS stays under --max-rss-mb; \
            every fault happened. Prints the figures (--json: as JSON on stdout, the table on stderr) and exits 1 \
            on any violation. scripts/soak.sh runs it on a release build. --store sqlite runs the server on SQLite \
            in a temporary directory, --store postgres on PostgreSQL in a throwaway schema (dropped at the end).
            """
    )

    @Option(help: "Pushes to target, at least.") var pushes = 1_000_000
    @Option(help: "Apps (their pushes go by two signing keys, so two routes).") var apps = 4
    @Option(help: "Activity lifecycles running at once.") var activitiesInFlight = 32
    @Option(help: "Update tokens per activity, MIN-MAX (a draw per activity).") var tokens = "20-200"
    @Option(help: "UpdateActivity calls per activity (one at a time; two at a time in every fourth, so newer ones supersede older ones).")
    var updates = 20
    @Option(help: "Push-to-start tokens each StartActivity is aimed at.") var startTokens = 5
    @Option(help: "Seconds a push is worth sending after its call, MIN-MAX (a draw per call).") var lifetimeS = "1-8"
    @Option(help: "An APNs outage (503 to everything) every N seconds.") var outageEveryS = 20.0
    @Option(help: "How long each outage lasts, in seconds.") var outageS = 2.0
    @Option(help: "GOAWAY after this many streams, on odd-numbered connections.") var goawayAfter = 3_000
    @Option(help: "An abrupt close (no GOAWAY) when this many streams are passed, on even-numbered connections.")
    var dropAfter = 2_500
    @Option(
        help:
            "memory, sqlite (in a temporary directory, removed at the end) or postgres (--postgres-url or $LIVERELAY_POSTGRES_URL; its tables are the soak's to write)."
    )
    var store: StoreKind = .memory
    @Option(help: "For --store postgres (default: $LIVERELAY_POSTGRES_URL).") var postgresURL: String?
    @Option(help: "The bound on the process's peak RSS, in MiB.") var maxRssMb = 256
    @Option(
        help: """
            How long after its apns-expiration a push may reach the mock, in milliseconds: the sender's last check \
            before the wire to the mock reading the stream, one event-loop turn each side.
            """)
    var expiryAllowanceMs = 100
    @Option(help: "Seed of the mock's faults and the plan's choices.") var seed: UInt64 = 0x50A4
    @Option(help: "Log level of the server's components (their warnings about injected faults are expected).")
    var logLevel: Logger.Level = .critical
    @Flag(help: "Print the report as JSON on stdout (the table goes to stderr).") var json = false
    @Flag(help: "No progress lines.") var quiet = false

    func validate() throws {
        guard pushes > 0, apps > 0, activitiesInFlight > 0, updates >= 0, startTokens > 0, goawayAfter > 0, dropAfter > 0 else {
            throw ValidationError(
                "--pushes, --apps, --activities-in-flight, --start-tokens, --goaway-after and --drop-after must be above 0")
        }
        _ = try range(tokens, "--tokens")
        _ = try range(lifetimeS, "--lifetime-s")
        guard outageEveryS > 0, outageS >= 0, outageS < outageEveryS else {
            throw ValidationError("--outage-s must be shorter than --outage-every-s")
        }
    }

    private func range(_ text: String, _ name: String) throws -> ClosedRange<Int> {
        let bounds = text.split(separator: "-").compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] > 0, bounds[0] <= bounds[1] else { throw ValidationError("\(name) \(text): expected MIN-MAX") }
        return bounds[0]...bounds[1]
    }

    func run() async throws {
        // Before anything makes a counter: the dispatcher's and the APNs client's counters are read at the end.
        let metrics = SoakMetrics()
        MetricsSystem.bootstrap(metrics)
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let report = try await soak(metrics: metrics)
        if json {
            writeStandardError(report.table())
            writeStandardOutput(report.json())
        } else {
            writeStandardOutput(report.table())
        }
        if !report.passed { throw ExitCode.failure }
    }

    /// The injected faults: rates small enough that most pushes get through, and
    /// BadDeviceToken far under the mass-pruning guard's threshold (half of an app's answers).
    static let injectedErrors = [
        MockAPNsInjectedError(reason: "InternalServerError", rate: 0.004),
        MockAPNsInjectedError(reason: "ServiceUnavailable", rate: 0.004),
        MockAPNsInjectedError(reason: "TooManyRequests", rate: 0.004),
        MockAPNsInjectedError(reason: "TooManyRequests", rate: 0.002, retryAfterSeconds: 1),
        MockAPNsInjectedError(reason: "ExpiredProviderToken", rate: 0.002),
        MockAPNsInjectedError(reason: "BadDeviceToken", rate: 0.002),
        MockAPNsInjectedError(reason: "Unregistered", rate: 0.001),
    ]
    static let latency = MockAPNsLatency(
        random: .zero ... .milliseconds(2), slow: MockAPNsSlowAnswers(rate: 0.01, range: .milliseconds(100) ... .milliseconds(1500)))

    private func soak(metrics: SoakMetrics) async throws -> SoakReport {
        let logger = Logger(label: "liverelay.soak")
        let group = MultiThreadedEventLoopGroup.singleton
        let appIDs = (0..<apps).map { "soak.app\($0)" }
        let plan = SoakPlan(
            appIDs: appIDs, targetPushes: pushes, activitiesInFlight: activitiesInFlight, tokensPerActivity: try range(tokens, "--tokens"),
            startTokens: startTokens, updates: updates, seed: seed)
        let lifetimes = try range(lifetimeS, "--lifetime-s")

        // Two signing keys: apps 0, 2, ... push with the first, 1, 3, ... with the second.
        let keys = try (0..<min(2, apps)).map { try APNsSigningKey.generate(keyID: "SOAKKEY00\($0)", teamID: "SOAKTEAM01") }
        let mockApps = try appIDs.enumerated().map { i, id in
            let key = keys[i % keys.count]
            return MockAPNsApp(bundleID: id, teamID: key.teamID, keyID: key.keyID, publicKeyPEM: try key.publicKeyPEM)
        }
        let outages = MockAPNsOutages(
            period: .milliseconds(Int64(outageEveryS * 1000)), duration: .milliseconds(Int64(outageS * 1000)),
            firstAfter: .milliseconds(Int64(min(4, outageEveryS) * 1000)))
        // The mock stands for APNs, another machine: event loops of its own, so the time it
        // stamps on an arriving push is not held up by the server's work on the shared loops.
        let mockGroup = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        defer { mockGroup.shutdownGracefully { _ in } }
        let mock = try await MockAPNsServer.start(
            configuration: MockAPNsConfiguration(
                apps: mockApps, limitStreamsUntilAuthenticated: true, latency: Self.latency, injectedErrors: Self.injectedErrors,
                randomSeed: seed, unregisteredTokens: plan.unregisteredTokens(nowMilliseconds: SystemClock().now().milliseconds),
                goAwayAfterStreams: goawayAfter, dropConnectionAfterStreams: dropAfter,
                alternateConnectionFaults: true, outages: outages, recordingCapacity: 0),
            group: mockGroup, logger: logger)

        // A store of the soak's own, removed at the end: a temporary directory for SQLite,
        // a throwaway schema for PostgreSQL.
        var directory: String?
        var selection = StoreSelection(kind: store, postgresURL: postgresURL)
        switch store {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-soak-\(getpid())").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            directory = path
            selection.dataDirectory = path
        case .postgres:
            selection.postgresSchema = "liverelay_soak_\(getpid())"
        case .memory:
            break
        }
        defer { if let directory { try? FileManager.default.removeItem(atPath: directory) } }

        let certificate = try SelfSignedCertificate.generate(commonName: "localhost", subjectAltNames: ["localhost", "127.0.0.1"])
        let apiKey = APIKeyAuthenticator.generateKey(apps: .all, allowedMethods: Set(LiveRelayMethod.allCases), label: "soak")
        var server = ServerDescription()
        server.port = 0
        server.tls = try TLSContext(
            configuration: .makeServerConfiguration(
                certificateChain: .string(certificate.certificatePEM), privateKey: .string(certificate.privateKeyPEM)))
        server.store = selection
        server.mockAPNs = mock
        server.logger = logger
        // The apps as an operator would register them: each with a stored key, pushing to the mock.
        server.seedApps = try appIDs.enumerated().map { i, id in
            let key = keys[i % keys.count]
            return RegisteredApp(
                id: id, bundleID: id,
                credentials: RegisteredCredentials(
                    teamID: key.teamID, keyID: key.keyID, endpoint: "127.0.0.1:\(mock.port)", keySource: .stored(pem: try key.pkcs8PEM),
                    trustPEM: mock.certificatePEM),
                source: .seed)
        }
        server.seedKeys = [try RegisteredAPIKey(seed: apiKey.record)]
        let clock = SystemClock()
        server.pushSink = { dispatcher in
            ShortLivedPushes(
                dispatcher: dispatcher, clock: clock,
                lifetimes: Int64(lifetimes.lowerBound) * 1000...Int64(lifetimes.upperBound) * 1000, seed: seed)
        }
        let built = try await ServerBuilder.build(server)
        guard let dispatcher = built.dispatcher else { throw CLIError("the soak's server has no dispatcher") }
        let serviceGroup = built.serviceGroup(logger: logger)
        let running = Task { try await serviceGroup.run() }
        let port = try await built.server.boundAddress.port ?? 0

        let description =
            "\(formatCount(Double(pushes))) pushes, \(apps) apps (2 signing keys), \(activitiesInFlight) activities at once, "
            + "\(tokens) tokens each, \(updates) updates, lifetimes \(lifetimeS) s, \(built.storeDescription); faults: "
            + Self.injectedErrors.map {
                "\($0.status)\($0.retryAfterSeconds.map { "+retry-after \($0) s" } ?? "") \($0.reason) \($0.rate * 100)%"
            }
            .joined(separator: ", ")
            + ", 410 for \(plan.unregisteredShare * 100)% of the tokens, GOAWAY after \(goawayAfter) streams "
            + "and drops after \(dropAfter) on alternate connections, \(Self.latency.slow!.rate * 100)% of answers "
            + "100-1500 ms late, outages (503 to everything) of \(outageS) s every \(outageEveryS) s"
        if !quiet { writeStandardError("soak: \(description)") }
        let tls = TLSConfiguration(
            trustRoots: .pem(.string(certificate.certificatePEM)), certificateVerification: .fullVerification,
            serverHostname: "127.0.0.1")
        let clientConfiguration = LiveRelayClient.Configuration(
            host: "127.0.0.1", port: port, tls: tls, apiKey: apiKey.plaintext, clientName: "liverelay-soak")
        let progress: (@Sendable (SoakCalls) -> Void)? = quiet ? nil : Self.progressLine
        let driver = SoakDriver(plan: plan, client: clientConfiguration, eventLoopGroup: group, logger: benchLogger, progress: progress)
        let calls = await driver.run()

        // Every call waited for delivery, so nothing should be left; give stragglers a bounded moment all the same.
        let deadline = ContinuousClock.now + .seconds(60)
        while dispatcher.unfinishedCount > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let figures = serverFigures(dispatcher: dispatcher, appIDs: appIDs, mock: mock.counters, metrics: metrics)

        await serviceGroup.triggerGracefulShutdown()
        try await running.value
        if store == .postgres { try await PostgresActivityStore.dropSchema(configuration: try selection.postgresConfiguration()) }
        return SoakReport(
            description: description, targetPushes: pushes, calls: calls, server: figures,
            rssBoundBytes: UInt64(maxRssMb) * 1_048_576, expiryAllowanceMilliseconds: Int64(expiryAllowanceMs))
    }

    @Sendable private static func progressLine(_ calls: SoakCalls) {
        let p = calls.pushes
        let targeted = formatCount(Double(p.targeted)), delivered = formatCount(Double(p.delivered))
        writeStandardError(
            "soak: \(targeted) pushes targeted, \(delivered) delivered, \(calls.lifecycles) lifecycles done, "
                + "\(calls.errorCount) failed calls, \(calls.notAddingUp) not adding up")
    }

    private func serverFigures(dispatcher: Dispatcher, appIDs: [String], mock: MockAPNsCounters, metrics: SoakMetrics) -> SoakServerFigures
    {
        var f = SoakServerFigures()
        for id in appIDs {
            guard let c = dispatcher.counters(appID: id) else { continue }
            f.enqueued += c.enqueued
            f.delivered += c.delivered
            f.pruned += c.pruned
            f.superseded += c.superseded
            f.expired += c.expired
            f.failures.merge(c.failures, uniquingKeysWith: +)
            f.attempts += c.attempts
            f.retries += c.retries
            f.unfinished += c.unfinished
            f.inFlight += c.inFlight
            f.appSuspensions += c.credentialRejections
        }
        f.unfinished = max(f.unfinished, dispatcher.unfinishedCount)
        f.circuitOpenings = metrics.total("liverelay_dispatch_circuit_transitions_total", where: ("to", "open"))
        f.apnsAnswers = metrics.totals("liverelay_apns_responses_total", by: "status").filter { $0.value > 0 }
        f.transportErrors = metrics.totals("liverelay_apns_transport_errors_total", by: "reason").filter { $0.value > 0 }
        f.mock.connections = mock.connectionsAccepted
        f.mock.streams = mock.streamsReceived
        f.mock.answers = Dictionary(uniqueKeysWithValues: mock.responsesByStatus.map { (String($0.key), $0.value) })
        f.mock.goAways = mock.goAwaysSent
        f.mock.drops = mock.connectionsDropped
        f.mock.receivedAfterExpiration = mock.receivedAfterExpiration
        f.mock.mostMillisecondsPastExpiration = mock.mostMillisecondsPastExpiration
        let status = { (code: Int) in mock.responsesByStatus[code] ?? 0 }
        f.faults = [
            "500 InternalServerError": status(500),
            "503 (injected and outages)": status(503),
            "429 TooManyRequests": status(429),
            "429 with retry-after": mock.responsesWithRetryAfter,
            "403 ExpiredProviderToken": status(403),
            "400 BadDeviceToken": status(400),
            "410 Unregistered": status(410),
            "GOAWAY": mock.goAwaysSent,
            "abrupt connection drop": mock.connectionsDropped,
            "slow answer": mock.slowAnswers,
            "circuit breaker opened": f.circuitOpenings,
            "push expired": f.expired,
        ]
        f.peakRSSBytes = processMemory(pid: getpid())?.peak
        return f
    }
}

/// Gives every batch a short life, in place of its activity's (8 hours, or 4
/// after its end): a soak of minutes needs pushes that expire in seconds, so that
/// outages and back-offs make some expire. Rewrites `expiresAt` (which the
/// dispatcher enforces) and `apns-expiration` (which the mock checks arrivals
/// against) together, to the same whole second, before the dispatcher sees the
/// batch; everything else passes through to the dispatcher untouched.
final class ShortLivedPushes: PushSink, @unchecked Sendable {
    private let dispatcher: Dispatcher
    private let clock: any WallClock
    private let lifetimes: ClosedRange<Int64>
    private let lock = NSLock()
    private var state: UInt64

    /// - Parameter lifetimes: milliseconds after the call, a uniform draw per batch.
    init(dispatcher: Dispatcher, clock: any WallClock, lifetimes: ClosedRange<Int64>, seed: UInt64) {
        self.dispatcher = dispatcher
        self.clock = clock
        self.lifetimes = lifetimes
        self.state = seed
    }

    func admit(appID: String) -> PushAdmission { dispatcher.admit(appID: appID) }

    var isShuttingDown: Bool { dispatcher.isShuttingDown }

    func enqueue(_ batch: PushBatch, options: EnqueueOptions, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
        var batch = batch
        let lifetime = lifetimes.lowerBound + Int64(nextRandom() % UInt64(lifetimes.upperBound - lifetimes.lowerBound + 1))
        // Up to a whole second, since the header has no finer unit.
        let expiry = UnixTime(seconds: (clock.now().milliseconds + lifetime + 999) / 1000)
        batch.expiresAt = expiry
        batch.headers.expiration = expiry.seconds
        return dispatcher.enqueue(batch, options: options, on: eventLoop)
    }

    func enqueue(_ batch: PushBatch, on eventLoop: any EventLoop) -> EventLoopFuture<EnqueueResult> {
        enqueue(batch, options: EnqueueOptions(), on: eventLoop)
    }

    /// SplitMix64.
    private func nextRandom() -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A swift-metrics backend that only adds up counters, so the soak reads what an
/// operator's dashboard would (circuit-breaker openings, APNs answers by status)
/// instead of reaching into the components. Recorders, meters and timers are dropped.
final class SoakMetrics: MetricsFactory, @unchecked Sendable {
    final class Count: CounterHandler, @unchecked Sendable {
        let label: String
        let dimensions: [(String, String)]
        private let lock = NSLock()
        private var value: Int64 = 0

        init(label: String, dimensions: [(String, String)]) {
            self.label = label
            self.dimensions = dimensions
        }

        func increment(by amount: Int64) {
            lock.lock()
            value += amount
            lock.unlock()
        }

        func reset() {
            lock.lock()
            value = 0
            lock.unlock()
        }

        var current: Int64 {
            lock.lock()
            defer { lock.unlock() }
            return value
        }
    }

    private let lock = NSLock()
    private var counters: [Count] = []

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        let counter = Count(label: label, dimensions: dimensions)
        lock.lock()
        counters.append(counter)
        lock.unlock()
        return counter
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { NOOPMetricsHandler.instance }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { NOOPMetricsHandler.instance }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    private func matching(_ label: String) -> [Count] {
        lock.lock()
        defer { lock.unlock() }
        return counters.filter { $0.label == label }
    }

    /// The sum of `label`'s counters whose dimension `name` has `value`.
    func total(_ label: String, where dimension: (name: String, value: String)) -> Int {
        Int(matching(label).filter { $0.dimensions.contains { $0 == dimension } }.reduce(0) { $0 + $1.current })
    }

    /// `label`'s counters added up by the value of their dimension `name`.
    func totals(_ label: String, by name: String) -> [String: Int] {
        var out: [String: Int] = [:]
        for counter in matching(label) {
            guard let value = counter.dimensions.first(where: { $0.0 == name })?.1 else { continue }
            out[value, default: 0] += Int(counter.current)
        }
        return out
    }
}
