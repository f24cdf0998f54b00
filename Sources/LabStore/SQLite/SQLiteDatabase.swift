internal import CSQLite
import LabKernel

/// A failure reported by SQLite, with the statement or file it concerned.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    public let context: String

    public var description: String { "SQLite error \(code) (\(message)) in \(context)" }
}

/// One connection to a SQLite database file (or `:memory:`).
///
/// Not `Sendable`: a connection has a single owner (the recorder's writer thread, a
/// device store, a server host), which is the rule SQLite's own threading model wants.
/// Statements are cached by SQL text, so hot paths prepare once.
public final class SQLiteDatabase {
    @usableFromInline let handle: OpaquePointer
    public let path: String
    private var statementCache: [String: SQLiteStatement] = [:]
    /// Statements of SQL literals, by the literal's address: a hot path's lookup hashes
    /// one word instead of its whole SQL text.
    private var staticStatementCache: [UInt: SQLiteStatement] = [:]

    /// Opens (creating if needed) the database at `path`.
    public init(path: String, readOnly: Bool = false) throws(SQLiteError) {
        var db: OpaquePointer?
        let flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        let rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: rc, message: message, context: "opening \(path)")
        }
        self.handle = db
        self.path = path
        sqlite3_busy_timeout(db, 5_000)
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        statementCache.removeAll()
        staticStatementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws(SQLiteError) {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(error)
            throw SQLiteError(code: rc, message: message, context: Self.excerpt(sql))
        }
    }

    /// A prepared statement for `sql`, reused across calls and reset before it is handed out.
    public func statement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let cached = statementCache[sql] {
            cached.reset()
            return cached
        }
        let statement = try SQLiteStatement(database: self, sql: sql)
        statementCache[sql] = statement
        return statement
    }

    /// `statement(_:)` for SQL written as a literal, cached by the literal's address.
    public func statement(static sql: StaticString) throws(SQLiteError) -> SQLiteStatement {
        guard sql.hasPointerRepresentation else { return try statement(sql.description) }
        let key = UInt(bitPattern: sql.utf8Start)
        if let cached = staticStatementCache[key] {
            cached.reset()
            return cached
        }
        let statement = try SQLiteStatement(database: self, sql: sql.description)
        staticStatementCache[key] = statement
        return statement
    }

    /// Runs `body` inside BEGIN IMMEDIATE ... COMMIT, rolling back if it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Runs `sql` with `bindings` and returns every row as an array of values.
    public func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> [[SQLiteValue]] {
        var rows: [[SQLiteValue]] = []
        try forEachRow(sql, bindings) { statement in
            rows.append((0..<statement.columnCount).map { statement.value(at: $0) })
            return true
        }
        return rows
    }

    /// Runs `sql` with `bindings` and hands each row to `body` as it is stepped to, so a
    /// reader of a large table holds one row at a time; `body` returns false to stop. The
    /// statement is reset afterwards, however `body` leaves.
    public func forEachRow(_ sql: String, _ bindings: [SQLiteValue] = [], _ body: (SQLiteStatement) -> Bool) throws(SQLiteError) {
        let statement = try statement(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        while try statement.step() {
            guard body(statement) else { return }
        }
    }

    /// Runs `sql` once with `bindings`, for statements that return no rows.
    public func run(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) {
        let statement = try statement(sql)
        try statement.bind(bindings)
        while try statement.step() {}
    }

    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }
    public var changes: Int { Int(sqlite3_changes(handle)) }

    var lastErrorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    static func excerpt(_ sql: String) -> String {
        let flat = sql.split(whereSeparator: \.isNewline).map { String($0).trimmingWhitespace() }.joined(separator: " ")
        return flat.count > 80 ? String(flat.prefix(77)) + "..." : flat
    }
}

/// A value in or out of SQLite.
public enum SQLiteValue: Hashable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public var integer: Int64? { if case .integer(let v) = self { return v }; return nil }
    public var real: Double? {
        switch self {
        case .real(let v): return v
        case .integer(let v): return Double(v)
        case .null, .text, .blob: return nil
        }
    }
    public var text: String? { if case .text(let v) = self { return v }; return nil }
}
