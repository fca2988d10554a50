import ArgumentParser
import Foundation
import LiveRelayAPNs
import LiveRelayMockAPNs
import Logging
import NIOPosix
import ServiceLifecycle

/// `liverelay mock-apns`: an APNs stand-in for development, CI and load tests.
///
/// Flags cover the common cases; `--config` takes the same settings as JSON
/// (flags win), for setups with several apps or many injected errors.
struct MockAPNsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-apns",
        abstract: "Run a mock APNs: HTTP/2 over TLS, validating Live Activity pushes like APNs.",
        discussion: """
            Without --cert/--key a self-signed certificate for localhost and 127.0.0.1 is generated and its PEM
            written to --cert-out (printed), for clients to trust. An app is BUNDLE,TEAM,KEYID,KEYFILE where
            KEYFILE is the public key PEM or the .p8 itself (only its public half is used).

            --config FILE (JSON): {"host", "port", "cert_file", "key_file", "cert_out",
            "apps": [{"bundle_id", "team_id", "key_id", "key_file"}], "latency_ms", "latency_random_ms": [min, max],
            "errors": {"TooManyRequests": 0.05}, "seed", "unregistered": {"<token>": <timestamp ms>},
            "token_bundles": {"<token>": "<bundle id>"}, "goaway_after", "drop_after", "alternate_connection_faults",
            "slow": {"rate", "ms": [min, max]}, "outage": {"every_s", "lasting_s"}, "max_streams",
            "limit_streams_until_authenticated", "record", "recording_capacity", "environment", "max_channels_per_app"}.
            Broadcast channels (iOS 18) are served on the same port: /1/apps/<bundle>/channels and all-channels,
            and /4/broadcasts/apps/<bundle>; a broadcast reaches the tokens whose push-to-start named its channel.
            SIGTERM or SIGINT: GOAWAY, in-flight streams finish (at most 2 s), exit.
            """
    )

    @Option(help: "A JSON config file (keys above); flags override it.")
    var config: String?
    @Option(help: "Address to listen on (default 127.0.0.1).")
    var host: String?
    @Option(help: "Port (default 2197; 0 picks a free one).")
    var port: Int?
    @Option(help: "Server certificate chain PEM file.")
    var cert: String?
    @Option(help: "Server private key PEM file.")
    var key: String?
    @Option(help: "Where to write a generated certificate's PEM (default <tmp>/liverelay-mock-apns-<port>.pem).")
    var certOut: String?
    @Option(help: "An app: BUNDLE,TEAM,KEYID,KEYFILE (repeatable).")
    var app: [String] = []
    @Option(help: "Fixed delay before each answer, in milliseconds.")
    var latencyMs: Double?
    @Option(help: "An extra random delay MIN-MAX milliseconds, e.g. 0-20.")
    var latencyRandomMs: String?
    @Option(
        help: """
            Answer REASON instead of 200 for a fraction of valid pushes: REASON=RATE, e.g. TooManyRequests=0.05; \
            REASON=RATE,retry-after=SECONDS adds a retry-after header, which APNs never sends (repeatable).
            """)
    var error: [String] = []
    @Option(help: "A slow tail: this fraction of answers waits an extra --slow-ms.")
    var slowRate: Double?
    @Option(help: "The slow tail's extra delay MIN-MAX milliseconds, e.g. 200-1500.")
    var slowMs: String?
    @Option(help: "An outage every N seconds: every valid push is answered 503 ServiceUnavailable for --outage-s.")
    var outageEveryS: Double?
    @Option(help: "How long each outage lasts, in seconds.")
    var outageS: Double?
    @Flag(help: "With --goaway-after and --drop-after: odd-numbered connections get the GOAWAY, even-numbered ones the drop.")
    var alternateConnectionFaults = false
    @Option(help: "Seed for injected errors and random latency.")
    var seed: UInt64?
    @Option(help: "A token answered 410 Unregistered: TOKEN or TOKEN=TIMESTAMP_MS (repeatable).")
    var unregistered: [String] = []
    @Option(help: "Send GOAWAY on each connection after N streams.")
    var goawayAfter: Int?
    @Option(help: "Close each connection abruptly (no GOAWAY) when stream N+1 arrives.")
    var dropAfter: Int?
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS (default 1000).")
    var maxStreams: Int?
    @Flag(help: "Allow 1 stream per connection until its first valid provider token, as APNs does.")
    var limitStreamsUntilAuthenticated = false
    @Option(help: "Append every request and its answer to FILE as JSON lines (JWT signatures redacted).")
    var record: String?
    @Option(
        help: "Requests kept in memory (the most recent; default 10000). 0 with no --record: record nothing, only count (a benchmark mock)."
    )
    var recordingCapacity: Int?
    @Option(help: "The APNs environment this mock plays, sandbox (default) or production: its channels belong to it.")
    var environment: String?
    @Option(help: "Broadcast channels per app before a create is refused (default 10000, APNs's limit).")
    var maxChannelsPerApp: Int?
    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    func run() async throws {
        let level = logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "liverelay.mock-apns")
        do {
            let (configuration, certOut) = try resolve()
            let server = try await MockAPNsServer.start(
                configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
            writeStandardOutput("mock APNs listening on \(configuration.host):\(server.port)")
            if server.certificateWasGenerated {
                let path =
                    certOut
                    ?? FileManager.default.temporaryDirectory
                    .appendingPathComponent("liverelay-mock-apns-\(server.port).pem").path
                try Data(server.certificatePEM.utf8).write(to: URL(fileURLWithPath: path))
                writeStandardOutput("certificate (self-signed, trust it as the CA): \(path)")
            }
            if configuration.apps.isEmpty {
                writeStandardOutput("warning: no --app: every push will be refused with 403 InvalidProviderToken")
            }
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            try await group.run()
        } catch let error as CLIError {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode.failure
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }

    /// The JSON file's shape (snake_case keys, every field optional).
    struct File: Decodable {
        struct App: Decodable {
            var bundle_id: String
            var team_id: String
            var key_id: String
            var key_file: String
        }
        var host: String?
        var port: Int?
        var cert_file: String?
        var key_file: String?
        var cert_out: String?
        var apps: [App]?
        var latency_ms: Double?
        var latency_random_ms: [Double]?
        var errors: [String: Double]?
        var seed: UInt64?
        var unregistered: [String: Int64]?
        var token_bundles: [String: String]?
        var goaway_after: Int?
        var drop_after: Int?
        var alternate_connection_faults: Bool?
        struct Slow: Decodable {
            var rate: Double
            var ms: [Double]
        }
        var slow: Slow?
        struct Outage: Decodable {
            var every_s: Double
            var lasting_s: Double
        }
        var outage: Outage?
        var max_streams: Int?
        var limit_streams_until_authenticated: Bool?
        var record: String?
        var recording_capacity: Int?
        var environment: String?
        var max_channels_per_app: Int?
    }

    func resolve() throws -> (MockAPNsConfiguration, certOut: String?) {
        var file = File()
        var base = FileManager.default.currentDirectoryPath
        if let config {
            let path = DevSetup.absolute(config)
            base = URL(fileURLWithPath: path).deletingLastPathComponent().path
            do {
                file = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw CLIError("\(path): \(error)")
            }
        }
        func fromFile(_ p: String?) -> String? { p.map { DevSetup.absolute($0, relativeTo: base) } }

        var c = MockAPNsConfiguration(host: host ?? file.host ?? "127.0.0.1", port: port ?? file.port ?? 2197)
        if let certPath = cert ?? fromFile(file.cert_file) {
            guard let keyPath = key ?? fromFile(file.key_file) else { throw CLIError("--cert needs --key") }
            c.certificatePEM = try readText(certPath, what: "certificate")
            c.privateKeyPEM = try readText(keyPath, what: "private key")
        }
        var apps = try (file.apps ?? []).map {
            try makeApp(bundleID: $0.bundle_id, teamID: $0.team_id, keyID: $0.key_id, keyFile: fromFile($0.key_file)!)
        }
        for spec in app {
            let parts = spec.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 4, parts.allSatisfy({ !$0.isEmpty }) else {
                throw CLIError("--app \(spec): expected BUNDLE,TEAM,KEYID,KEYFILE")
            }
            apps.append(try makeApp(bundleID: parts[0], teamID: parts[1], keyID: parts[2], keyFile: DevSetup.absolute(parts[3])))
        }
        c.apps = apps

        var latency = MockAPNsLatency()
        if let ms = latencyMs ?? file.latency_ms { latency.fixed = .microseconds(Int64(ms * 1000)) }
        if let spec = latencyRandomMs {
            let bounds = spec.split(separator: "-").compactMap { Double($0) }
            guard bounds.count == 2, bounds[0] >= 0, bounds[0] <= bounds[1] else {
                throw CLIError("--latency-random-ms \(spec): expected MIN-MAX")
            }
            latency.random = .microseconds(Int64(bounds[0] * 1000)) ... .microseconds(Int64(bounds[1] * 1000))
        } else if let bounds = file.latency_random_ms {
            guard bounds.count == 2, bounds[0] >= 0, bounds[0] <= bounds[1] else {
                throw CLIError("latency_random_ms: expected [min, max]")
            }
            latency.random = .microseconds(Int64(bounds[0] * 1000)) ... .microseconds(Int64(bounds[1] * 1000))
        }
        if let rate = slowRate ?? file.slow?.rate {
            let bounds = slowMs.map { $0.split(separator: "-").compactMap { Double($0) } } ?? file.slow?.ms ?? []
            guard (0...1).contains(rate), bounds.count == 2, bounds[0] >= 0, bounds[0] <= bounds[1] else {
                throw CLIError("--slow-rate needs RATE in 0...1 and --slow-ms MIN-MAX (slow: {rate, ms: [min, max]})")
            }
            latency.slow = MockAPNsSlowAnswers(
                rate: rate, range: .microseconds(Int64(bounds[0] * 1000)) ... .microseconds(Int64(bounds[1] * 1000)))
        }
        c.latency = latency
        if let every = outageEveryS ?? file.outage?.every_s {
            guard let lasting = outageS ?? file.outage?.lasting_s, every > 0, lasting >= 0, lasting <= every else {
                throw CLIError("--outage-every-s needs --outage-s, at most as long (outage: {every_s, lasting_s})")
            }
            c.outages = MockAPNsOutages(period: .milliseconds(Int64(every * 1000)), duration: .milliseconds(Int64(lasting * 1000)))
        }

        var errors = (file.errors ?? [:]).sorted { $0.key < $1.key }.map { MockAPNsInjectedError(reason: $0.key, rate: $0.value) }
        for spec in error { errors.append(try Self.injectedError(spec)) }
        c.injectedErrors = errors
        if let seed = seed ?? file.seed { c.randomSeed = seed }

        var dead = file.unregistered ?? [:]
        for spec in unregistered {
            let parts = spec.split(separator: "=")
            guard (1...2).contains(parts.count),
                let timestamp = parts.count == 2 ? Int64(parts[1]) : Int64(Date().timeIntervalSince1970 * 1000)
            else { throw CLIError("--unregistered \(spec): expected TOKEN or TOKEN=TIMESTAMP_MS") }
            dead[String(parts[0])] = timestamp
        }
        c.unregisteredTokens = dead
        c.deviceTokenBundles = file.token_bundles ?? [:]
        c.goAwayAfterStreams = goawayAfter ?? file.goaway_after
        c.dropConnectionAfterStreams = dropAfter ?? file.drop_after
        c.alternateConnectionFaults = alternateConnectionFaults || file.alternate_connection_faults == true
        c.maxConcurrentStreams = maxStreams ?? file.max_streams ?? 1000
        c.limitStreamsUntilAuthenticated = limitStreamsUntilAuthenticated || file.limit_streams_until_authenticated == true
        c.recordFile = record.map { DevSetup.absolute($0) } ?? fromFile(file.record)
        c.recordingCapacity = recordingCapacity ?? file.recording_capacity ?? 10_000
        if let name = environment ?? file.environment {
            guard let parsed = APNsEnvironment(rawValue: name) else {
                throw CLIError("--environment \(name): expected sandbox or production")
            }
            c.environment = parsed
        }
        c.maxChannelsPerApp = maxChannelsPerApp ?? file.max_channels_per_app ?? APNsBroadcast.maxChannelsPerApp
        guard c.maxChannelsPerApp >= 0 else { throw CLIError("--max-channels-per-app must be at least 0") }
        for value in [c.goAwayAfterStreams, c.dropConnectionAfterStreams].compactMap({ $0 }) where value < 1 {
            throw CLIError("--goaway-after and --drop-after must be at least 1")
        }
        return (c, certOut.map { DevSetup.absolute($0) } ?? fromFile(file.cert_out))
    }

    /// `REASON=RATE` or `REASON=RATE,retry-after=SECONDS`.
    static func injectedError(_ spec: String) throws -> MockAPNsInjectedError {
        let fields = spec.split(separator: ",")
        let parts = fields.first?.split(separator: "=") ?? []
        guard parts.count == 2, let rate = Double(parts[1]), (0...1).contains(rate), fields.count <= 2 else {
            throw CLIError("--error \(spec): expected REASON=RATE[,retry-after=SECONDS] with RATE in 0...1")
        }
        var retryAfter: Int?
        if fields.count == 2 {
            let option = fields[1].split(separator: "=")
            guard option.count == 2, option[0] == "retry-after", let seconds = Int(option[1]), seconds >= 0 else {
                throw CLIError("--error \(spec): expected REASON=RATE[,retry-after=SECONDS] with SECONDS >= 0")
            }
            retryAfter = seconds
        }
        return MockAPNsInjectedError(reason: String(parts[0]), rate: rate, retryAfterSeconds: retryAfter)
    }

    private func readText(_ path: String, what: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CLIError("cannot read the \(what) file \(path)")
        }
    }

    /// Accepts the public key PEM or the .p8 (whose public half is derived), so one file serves both sides.
    private func makeApp(bundleID: String, teamID: String, keyID: String, keyFile: String) throws -> MockAPNsApp {
        let text = try readText(keyFile, what: "key")
        let publicKey: String
        if text.contains("PRIVATE KEY") {
            do {
                publicKey = try APNsSigningKey(contentsOfFile: keyFile, keyID: keyID, teamID: teamID).publicKeyPEM
            } catch {
                throw CLIError("\(keyFile): not a P-256 .p8 key (\(error))")
            }
        } else {
            publicKey = text
        }
        return MockAPNsApp(bundleID: bundleID, teamID: teamID, keyID: keyID, publicKeyPEM: publicKey)
    }
}
