import CSQLite
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failure reported by SQLite: the result code, its extended code and message.
public struct SQLiteError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The primary result code (SQLITE_BUSY, SQLITE_IOERR, ...).
    public var code: Int32
    /// The extended result code (SQLITE_IOERR_FSYNC, SQLITE_CONSTRAINT_UNIQUE, ...).
    public var extendedCode: Int32
    public var message: String
    /// The statement or step that failed.
    public var context: String

    public init(code: Int32, extendedCode: Int32? = nil, message: String, context: String = "") {
        self.code = code
        self.extendedCode = extendedCode ?? code
        self.message = message
        self.context = context
    }

    public var description: String {
        "SQLite error \(extendedCode) (\(message))" + (context.isEmpty ? "" : " in \(context)")
    }
}

/// A statement the store runs often, with its slot in every connection's
/// statement cache (an array index instead of hashing the SQL text per call).
/// Creates `path` with mode 0600 unless it exists (outside the class, whose `close` would shadow the system's).
private func createOwnerOnlyFile(_ path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    if fd >= 0 { close(fd) }
}

/// Sets each of `files` that exists and that group or others may use to 0600.
/// Returns those it changed, each with its old mode, and those it could not
/// change (another user's file), each with the error.
private func restrictToOwner(_ files: [String]) -> (tightened: [String], failed: [String]) {
    var tightened: [String] = []
    var failed: [String] = []
    for file in files {
        // Through a descriptor, so the mode checked is the mode of the file changed
        // (non-blocking: whatever sits at the path, opening it must not wait).
        let fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { continue }  // not there (no -wal before the first write), or not the store's to open
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 else { continue }
        let old = "\(file) (\(String(info.st_mode & 0o777, radix: 8)))"
        if fchmod(fd, 0o600) == 0 {
            tightened.append(old)
        } else {
            failed.append("\(old): \(String(cString: strerror(errno)))")
        }
    }
    return (tightened, failed)
}

struct SQLiteQuery: Sendable {
    let slot: Int
    let text: String
    init(_ slot: Int, _ text: String) {
        self.slot = slot
        self.text = text
    }
}

/// One SQLite connection with its cache of prepared statements.
///
/// Not thread-safe by design (opened with SQLITE_OPEN_NOMUTEX): each connection
/// belongs to one thread of ``SQLiteActivityStore`` (the writer, or one
/// reader) and is only ever used there.
final class SQLiteConnection {
    let handle: OpaquePointer
    let path: String
    private var statements: [String: SQLiteStatement] = [:]
    private var cached = [SQLiteStatement?](repeating: nil, count: SQLiteTables.SQL.count)

    /// Opens (creating when `create`) the database at `path`; `logger` hears of
    /// files a creating open had to make owner-only.
    init(path: String, create: Bool, logger: Logger? = nil) throws(SQLiteError) {
        var db: OpaquePointer?
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        if create {
            flags |= SQLITE_OPEN_CREATE
            // The file holds device tokens and user ids: owner-only from its first byte.
            // SQLite would create it 0644 (less the umask); its -wal and -shm take the mode
            // of the database file, so creating this one 0600 covers all three.
            createOwnerOnlyFile(path)
            // A file an older build let SQLite create is 0644, and so are its -wal and -shm
            // if a crash left them: made 0600 before SQLite opens them, so that a -wal or
            // -shm made from now on takes the new mode too.
            let (tightened, failed) = restrictToOwner([path, path + "-wal", path + "-shm"])
            if !tightened.isEmpty {
                logger?.notice(
                    "made the SQLite files owner-only (0600): group or others had access",
                    metadata: ["files": "\(tightened.joined(separator: ", "))"])
            }
            if !failed.isEmpty {
                logger?.warning(
                    "could not make the SQLite files owner-only: group or others keep access",
                    metadata: ["files": "\(failed.joined(separator: ", "))"])
            }
        }
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: rc & 0xff, extendedCode: rc, message: message, context: "open \(path)")
        }
        self.handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    private var isOpen = true

    /// Finalizes every statement and closes the connection (SQLite checkpoints
    /// the WAL when the last connection to the file closes).
    func close() {
        guard isOpen else { return }
        isOpen = false
        for statement in statements.values { statement.finalize() }
        statements.removeAll()
        for statement in cached { statement?.finalize() }
        cached = []
        sqlite3_close_v2(handle)
    }

    func error(_ rc: Int32, _ context: String) -> SQLiteError {
        SQLiteError(
            code: rc & 0xff, extendedCode: sqlite3_extended_errcode(handle),
            message: String(cString: sqlite3_errmsg(handle)), context: context)
    }

    /// Runs one or more statements without results (schema, pragmas, BEGIN/COMMIT).
    func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        guard rc == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_free(message)
            throw SQLiteError(code: rc & 0xff, extendedCode: sqlite3_extended_errcode(handle), message: text, context: sql)
        }
    }

    private func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, sql) }
        return SQLiteStatement(stmt, connection: self, sql: sql)
    }

    /// The cached prepared statement for `sql`, prepared on first use.
    func statement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let cached = statements[sql] { return cached }
        let statement = try prepare(sql)
        statements[sql] = statement
        return statement
    }

    /// The cached prepared statement for one of the store's queries.
    func statement(_ query: SQLiteQuery) throws(SQLiteError) -> SQLiteStatement {
        if let statement = cached[query.slot] { return statement }
        let statement = try prepare(query.text)
        cached[query.slot] = statement
        return statement
    }

    /// Runs a statement with `bind` and steps it to completion.
    func run(_ statement: SQLiteStatement, _ bind: (SQLiteStatement) -> Void) throws(SQLiteError) {
        defer { statement.reset() }
        bind(statement)
        while try statement.step() {}
    }

    func all<T>(_ statement: SQLiteStatement, _ bind: (SQLiteStatement) -> Void, row: (SQLiteStatement) -> T) throws(SQLiteError) -> [T] {
        defer { statement.reset() }
        bind(statement)
        var rows: [T] = []
        while try statement.step() { rows.append(row(statement)) }
        return rows
    }

    func first<T>(_ statement: SQLiteStatement, _ bind: (SQLiteStatement) -> Void, row: (SQLiteStatement) -> T) throws(SQLiteError) -> T? {
        defer { statement.reset() }
        bind(statement)
        return try statement.step() ? row(statement) : nil
    }

    /// Runs a cached statement with `bind` and steps it to completion.
    func run(_ sql: String, _ bind: (SQLiteStatement) -> Void = { _ in }) throws(SQLiteError) {
        try run(statement(sql), bind)
    }

    func run(_ query: SQLiteQuery, _ bind: (SQLiteStatement) -> Void = { _ in }) throws(SQLiteError) {
        try run(statement(query), bind)
    }

    /// Runs a cached query with `bind` and maps each row with `row`.
    func query<T>(_ sql: String, _ bind: (SQLiteStatement) -> Void = { _ in }, row: (SQLiteStatement) -> T) throws(SQLiteError) -> [T] {
        try all(statement(sql), bind, row: row)
    }

    func query<T>(
        _ query: SQLiteQuery, _ bind: (SQLiteStatement) -> Void = { _ in }, row: (SQLiteStatement) -> T
    ) throws(SQLiteError) -> [T] {
        try all(statement(query), bind, row: row)
    }

    /// The first row of a cached query, if any.
    func queryFirst<T>(_ sql: String, _ bind: (SQLiteStatement) -> Void = { _ in }, row: (SQLiteStatement) -> T) throws(SQLiteError) -> T? {
        try first(statement(sql), bind, row: row)
    }

    func queryFirst<T>(
        _ query: SQLiteQuery, _ bind: (SQLiteStatement) -> Void = { _ in }, row: (SQLiteStatement) -> T
    ) throws(SQLiteError) -> T? {
        try first(statement(query), bind, row: row)
    }

    /// A pragma's single value as text (e.g. `journal_mode`).
    func pragma(_ sql: String) throws(SQLiteError) -> String? {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, sql) }
        defer { sqlite3_finalize(stmt) }
        let step = sqlite3_step(stmt)
        if step == SQLITE_ROW { return sqlite3_column_text(stmt, 0).map { String(cString: $0) } }
        guard step == SQLITE_DONE else { throw error(step, sql) }
        return nil
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
}

/// A prepared statement: 1-based binds, 0-based columns.
final class SQLiteStatement {
    let stmt: OpaquePointer
    unowned let connection: SQLiteConnection
    let sql: String

    init(_ stmt: OpaquePointer, connection: SQLiteConnection, sql: String) {
        self.stmt = stmt
        self.connection = connection
        self.sql = sql
    }

    func finalize() { sqlite3_finalize(stmt) }

    /// Resets for the next use and drops the bindings (ending its read snapshot).
    func reset() {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
    }

    /// True while there is a row to read.
    func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw connection.error(rc, sql)
    }

    func bind(_ index: Int32, _ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            guard let base = utf8.baseAddress, utf8.count > 0 else {
                // Never a NULL pointer: SQLite would bind NULL instead of ''.
                _ = lr_sqlite3_bind_text_transient(stmt, index, "", 0)
                return
            }
            _ = base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                lr_sqlite3_bind_text_transient(stmt, index, $0, Int32(utf8.count))
            }
        }
    }

    func bind(_ index: Int32, _ value: String?) {
        if let value { bind(index, value) } else { sqlite3_bind_null(stmt, index) }
    }

    func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(stmt, index, value) }

    func bind(_ index: Int32, _ value: Int64?) {
        if let value { sqlite3_bind_int64(stmt, index, value) } else { sqlite3_bind_null(stmt, index) }
    }

    func bind(_ index: Int32, _ value: Double?) {
        if let value { sqlite3_bind_double(stmt, index, value) } else { sqlite3_bind_null(stmt, index) }
    }

    func bind(_ index: Int32, _ value: [UInt8]) {
        value.withUnsafeBytes { raw in
            _ = lr_sqlite3_bind_blob_transient(stmt, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, Int32(raw.count))
        }
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(stmt, column) == SQLITE_NULL }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(stmt, column) }

    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }

    func optionalDouble(_ column: Int32) -> Double? { isNull(column) ? nil : sqlite3_column_double(stmt, column) }

    func string(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(stmt, column) else { return "" }
        let count = Int(sqlite3_column_bytes(stmt, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func optionalString(_ column: Int32) -> String? { isNull(column) ? nil : string(column) }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(stmt, column))
        guard count > 0, let bytes = sqlite3_column_blob(stmt, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}
