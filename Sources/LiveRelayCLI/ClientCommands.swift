import ArgumentParser
import Foundation
import LiveRelayClient
import LiveRelayMessages
import Logging

/// Where a command reads its API key from when `--api-key` is not given, and
/// how to get one: a different variable for the admin commands, so that one
/// shell can hold a tenant key and an admin key.
protocol APIKeyVariable {
    static var name: String { get }
    static var origin: String { get }
}

/// The activity and channel commands' key.
enum TenantKeyVariable: APIKeyVariable {
    static let name = "LIVERELAY_API_KEY"
    static let origin = "liverelay serve prints one on its first start"
}

/// The admin commands' key.
enum AdminKeyVariable: APIKeyVariable {
    static let name = "LIVERELAY_ADMIN_KEY"
    static let origin = "`liverelay admin bootstrap` mints one"
}

/// The activity and channel commands' options.
typealias ConnectionOptions = ServerConnectionOptions<TenantKeyVariable>
/// The admin commands' options.
typealias AdminConnectionOptions = ServerConnectionOptions<AdminKeyVariable>

/// How to reach the server; shared by every RPC subcommand. `Key` is where the
/// key comes from without `--api-key`, so that each command's help names the
/// variable it reads.
struct ServerConnectionOptions<Key: APIKeyVariable>: ParsableArguments {
    @Option(help: "The server's host name or IP address.")
    var host = "127.0.0.1"

    @Option(help: "The server's port.")
    var port = 7443

    @Option(
        help: ArgumentHelp(
            "PEM file of the CA (or self-signed certificate) to trust.",
            discussion:
                "Default: \(DevSetup.defaultDataDirectory)/cert.pem when it exists (what `liverelay serve` made), else the system trust store."
        )
    )
    var caFile: String?

    @Option(help: ArgumentHelp("The API key.", discussion: "Default: the \(Key.name) environment variable."))
    var apiKey: String?

    @Option(help: "Seconds to wait for the reply.")
    var timeout: Double = 10

    @Flag(help: "Speak plain TCP, for a server started without TLS (tests, benchmarks).")
    var plaintext = false

    @Option(help: "PEM certificate chain to present, for a server that requires client certificates (mTLS); needs --client-key.")
    var clientCert: String?

    @Option(help: "PEM private key of --client-cert.")
    var clientKey: String?

    func validate() throws {
        guard (clientCert == nil) == (clientKey == nil) else {
            throw ValidationError("--client-cert and --client-key go together")
        }
        if plaintext, clientCert != nil { throw ValidationError("--client-cert needs TLS (not --plaintext)") }
    }

    /// Runs one call and prints its reply, or the failure and the exit code that names its status.
    /// The key is `--api-key`, or else the environment variable `Key` names.
    func run<Reply: JSONRepresentable & Sendable>(
        _ body: @Sendable (LiveRelayClient, Duration) async throws(LiveRelayClientError) -> Reply
    ) async throws {
        let reply = try await withClient(body)
        writeStandardOutput(reply.json.rendered())
    }

    /// Runs `body` with a client of this server; a call's failure is printed on stderr and becomes
    /// the exit code that names its status.
    func withClient<Result: Sendable>(
        _ body: @Sendable (LiveRelayClient, Duration) async throws(LiveRelayClientError) -> Result
    ) async throws -> Result {
        guard let apiKey = self.apiKey ?? ProcessInfo.processInfo.environment[Key.name], !apiKey.isEmpty else {
            FileHandle.standardError.write(Data("error: no API key: pass --api-key or set \(Key.name) (\(Key.origin))\n".utf8))
            throw ExitCode.failure
        }
        var logger = Logger(label: "liverelay.cli")
        logger.logLevel = .critical
        let configuration = LiveRelayClient.Configuration(
            host: self.host, port: self.port, tls: self.tlsConfiguration(), apiKey: apiKey, clientName: "liverelay-cli",
            connections: 1,
            // Start, update and end always carry an idempotency key here, so resending them after a lost connection is safe.
            retryPolicy: LiveRelayClient.RetryPolicy(maxAttempts: 3, retryIdempotentCalls: true)
        )
        let timeout = Duration.nanoseconds(Int64(self.timeout * 1e9))
        let result = await LiveRelayClient.withClient(configuration: configuration, logger: logger) { client in
            do throws(LiveRelayClientError) {
                return Swift.Result<Result, LiveRelayClientError>.success(try await body(client, timeout))
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let value):
            return value
        case .failure(let error):
            FileHandle.standardError.write(Data((error.report + "\n").utf8))
            throw ExitCode(1 + Int32(error.status.rawValue))
        }
    }

    private func tlsConfiguration() -> LiveRelayClient.TLS? {
        if self.plaintext { return nil }
        var tls: LiveRelayClient.TLS
        let devCertificate = DevSetup.defaultDataDirectory + "/cert.pem"
        if let caFile = self.caFile {
            tls = .trusting(caFile: caFile)
        } else if FileManager.default.fileExists(atPath: devCertificate) {
            tls = .trusting(caFile: devCertificate)
        } else {
            tls = .systemTrust
        }
        if let clientCert, let clientKey {
            tls = tls.presenting(certificateChainFile: clientCert, privateKeyFile: clientKey)
        }
        return tls
    }
}

/// The options of an alert shown with a push.
struct AlertOptions: ParsableArguments {
    @Option(help: "Alert title.") var alertTitle: String?
    @Option(help: "Alert body.") var alertBody: String?
    @Option(help: "Alert sound name.") var alertSound: String?

    var alert: Alert? {
        if self.alertTitle == nil, self.alertBody == nil, self.alertSound == nil { return nil }
        return Alert(title: self.alertTitle, body: self.alertBody, sound: self.alertSound)
    }
}

enum PriorityOption: String, ExpressibleByArgument, CaseIterable {
    case low, high
    var priority: Priority { self == .low ? .low : .high }
}

enum TokenKindOption: String, ExpressibleByArgument, CaseIterable {
    case pushToStart = "push-to-start"
    case update
}

enum EnvironmentOption: String, ExpressibleByArgument, CaseIterable {
    case sandbox, production
    var wire: Environment { self == .sandbox ? .sandbox : .production }
}

/// JSON given inline or as `@path`, read as is: the server's validation
/// (the same code the client library runs first) judges it, so the CLI
/// accepts exactly what the protocol accepts.
func jsonArgument(_ value: String?, option: String) throws -> String? {
    guard let value else { return nil }
    guard value.hasPrefix("@") else { return value }
    let path = String(value.dropFirst())
    guard let data = FileManager.default.contents(atPath: path) else {
        throw ValidationError("\(option): cannot read \(path)")
    }
    return String(decoding: data, as: UTF8.self)
}

/// A fresh key per invocation: a resend after a lost connection is then
/// recognised by the server (it replays the first reply) instead of acting twice.
func defaultIdempotencyKey() -> String {
    "cli-" + UUID().uuidString.lowercased()
}

struct RegisterToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register-token", abstract: "Register, rotate or remove an APNs token (RegisterToken)."
    )

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The app id.") var app: String
    @Option(help: "The token, lowercase hex (an APNs device token is 64 hex digits).") var token: String
    @Option(help: "push-to-start or update.") var kind: TokenKindOption = .pushToStart
    @Option(help: "The APNs environment: sandbox or production.") var environment: EnvironmentOption = .sandbox
    @Option(help: "The ActivityAttributes type, a Swift type name (required for push-to-start tokens, also to remove one).")
    var attributesType: String?
    @Option(help: "The activity id (required for update tokens).") var activity: String?
    @Option(help: "Your id for the user, for targeting by user.") var externalUser: String?
    @Option(help: "Your id for the device.") var device: String?
    @Option(help: "When the token stops being valid, UNIX seconds.") var expiresAt: Int64?
    @Flag(help: "Remove the token instead of registering it.") var remove = false

    func run() async throws {
        let request = RegisterTokenRequest(
            appID: self.app, kind: self.kind == .update ? .update : .pushToStart, token: self.token,
            environment: self.environment.wire,
            attributesType: self.attributesType ?? "", activityID: self.activity ?? "",
            externalUserID: self.externalUser ?? "", deviceID: self.device ?? "", expiresAt: self.expiresAt ?? 0, remove: self.remove
        )
        try await self.connection.run { client, timeout throws(LiveRelayClientError) in
            try await client.registerToken(request, timeout: timeout)
        }
    }
}

struct StartActivity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start", abstract: "Start an activity through push-to-start tokens (StartActivity)."
    )

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The app id.") var app: String
    @Option(help: "The activity id.") var activity: String
    @Option(help: "The ActivityAttributes type, a Swift type name.") var attributesType: String
    @Option(help: "The attributes, a JSON object (inline or @file).") var attributes: String
    @Option(help: "The content state, a JSON object (inline or @file).") var contentState: String
    @Option(help: "A push-to-start token to target, registered before (repeatable).") var token: [String] = []
    @Option(help: "An external user id to target (repeatable).") var externalUser: [String] = []
    @Flag(help: "Target every push-to-start token of the app.") var allDevices = false
    @OptionGroup var alert: AlertOptions
    @Option(help: "Stale date, UNIX seconds.") var staleDate: Int64?
    @Option(help: "Relevance score.") var relevanceScore: Double?
    @Option(help: "low or high.") var priority: PriorityOption?
    @Option(help: "Idempotency key (default: a new random key).") var idempotencyKey: String?
    @Flag(help: "Wait for delivery results before replying.") var waitForDelivery = false
    @OptionGroup var channel: ChannelTargetOptions
    @Flag(help: "With --channel: do not ask the activity for an update token (updates then reach it only through the channel).")
    var noUpdateToken = false

    func run() async throws {
        var request = StartActivityRequest(
            appID: self.app, activityID: self.activity, attributesType: self.attributesType,
            attributesJSON: try jsonArgument(self.attributes, option: "--attributes"),
            contentStateJSON: try jsonArgument(self.contentState, option: "--content-state"),
            alert: self.alert.alert, staleDate: self.staleDate, relevanceScore: self.relevanceScore,
            priority: self.priority?.priority,
            targets: Targets(pushToStartTokens: self.token, externalUserIDs: self.externalUser, allDevices: self.allDevices ? true : nil),
            idempotencyKey: self.idempotencyKey ?? defaultIdempotencyKey(), waitForDelivery: self.waitForDelivery ? true : nil
        )
        request.channelID = self.channel.channel
        request.inputPushToken = self.noUpdateToken ? false : nil
        request.strictPriorityBudget = self.channel.strictPriorityBudget ? true : nil
        try await self.connection.run { [request] client, timeout throws(LiveRelayClientError) in
            try await client.startActivity(request, timeout: timeout)
        }
    }
}

struct UpdateActivity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update", abstract: "Send a new content state to an activity (UpdateActivity)."
    )

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The app id.") var app: String
    @Option(help: "The activity id.") var activity: String
    @Option(help: "The content state, a JSON object (inline or @file).") var contentState: String?
    @OptionGroup var alert: AlertOptions
    @Option(help: "Stale date, UNIX seconds.") var staleDate: Int64?
    @Option(help: "Dismissal date, UNIX seconds.") var dismissalDate: Int64?
    @Option(help: "Relevance score.") var relevanceScore: Double?
    @Option(help: "low or high.") var priority: PriorityOption?
    @Flag(help: "End the activity with this update.") var end = false
    @Option(help: "Idempotency key (default: a new random key).") var idempotencyKey: String?
    @Flag(help: "Wait for delivery results before replying.") var waitForDelivery = false
    @OptionGroup var channel: ChannelTargetOptions
    @Flag(help: "With --channel: send to the channel only, not to the activity's update tokens.") var channelOnly = false

    func run() async throws {
        var request = UpdateActivityRequest(
            appID: self.app, activityID: self.activity,
            contentStateJSON: try jsonArgument(self.contentState, option: "--content-state"),
            alert: self.alert.alert, staleDate: self.staleDate, dismissalDate: self.dismissalDate,
            relevanceScore: self.relevanceScore, priority: self.priority?.priority, endActivity: self.end ? true : nil,
            idempotencyKey: self.idempotencyKey ?? defaultIdempotencyKey(), waitForDelivery: self.waitForDelivery ? true : nil
        )
        request.channelID = self.channel.channel
        request.channelOnly = self.channelOnly ? true : nil
        request.strictPriorityBudget = self.channel.strictPriorityBudget ? true : nil
        try await self.connection.run { [request] client, timeout throws(LiveRelayClientError) in
            try await client.updateActivity(request, timeout: timeout)
        }
    }
}

struct EndActivity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "end", abstract: "End an activity (EndActivity).")

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The app id.") var app: String
    @Option(help: "The activity id.") var activity: String
    @Option(help: "The final content state, a JSON object (inline or @file); default: the last one.") var contentState: String?
    @Option(help: "Dismissal date, UNIX seconds.") var dismissalDate: Int64?
    @Option(help: "Stale date, UNIX seconds.") var staleDate: Int64?
    @Option(help: "Relevance score.") var relevanceScore: Double?
    @OptionGroup var alert: AlertOptions
    @Option(help: "low or high.") var priority: PriorityOption?
    @Option(help: "Idempotency key (default: a new random key).") var idempotencyKey: String?
    @Flag(help: "Wait for delivery results before replying.") var waitForDelivery = false
    @OptionGroup var channel: ChannelTargetOptions
    @Flag(help: "With --channel: send to the channel only, not to the activity's update tokens.") var channelOnly = false

    func run() async throws {
        var request = EndActivityRequest(
            appID: self.app, activityID: self.activity,
            contentStateJSON: try jsonArgument(self.contentState, option: "--content-state"),
            dismissalDate: self.dismissalDate, idempotencyKey: self.idempotencyKey ?? defaultIdempotencyKey(),
            waitForDelivery: self.waitForDelivery ? true : nil, alert: self.alert.alert, priority: self.priority?.priority
        )
        request.staleDate = self.staleDate
        request.relevanceScore = self.relevanceScore
        request.channelID = self.channel.channel
        request.channelOnly = self.channelOnly ? true : nil
        request.strictPriorityBudget = self.channel.strictPriorityBudget ? true : nil
        try await self.connection.run { [request] client, timeout throws(LiveRelayClientError) in
            try await client.endActivity(request, timeout: timeout)
        }
    }
}

struct Ping: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the whole path (TLS, API key, service) with the Ping RPC."
    )

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Text the server echoes back.") var payload = ""

    func run() async throws {
        let request = PingRequest(payload: Array(self.payload.utf8))
        try await self.connection.run { client, timeout throws(LiveRelayClientError) in
            try await client.ping(request, timeout: timeout)
        }
    }
}
