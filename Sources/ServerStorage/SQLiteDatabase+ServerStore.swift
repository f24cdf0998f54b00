public import LabStore

extension SQLiteDatabase {
    /// A reference server's database: write-ahead logging (readers never wait for the
    /// writer), `synchronous = NORMAL` (a commit survives the process crashing, which is
    /// what `fleetlab serve`'s restarts need), then `schema`.
    public static func serverStore(path: String, schema: String) throws -> SQLiteDatabase {
        let database = try SQLiteDatabase(path: path)
        try database.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;\n" + schema)
        return database
    }
}
