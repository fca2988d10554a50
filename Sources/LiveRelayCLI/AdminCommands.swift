import ArgumentParser
import Foundation
import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayServer
import Logging

/// `liverelay admin`: managing the tenant registry.
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the tenant registry (apps, their APNs keys and quotas, API keys).",
        subcommands: [AdminBootstrap.self]
    )
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
                kind: kind ?? .sqlite, postgresURL: url, nullService: false,
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
