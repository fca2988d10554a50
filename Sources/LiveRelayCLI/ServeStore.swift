import LiveRelayStore
import LiveRelayStorePostgres
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which store `serve` opens, from the flags over the config file's "store"
/// section over the default (SQLite in the data directory).
///
/// The PostgreSQL URL may come from `LIVERELAY_POSTGRES_URL` instead of a flag
/// so that its password stays out of `ps` and shell history; it is only ever
/// printed with the password masked.
struct StoreSelection {
    var kind: StoreKind
    var postgresURL: String?
    var nullService: Bool
    var dataDirectory: String?

    static let postgresURLVariable = "LIVERELAY_POSTGRES_URL"

    func open(logger: Logger) async throws -> (store: any ActivityStore, description: String) {
        if nullService || kind == .memory {
            return (InMemoryActivityStore(), "in-memory store")
        }
        switch kind {
        case .memory:
            return (InMemoryActivityStore(), "in-memory store")
        case .sqlite:
            guard let directory = dataDirectory else {
                throw CLIError(
                    "the SQLite store needs a data directory: set \"data_dir\" in the config file or pass --data-dir (or --store memory)")
            }
            let path = directory + "/liverelay.sqlite3"
            // Owner-only from creation (an existing directory is the operator's to set).
            if mkdir(directory, 0o700) != 0, errno != EEXIST {
                throw CLIError("cannot create the data directory \(directory): \(String(cString: strerror(errno)))")
            }
            do {
                return (try SQLiteActivityStore(path: path), "SQLite store \(path)")
            } catch {
                throw CLIError("cannot open the store \(path): \(error)")
            }
        case .postgres:
            let environment = getenv(Self.postgresURLVariable).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            guard let url = postgresURL ?? environment else {
                throw CLIError(
                    "--store postgres needs --postgres-url, \"store.postgres_url\" in the config file, or \(Self.postgresURLVariable)")
            }
            let configuration: PostgresStoreConfiguration
            do {
                configuration = try PostgresStoreConfiguration(url: url)
            } catch {
                throw CLIError("\(error)")
            }
            do {
                let store = try await PostgresActivityStore(configuration: configuration, logger: logger)
                return (store, "PostgreSQL store \(configuration)")
            } catch {
                throw CLIError("cannot open the PostgreSQL store \(configuration): \(error)")
            }
        }
    }
}
