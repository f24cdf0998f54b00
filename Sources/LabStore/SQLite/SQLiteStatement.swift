internal import CSQLite

/// A prepared statement. Obtain one from `SQLiteDatabase.statement(_:)`, bind, then step.
public final class SQLiteStatement {
    private let pointer: OpaquePointer
    private unowned let database: SQLiteDatabase
    private let sql: String
    /// Buffers bound without a copy (`bind(holding:)`), kept alive until the statement has
    /// run.
    private var held: [[UInt8]] = []

    init(database: SQLiteDatabase, sql: String) throws(SQLiteError) {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(database.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw SQLiteError(code: rc, message: database.lastErrorMessage, context: SQLiteDatabase.excerpt(sql))
        }
        self.pointer = statement
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(pointer) }

    public func reset() {
        sqlite3_reset(pointer)
        sqlite3_clear_bindings(pointer)
        held.removeAll(keepingCapacity: true)
    }

    public func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        for (offset, value) in values.enumerated() { try bind(value, at: Int32(offset + 1)) }
    }

    public func bind(_ value: SQLiteValue, at index: Int32) throws(SQLiteError) {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(pointer, index)
        case .integer(let v): rc = sqlite3_bind_int64(pointer, index, v)
        case .real(let v): rc = sqlite3_bind_double(pointer, index, v)
        case .text(let v): return try bind(v, at: index)
        case .blob(let bytes) where bytes.isEmpty: rc = sqlite3_bind_zeroblob(pointer, index, 0)
        case .blob(let bytes):
            rc = bytes.withUnsafeBytes { raw in
                sqlite3_bind_blob(pointer, index, raw.baseAddress, Int32(raw.count), Self.transient)
            }
        }
        try check(rc)
    }

    /// Binds an integer without building a `SQLiteValue` (the recorder's hot path).
    public func bind(_ value: Int64, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_int64(pointer, index, value))
    }

    public func bind(_ value: Double, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_double(pointer, index, value))
    }

    public func bind(_ value: String, at index: Int32) throws(SQLiteError) {
        // By its UTF-8 view and length: passing the String as a C string made a
        // NUL-terminated copy of it first, and SQLite then measured it.
        guard !value.isEmpty else { return try check(sqlite3_bind_text(pointer, index, "", 0, Self.transient)) }
        var text = value
        let rc = text.withUTF8 { utf8 in
            sqlite3_bind_text(pointer, index, UnsafeRawPointer(utf8.baseAddress!).assumingMemoryBound(to: CChar.self),
                              Int32(utf8.count), Self.transient)
        }
        try check(rc)
    }

    /// Binds a buffer as TEXT (or a BLOB) without SQLite copying it: the statement holds
    /// the buffer until it has run, then lets go (so the caller's next write to its buffer
    /// finds it unshared and reuses it).
    public func bind(holding bytes: [UInt8], at index: Int32, asBlob: Bool = false) throws(SQLiteError) {
        guard !bytes.isEmpty else {
            return try check(asBlob ? sqlite3_bind_zeroblob(pointer, index, 0) : sqlite3_bind_text(pointer, index, "", 0, Self.transient))
        }
        held.append(bytes)
        let rc = bytes.withUnsafeBytes { raw in
            asBlob ? sqlite3_bind_blob(pointer, index, raw.baseAddress, Int32(raw.count), Self.static)
                : sqlite3_bind_text(pointer, index, raw.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(raw.count), Self.static)
        }
        try check(rc)
    }

    public func bindNull(at index: Int32) throws(SQLiteError) { try check(sqlite3_bind_null(pointer, index)) }

    /// Advances to the next row; false when the statement is done.
    @discardableResult
    public func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(pointer)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let message = database.lastErrorMessage
            sqlite3_reset(pointer)
            throw SQLiteError(code: rc, message: message, context: SQLiteDatabase.excerpt(sql))
        }
    }

    /// Steps a statement that returns no rows, then resets it for the next use.
    public func execute() throws(SQLiteError) {
        defer {
            sqlite3_reset(pointer)
            if !held.isEmpty {
                sqlite3_clear_bindings(pointer)
                held.removeAll(keepingCapacity: true)
            }
        }
        while try step() {}
    }

    public var columnCount: Int { Int(sqlite3_column_count(pointer)) }

    public func value(at column: Int) -> SQLiteValue {
        let index = Int32(column)
        switch sqlite3_column_type(pointer, index) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(pointer, index))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(pointer, index))
        case SQLITE_TEXT: return .text(string(at: column) ?? "")
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(pointer, index))
            guard count > 0, let base = sqlite3_column_blob(pointer, index) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: base, count: count)))
        default: return .null
        }
    }

    public func int64(at column: Int) -> Int64 { sqlite3_column_int64(pointer, Int32(column)) }
    public func double(at column: Int) -> Double { sqlite3_column_double(pointer, Int32(column)) }
    public func string(at column: Int) -> String? {
        // By length, not up to the first NUL: text may hold one.
        guard let text = sqlite3_column_text(pointer, Int32(column)) else { return nil }
        let count = Int(sqlite3_column_bytes(pointer, Int32(column)))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    private func check(_ rc: Int32) throws(SQLiteError) {
        guard rc == SQLITE_OK else {
            throw SQLiteError(code: rc, message: database.lastErrorMessage, context: SQLiteDatabase.excerpt(sql))
        }
    }

    // SQLITE_TRANSIENT: SQLite copies the bytes before the call returns.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
    // SQLITE_STATIC: SQLite uses the bytes where they are (see `held`).
    private static let `static`: sqlite3_destructor_type? = nil
}
