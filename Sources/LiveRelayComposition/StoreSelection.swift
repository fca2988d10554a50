import LiveRelayAPNs
import LiveRelayDomain
import LiveRelayStore
import LiveRelayStorePostgres
import LiveRelayStoreSQLite
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
package struct StoreSelection: Sendable {
    package var kind: StoreKind
    package var postgresURL: String?
    package var dataDirectory: String?
    /// Puts the tables in this schema whatever the URL says (the soak's throwaway schema).
    package var postgresSchema: String?

    package init(kind: StoreKind, postgresURL: String? = nil, dataDirectory: String? = nil) {
        self.kind = kind
        self.postgresURL = postgresURL
        self.dataDirectory = dataDirectory
    }

    package static let postgresURLVariable = "LIVERELAY_POSTGRES_URL"

    /// The PostgreSQL URL from the flag, the config file or `LIVERELAY_POSTGRES_URL`, parsed.
    package func postgresConfiguration() throws -> PostgresStoreConfiguration {
        let environment = getenv(Self.postgresURLVariable).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        guard let url = postgresURL ?? environment else {
            throw SetupError(
                "--store postgres needs --postgres-url, \"store.postgres_url\" in the config file, or \(Self.postgresURLVariable)")
        }
        do {
            var configuration = try PostgresStoreConfiguration(url: url)
            if let postgresSchema { configuration.schema = postgresSchema }
            return configuration
        } catch {
            throw SetupError("\(error)")
        }
    }

    /// The tenant registry beside the store: `<data dir>/registry.sqlite3` with
    /// SQLite, the same database (and schema) with PostgreSQL,
    /// memory otherwise.
    package func openRegistry(logger: Logger) async throws -> any TenantRegistry {
        try await open(
            "the tenant registry", memory: { InMemoryTenantRegistry() }, sqlite: { try SQLiteTenantRegistry(dataDirectory: $0) },
            postgres: { try await PostgresTenantRegistry(configuration: $0, logger: logger) })
    }

    /// The broadcast channels beside the registry: `<data dir>/channels.sqlite3`
    /// with SQLite, the `channels` table of the same database (and schema)
    /// with PostgreSQL, memory otherwise.
    package func openChannels(logger: Logger) async throws -> any ChannelStore {
        try await open(
            "the channel store", memory: { InMemoryChannelStore() }, sqlite: { try SQLiteChannelStore(dataDirectory: $0) },
            postgres: { try await PostgresChannelStore(configuration: $0, logger: logger) })
    }

    /// One of the stores beside the activity store, by kind, failing with what could not be opened where.
    private func open<Store>(
        _ what: String, memory: () -> Store, sqlite: (String) throws -> Store,
        postgres: (PostgresStoreConfiguration) async throws -> Store
    ) async throws -> Store {
        switch kind {
        case .memory:
            return memory()
        case .sqlite:
            guard let directory = dataDirectory else { throw SetupError("\(what) needs a data directory") }
            do {
                return try sqlite(directory)
            } catch {
                throw SetupError("cannot open \(what) in \(directory): \(error)")
            }
        case .postgres:
            let configuration = try postgresConfiguration()
            do {
                return try await postgres(configuration)
            } catch {
                throw SetupError("cannot open \(what) in PostgreSQL \(configuration): \(error)")
            }
        }
    }

    /// The data directory, created owner-only if it does not exist (an existing one is the operator's to set).
    private func makeDataDirectory(for store: String) throws -> String {
        guard let directory = dataDirectory else {
            throw SetupError(
                "\(store) needs a data directory: set \"data_dir\" in the config file or pass --data-dir (or --store memory)")
        }
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw SetupError("cannot create the data directory \(directory): \(String(cString: strerror(errno)))")
        }
        return directory
    }

    /// Opens the store; `clock` is the one the rules read (PostgreSQL keeps intent leases in its own, measured against it).
    package func open(
        logger: Logger, clock: any WallClock = SystemClock()
    ) async throws -> (
        store: any ActivityStore, description: String
    ) {
        switch kind {
        case .memory:
            return (InMemoryActivityStore(), "in-memory store")
        case .sqlite:
            let directory = try makeDataDirectory(for: "the SQLite store")
            let path = directory + "/liverelay.sqlite3"
            do {
                return (try SQLiteActivityStore(path: path), "SQLite store \(path)")
            } catch {
                throw SetupError("cannot open the store \(path): \(error)")
            }
        case .postgres:
            let configuration = try postgresConfiguration()
            do {
                let store = try await PostgresActivityStore(configuration: configuration, logger: logger, clock: clock)
                return (store, "PostgreSQL store \(configuration)")
            } catch {
                throw SetupError("cannot open the PostgreSQL store \(configuration): \(error)")
            }
        }
    }
}

/// Where tokens and activities live: the embedded SQLite file (the default:
/// durable, one node), memory (development, tests and benchmarks; forgotten on
/// exit), or PostgreSQL (shared by several nodes).
package enum StoreKind: String, Sendable, CaseIterable {
    case sqlite, memory, postgres
}
