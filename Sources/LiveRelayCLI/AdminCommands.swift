import ArgumentParser
import Foundation
import LiveRelayAPNs
import LiveRelayClient
import LiveRelayComposition
import LiveRelayDomain
import LiveRelayMessages
import LiveRelayServer
import Logging

/// `liverelay admin`: managing the tenant registry.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Manage the tenant registry (apps, their APNs keys, quotas and webhooks, API keys).",
        subcommands: [AdminBootstrap.self, AdminApps.self, AdminKeys.self, AdminCredentials.self, AdminStats.self, AdminWebhooks.self]
    )
}

extension ServerConnectionOptions where Key == AdminKeyVariable {
    /// One admin call with the admin key (`--api-key` or `LIVERELAY_ADMIN_KEY`), its reply printed as JSON.
    func admin<Reply: JSONRepresentable & Sendable>(
        _ call: @Sendable (LiveRelayClient, Duration) async throws(LiveRelayClientError) -> Reply
    ) async throws {
        try await run(call)
    }
}

/// The quota options of app create and update.
struct QuotaOptions: ParsableArguments {
    @Option(help: "Calls per second over every node (0: no limit).") var callsPerSecond: Double?
    @Option(help: "Calls at once after a quiet spell.") var burst: UInt32?
    @Option(help: "Pushes per sliding hour over every node (0: no limit).") var pushesPerHour: UInt64?
    @Option(help: "Registered tokens (0: no limit).") var maxTokens: UInt64?
    @Option(help: "Live activities (0: no limit).") var maxLiveActivities: UInt64?
    @Option(help: "Priority-10 sends per hour per activity and per channel (0: no budget).") var priorityBudgetPerHour: UInt32?

    /// nil when no quota option was given (an update then leaves the app's quotas alone).
    var quotas: Admin.Quotas? {
        let quotas = Admin.Quotas(
            callsPerSecond: callsPerSecond, burst: burst, pushesPerHour: pushesPerHour, maxTokens: maxTokens,
            maxLiveActivities: maxLiveActivities, priorityBudgetPerHour: priorityBudgetPerHour)
        return quotas == Admin.Quotas() ? nil : quotas
    }
}

struct AdminApps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps", abstract: "Apps: create, list, get, update, disable.",
        subcommands: [Create.self, List.self, Get.self, Update.self, Disable.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an app (then put its APNs credentials).")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String
        @Option(help: "The iOS bundle id.") var bundleID: String
        @Option(help: "Unfinished pushes it may have queued (default 100,000).") var queueCapacity: UInt32?
        @Option(help: "Share of send slots when apps compete (default 1).") var weight: UInt32?
        @Option(help: "Seconds a push is tried at most.") var maxPushLifetime: UInt32?
        @OptionGroup var quotas: QuotaOptions

        func run() async throws {
            let request = Admin.CreateAppRequest(
                appID: app, bundleID: bundleID, queueCapacity: queueCapacity, weight: weight, maxPushLifetimeSeconds: maxPushLifetime,
                quotas: quotas.quotas)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.createApp(request, timeout: timeout)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List apps in id order, a page at a time.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "At most this many (default 100, at most 1,000).") var pageSize: UInt32?
        @Option(help: "The previous page's next_page_token.") var pageToken: String?
        @Flag(help: "Disabled apps too.") var includeDisabled = false

        func run() async throws {
            let request = Admin.ListAppsRequest(pageSize: pageSize, pageToken: pageToken, includeDisabled: includeDisabled)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.listApps(request, timeout: timeout)
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one app.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String

        func run() async throws {
            let request = Admin.GetAppRequest(appID: app)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.getApp(request, timeout: timeout)
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change an app's fields (those given); quota options replace its quotas as a whole.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String
        @Option(help: "The iOS bundle id.") var bundleID: String?
        @Option(help: "Unfinished pushes it may have queued.") var queueCapacity: UInt32?
        @Option(help: "Share of send slots when apps compete.") var weight: UInt32?
        @Option(help: "Seconds a push is tried at most.") var maxPushLifetime: UInt32?
        @Option(help: "true enables a disabled app, false disables it.") var enabled: Bool?
        @OptionGroup var quotas: QuotaOptions

        func run() async throws {
            let request = Admin.UpdateAppRequest(
                appID: app, bundleID: bundleID, queueCapacity: queueCapacity, weight: weight, maxPushLifetimeSeconds: maxPushLifetime,
                quotas: quotas.quotas, enabled: enabled)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.updateApp(request, timeout: timeout)
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Turn an app off: its calls are refused AppDisabled; its tokens and activities are kept.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String

        func run() async throws {
            let request = Admin.DisableAppRequest(appID: app)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.disableApp(request, timeout: timeout)
            }
        }
    }
}

struct AdminKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys", abstract: "API keys: create, list, revoke.", subcommands: [Create.self, List.self, Revoke.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mint a key; its secret is printed once and stored nowhere.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(name: .customLong("app"), help: "An app the key may act for (repeatable).") var apps: [String] = []
        @Flag(help: "A key for every app, present and future.") var allApps = false
        @Option(name: .customLong("method"), help: "An RPC it may call, e.g. StartActivity (repeatable).") var methods: [String] = []
        @Flag(help: "An admin key (the admin API only; no --app or --method).") var admin = false
        @Option(help: "Free text naming the key's holder.") var label: String?

        func run() async throws {
            let request = Admin.CreateAPIKeyRequest(
                appIDs: apps, allApps: allApps ? true : nil, allowedMethods: methods, admin: admin ? true : nil, label: label)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.createAPIKey(request, timeout: timeout)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys (never their secrets).")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "Only keys that may act for this app.") var app: String?
        @Flag(help: "Revoked keys too.") var includeRevoked = false
        @Option(help: "At most this many (default 100).") var pageSize: UInt32?
        @Option(help: "The previous page's next_page_token.") var pageToken: String?

        func run() async throws {
            let request = Admin.ListAPIKeysRequest(
                appID: app, includeRevoked: includeRevoked, pageSize: pageSize, pageToken: pageToken)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.listAPIKeys(request, timeout: timeout)
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a key on every node: refused at its next HELLO; its open connections get GOAWAY UNAUTHENTICATED.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The key id (the 12 characters after lrk_).") var key: String

        func run() async throws {
            let request = Admin.RevokeAPIKeyRequest(keyID: key)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.revokeAPIKey(request, timeout: timeout)
            }
        }
    }
}

struct AdminCredentials: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "credentials", abstract: "An app's APNs signing key and endpoint.", subcommands: [Put.self])

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set an app's APNs key (checked now: a key that does not parse is refused) and endpoint.")
        @OptionGroup var connection: AdminConnectionOptions
        @Option(help: "The app id.") var app: String
        @Option(help: "Apple's 10-character team id.") var teamID: String
        @Option(help: "The 10-character key id.") var keyID: String
        @Option(help: "A .p8 file here, sent to be kept in the registry.") var keyFile: String?
        @Option(help: "A .p8 path every node can read (kept as a path).") var keyPath: String?
        @Option(help: "An environment variable holding the .p8 on every node.") var keyEnv: String?
        @Option(help: "apple (default) or host:port: a DNS name, an IPv4 address or an IPv6 address in brackets, and a port.")
        var endpoint: String?
        @Option(help: "PEM file of the certificate a host:port endpoint presents.") var trustCertificate: String?

        func run() async throws {
            var pem: [UInt8]?
            if let keyFile {
                guard let data = FileManager.default.contents(atPath: keyFile) else {
                    FileHandle.standardError.write(Data("error: cannot read \(keyFile)\n".utf8))
                    throw ExitCode.failure
                }
                pem = Array(data)
            }
            var trust: [UInt8]?
            if let trustCertificate {
                guard let data = FileManager.default.contents(atPath: trustCertificate) else {
                    FileHandle.standardError.write(Data("error: cannot read \(trustCertificate)\n".utf8))
                    throw ExitCode.failure
                }
                trust = Array(data)
            }
            let request = Admin.PutAPNsCredentialsRequest(
                appID: app, teamID: teamID, keyID: keyID, privateKeyPEM: pem, privateKeyFile: keyPath, privateKeyEnv: keyEnv,
                endpoint: endpoint, trustCertificatePEM: trust)
            try await connection.admin { client, timeout throws(LiveRelayClientError) in
                try await client.putAPNsCredentials(request, timeout: timeout)
            }
        }
    }
}

struct AdminStats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "What an app uses on the node that answers: queue, pushes by outcome, quota use, webhook backlog.")
    @OptionGroup var connection: AdminConnectionOptions
    @Option(help: "The app id.") var app: String

    func run() async throws {
        let request = Admin.GetAppStatsRequest(appID: app)
        try await connection.admin { client, timeout throws(LiveRelayClientError) in
            try await client.getAppStats(request, timeout: timeout)
        }
    }
}

/// Mints an admin key straight into the server's registry: the way in for
/// the first admin, before any admin key exists to call the admin API with.
/// It writes to the registry the server uses (the SQLite file in the data
/// directory, or PostgreSQL), so it runs where the server's data is, and a
/// running server picks the key up within a second.
struct AdminBootstrap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bootstrap",
        abstract: "Mint an admin key in the server's tenant registry and print it once.",
        discussion: """
            The registry is the one `serve` with the same options uses: --config FILE (its "store"
            and "data_dir"), or --data-dir (SQLite, default \(DevSetup.defaultDataDirectory)), or
            --store postgres with --postgres-url (or LIVERELAY_POSTGRES_URL). The key is printed
            once; the registry keeps only its SHA-256. An admin key calls the admin API only.
            """
    )

    @Option(help: "The server's config file: its \"store\" and \"data_dir\" name the registry.")
    var config: String?

    @Option(help: "The data directory of a SQLite registry (overrides the config file's).")
    var dataDir: String?

    @Option(help: "sqlite or postgres (default: the config file's, else sqlite).")
    var store: StoreKind?

    @Option(help: "For --store postgres (default: $LIVERELAY_POSTGRES_URL).")
    var postgresURL: String?

    @Option(help: "Free text naming the key's holder, kept with it.")
    var label: String = "bootstrap admin key"

    func run() async throws {
        do {
            var kind = store
            var url = postgresURL
            var dataDirectory = dataDir.map { DevSetup.absolute($0) }
            if let config {
                let path = DevSetup.absolute(config)
                let file = try ServeConfigurationFile.load(path: path)
                let base = URL(fileURLWithPath: path).deletingLastPathComponent().path
                let fileKind = try file.storeKind
                kind = kind ?? fileKind
                url = url ?? file.store?.postgresURL
                dataDirectory = dataDirectory ?? file.dataDir.map { DevSetup.absolute($0, relativeTo: base) }
            }
            let selection = StoreSelection(
                kind: kind ?? .sqlite, postgresURL: url,
                dataDirectory: dataDirectory ?? DevSetup.absolute(DevSetup.defaultDataDirectory))
            guard selection.kind != .memory else { throw CLIError("a memory store keeps no registry to bootstrap") }
            var logger = Logger(label: "liverelay.admin")
            logger.logLevel = .warning
            let registry = try await selection.openRegistry(logger: logger)
            let minted = APIKeyAuthenticator.generateKey(apps: .only([]), allowedMethods: [], label: label)
            let now = UnixTime(milliseconds: Int64(Date().timeIntervalSince1970 * 1000))
            do {
                try await registry.apply(
                    .createKey(
                        RegisteredAPIKey(keyID: minted.record.keyID, secretSHA256: minted.record.secretSHA256, role: .admin, label: label)),
                    actor: "bootstrap", now: now)
            } catch {
                try? await registry.close()
                throw CLIError("cannot write the admin key: \(error)")
            }
            try await registry.close()
            writeStandardOutput(
                """
                Admin key \(minted.record.keyID) (shown only now; the registry keeps its hash only):

                export LIVERELAY_ADMIN_KEY=\(minted.plaintext)
                """)
        } catch let error as CLIError {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}
