import LabStore

/// The database an archive sets rows aside into (`SQLiteChatArchive`, `SQLiteSyncArchive`,
/// `SQLiteTimelineArchive`):
/// SQLite's private, temporary database, which it keeps in a file of its own, deletes when
/// the archive goes, and of which it holds only a page cache of `cacheKiB` in memory, so a
/// simulated day of a fleet's history costs disk, not the process's memory.
///
/// Nothing in it needs to survive a crash of the process, so it has no journal, is never
/// synced and never committed (one transaction for its life). A failed statement is kept (`failure`) and later calls do nothing: the
/// run that owns the archive ends with the failure rather than go on with rows missing.
final class ArchiveFile {
    let database: SQLiteDatabase
    /// What the archive holds, for the failure's message.
    private let name: String
    private(set) var failure: String?

    init(_ name: String, schema: String) throws(SQLiteError) {
        self.name = name
        database = try SQLiteDatabase(path: "")  // "": SQLite's private temporary database
        // One transaction for the archive's life: a statement on its own would be a
        // transaction of its own, and committing each one cost as much as the statement.
        // Pages the cache cannot hold spill to the file; nothing is ever rolled back.
        try database.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE; PRAGMA cache_size = -\(Self.cacheKiB);"
                             + schema + "; BEGIN;")
    }

    /// The page cache of each archive. SQLite's default is 2 MiB; pages it cannot hold
    /// are read back from the operating system's cache of the file, not from disk.
    static let cacheKiB = 512

    /// Runs `body` unless an earlier call failed; keeps its failure.
    @discardableResult
    func attempt<T>(_ body: () throws -> T) -> T? {
        guard failure == nil else { return nil }
        do {
            return try body()
        } catch {
            failure = "\(name): \(error)"
        }
        return nil
    }

    /// Runs a query and reads each row it returns with `read`.
    func rows<Row>(_ sql: String, _ bindings: [SQLiteValue], _ read: (SQLiteStatement) -> Row) throws -> [Row] {
        var rows: [Row] = []
        try database.forEachRow(sql, bindings) { rows.append(read($0)); return true }
        return rows
    }

    /// How many rows `table` has, or those `filter` (a `WHERE` clause) selects; 0 once a
    /// call has failed.
    func count(_ table: String, _ filter: String = "", _ bindings: [SQLiteValue] = []) -> Int {
        attempt { Int(try rows("SELECT count(*) FROM \(table) \(filter)", bindings) { $0.int64(at: 0) }.first ?? 0) } ?? 0
    }

    /// Runs a statement that returns no rows; how many rows it changed.
    @discardableResult
    func run(_ sql: String, _ bindings: [SQLiteValue]) throws -> Int {
        try database.run(sql, bindings)
        return database.changes
    }
}

extension SQLiteValue {
    /// Text, or NULL for nil.
    static func textOrNull(_ value: String?) -> SQLiteValue { value.map { .text($0) } ?? .null }
    /// An integer, or NULL for nil.
    static func integerOrNull(_ value: Int64?) -> SQLiteValue { value.map { .integer($0) } ?? .null }
}

extension SQLiteStatement {
    /// The integer in `column`, nil when it is NULL.
    func optionalInt64(at column: Int) -> Int64? { value(at: column) == .null ? nil : int64(at: column) }
}
