import PostgresNIO

/// Where the PostgreSQL store connects and how it batches, parsed from a
/// libpq-style URL so that operators configure it the way every other
/// PostgreSQL client is configured:
///
///     postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=disable&schema=liverelay
///
/// `sslmode` is `disable`, `prefer` or `require` (`verify-ca` and
/// `verify-full` verify the server's certificate, as `require` always does
/// here). Unlike libpq, the default is `require` unless the host is loopback
/// (`localhost`, `127.0.0.0/8`, `::1`), where it is `prefer`; and `prefer` or
/// `allow`, which fall back to plaintext without a word, are refused for any
/// other host: a password and device tokens would cross the network in the
/// clear. `sslmode=disable` is honoured when said (a private network the
/// operator vouches for).
/// `schema` puts LiveRelay's tables in their own schema (created if missing;
/// default `public`), which is also how the tests get a fresh, empty store
/// per behaviour on one database. `lanes`, `max_batch`, `max_connections`,
/// `application_name` and `statement_timeout` (milliseconds, or with a unit:
/// `500ms`, `10s`, `1min`) set the properties of the same names.
///
/// ``description`` never contains the password: URLs end up in logs and
/// error messages, and a password there is a leaked credential.
public struct PostgresStoreConfiguration: Sendable, CustomStringConvertible {
    public enum TLSMode: String, Sendable {
        case disable, prefer, require
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String?
    public var tls: TLSMode
    /// The schema LiveRelay's tables live in; letters, digits and `_` only.
    public var schema: String
    /// Writer lanes: each takes queued mutations in batches and runs a batch
    /// as one transaction on its own pooled connection. Default 1: concurrent
    /// SERIALIZABLE batches touching the same index ranges (every push-to-start
    /// token of one type) abort each other through predicate-lock conflicts;
    /// measured on PostgreSQL 15, 2 lanes gave a tenth of 1 lane's
    /// throughput (docs/BENCHMARKS.md). Raise it for workloads spread wide.
    public var lanes: Int
    /// The most mutations one transaction carries.
    public var maxBatch: Int
    /// Connections in the pool: the lanes' plus those for reads outside mutations. (The event
    /// feed's relay between nodes holds two more of its own: ``PostgresEventRelay``.)
    public var maxConnections: Int
    /// How often one batch is retried after a serialization failure, deadlock
    /// or unique violation before each of its mutations is retried alone.
    public var batchAttempts: Int
    /// How often one mutation alone is retried before its future fails.
    public var soloAttempts: Int
    /// The connections' `application_name`: how an operator tells LiveRelay's
    /// connections apart in `pg_stat_activity`.
    public var applicationName = "liverelay"
    /// The longest the store waits for one statement (rows included) before it
    /// gives up on it and closes its connection. It is enforced by the client,
    /// not the server, because what it guards against is a reply that never
    /// comes: postgres-nio can wait forever on a connection whose backend died
    /// during COMMIT, and every call in the batch would wait with it. A batch
    /// that times out before COMMIT is retried on a new connection; one that
    /// times out in COMMIT fails with ``ActivityStoreError/outcomeUnknown(_:)``.
    public var statementTimeout: Duration = .seconds(10)

    public init(
        host: String, port: Int = 5432, username: String, password: String? = nil, database: String? = nil,
        tls: TLSMode = .prefer, schema: String = "public", lanes: Int = 1, maxBatch: Int = 512,
        maxConnections: Int = 8, batchAttempts: Int = 3, soloAttempts: Int = 20, statementTimeout: Duration = .seconds(10)
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
        self.schema = schema
        self.lanes = max(1, lanes)
        self.maxBatch = max(1, maxBatch)
        self.maxConnections = max(self.lanes + 1, maxConnections)
        self.batchAttempts = max(1, batchAttempts)
        self.soloAttempts = max(1, soloAttempts)
        self.statementTimeout = max(.milliseconds(1), statementTimeout)
    }

    /// Parses `postgres://` or `postgresql://` URLs; throws with a message that
    /// names the problem but never echoes the password.
    public init(url: String) throws(PostgresStoreError) {
        let prefixes = ["postgres://", "postgresql://"]
        guard let prefix = prefixes.first(where: { url.hasPrefix($0) }) else {
            throw .invalidConfiguration("a PostgreSQL URL starts with postgres:// or postgresql://")
        }
        var rest = Substring(url.dropFirst(prefix.count))
        var query: Substring = ""
        if let q = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: q)...]
            rest = rest[..<q]
        }
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        var userInfo: Substring = ""
        if let at = rest.lastIndex(of: "@") {
            userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
        }
        var username = "postgres"
        var password: String?
        if !userInfo.isEmpty {
            if let colon = userInfo.firstIndex(of: ":") {
                username = try Self.decode(userInfo[..<colon], "user name")
                password = try Self.decode(userInfo[userInfo.index(after: colon)...], "password")
            } else {
                username = try Self.decode(userInfo, "user name")
            }
        }
        var host = String(rest)
        var port = 5432
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {  // [::1]:5432
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { throw .invalidConfiguration("invalid port") }
                port = p
            }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            guard let p = Int(host[host.index(after: colon)...]), (1...65535).contains(p) else {
                throw .invalidConfiguration("invalid port")
            }
            port = p
            host = String(host[..<colon])
        }
        if host.isEmpty { host = "localhost" }
        let database = path.isEmpty ? nil : try Self.decode(path, "database")
        self.init(host: host, port: port, username: username, password: password, database: database)
        var sslmode: (mode: TLSMode, said: String)?
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1)
            let key = String(parts[0])
            let value = parts.count > 1 ? try Self.decode(parts[1], key) : ""
            switch key {
            case "sslmode":
                switch value {
                case "disable": sslmode = (.disable, value)
                case "allow", "prefer": sslmode = (.prefer, value)
                case "require", "verify-ca", "verify-full": sslmode = (.require, value)
                default: throw .invalidConfiguration("sslmode must be disable, prefer or require, not \"\(value)\"")
                }
            case "schema": schema = value
            case "lanes": lanes = max(1, Int(value) ?? lanes)
            case "max_batch": maxBatch = max(1, Int(value) ?? maxBatch)
            case "max_connections": maxConnections = max(lanes + 1, Int(value) ?? maxConnections)
            case "application_name": applicationName = value
            case "statement_timeout":
                guard let timeout = Self.parseDuration(value) else {
                    throw .invalidConfiguration(
                        "statement_timeout must be a positive number of milliseconds, or one with ms, s or min, not \"\(value)\"")
                }
                statementTimeout = timeout
            default:
                throw .invalidConfiguration(
                    "unknown URL parameter \"\(key)\" (known: sslmode, schema, lanes, max_batch, max_connections, application_name, "
                        + "statement_timeout)")
            }
        }
        maxConnections = max(maxConnections, lanes + 1)
        try Self.checkSchema(schema)
        let loopback = Self.isLoopback(host)
        switch sslmode {
        case nil:
            tls = loopback ? .prefer : .require
        case let (.prefer, said)? where !loopback:
            throw .invalidConfiguration(
                "sslmode=\(said) falls back to plaintext when \(host) offers no TLS, and it is not a loopback address: "
                    + "use sslmode=require (the default for such hosts), or sslmode=disable on a network that needs no TLS")
        case let (mode, _)?:
            tls = mode
        }
    }

    /// Names that reach this machine only: `localhost`, 127.0.0.0/8 and `::1`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    static func checkSchema(_ schema: String) throws(PostgresStoreError) {
        let allowed = schema.utf8.allSatisfy { c in
            (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x5F
        }
        guard !schema.isEmpty, schema.utf8.count <= 63, allowed, !(schema.utf8.first! >= 0x30 && schema.utf8.first! <= 0x39) else {
            throw .invalidConfiguration("schema must be 1-63 of a-z, 0-9 and _, not starting with a digit")
        }
    }

    /// `500`, `500ms`, `10s`, `2min`: PostgreSQL's own spelling of its
    /// timeouts (bare numbers are milliseconds there too). Zero, which means
    /// "no timeout" to PostgreSQL, is refused: without a deadline a dead
    /// connection can hang the store.
    static func parseDuration(_ text: String) -> Duration? {
        let units: [(suffix: String, milliseconds: Int64)] = [("ms", 1), ("min", 60_000), ("s", 1_000), ("", 1)]
        for unit in units where text.hasSuffix(unit.suffix) {
            guard let count = Int64(text.dropLast(unit.suffix.count)), count > 0 else { return nil }
            let (milliseconds, overflow) = count.multipliedReportingOverflow(by: unit.milliseconds)
            return overflow ? nil : .milliseconds(milliseconds)
        }
        return nil
    }

    private static func decode(_ part: Substring, _ what: String) throws(PostgresStoreError) -> String {
        guard let decoded = String(part).removingPercentEncodingPortable() else {
            throw .invalidConfiguration("invalid percent-encoding in the \(what)")
        }
        return decoded
    }

    /// The URL with the password replaced by `***`: safe for logs.
    public var description: String {
        let user = password == nil ? username : "\(username):***"
        let hostPart = host.contains(":") ? "[\(host)]" : host
        return "postgres://\(user)@\(hostPart):\(port)/\(database ?? "")?sslmode=\(tls.rawValue)&schema=\(schema)"
    }

    var client: PostgresClient.Configuration {
        let mode: PostgresClient.Configuration.TLS
        switch tls {
        case .disable: mode = .disable
        case .prefer: mode = .prefer(.makeClientConfiguration())
        case .require: mode = .require(.makeClientConfiguration())
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: mode)
        configuration.options.maximumConnections = maxConnections
        configuration.options.minimumConnections = 0
        configuration.options.connectTimeout = .seconds(10)
        // Unqualified names in every statement resolve to LiveRelay's schema.
        configuration.options.additionalStartupParameters = [("search_path", schema), ("application_name", applicationName)]
        return configuration
    }
}

extension String {
    /// Percent-decoding without Foundation: nil on a malformed escape or invalid UTF-8.
    fileprivate func removingPercentEncodingPortable() -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var iterator = utf8.makeIterator()
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x41 + 10
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        while let c = iterator.next() {
            if c == 0x25 {
                guard let h = iterator.next().flatMap(hexValue), let l = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(h << 4 | l)
            } else {
                bytes.append(c)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// Failures of the PostgreSQL store that are not a rule's refusal.
public enum PostgresStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    case invalidConfiguration(String)
    /// The database has a schema version above this build's.
    case newerSchema(found: Int, supported: Int)
    /// A row that does not decode into a domain value.
    case corruptRow(String)
    /// A mutation kept losing races (serialization failures) past its retry budget.
    case contention(String)
    /// The server could not be reached in time.
    case unavailable(String)

    public var description: String {
        switch self {
        case let .invalidConfiguration(message): "invalid PostgreSQL configuration: \(message)"
        case let .newerSchema(found, supported):
            "the database has LiveRelay schema version \(found), newer than this build's \(supported)"
        case let .corruptRow(what): "unreadable row: \(what)"
        case let .contention(what): "gave up after repeated serialization failures: \(what)"
        case let .unavailable(what): "PostgreSQL unavailable: \(what)"
        }
    }
}
