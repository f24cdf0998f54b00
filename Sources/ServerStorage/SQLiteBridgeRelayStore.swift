import Foundation
public import AIBridgeRelay
public import LabStore

/// The AI bridge relay's database: the daemons it knows (their identity and pairing keys)
/// and the tokens it issued, as their SHA-256 only: a copy of the file authenticates
/// nobody. PINs, tunnels and exchanges are not stored.
public final class SQLiteBridgeRelayStore {
    public let database: SQLiteDatabase
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    public init(path: String) throws {
        database = try .serverStore(path: path, schema: """
            CREATE TABLE IF NOT EXISTS daemons (id TEXT PRIMARY KEY, json TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, json TEXT NOT NULL);
            """)
        encoder.outputFormatting = [.sortedKeys]
    }

    public func apply(_ changes: [RelayStoreChange]) throws {
        guard !changes.isEmpty else { return }
        try database.transaction {
            for change in changes {
                switch change {
                case .daemon(let record):
                    try database.run("INSERT OR REPLACE INTO daemons (id, json) VALUES (?, ?)", [.text(record.id), .text(try json(record))])
                case .token(let hash, let record?):
                    try database.run("INSERT OR REPLACE INTO tokens (hash, json) VALUES (?, ?)", [.text(hash), .text(try json(record))])
                case .token(let hash, nil):
                    try database.run("DELETE FROM tokens WHERE hash = ?", [.text(hash)])
                }
            }
        }
    }

    func json(_ value: some Encodable) throws -> String { String(decoding: try encoder.encode(value), as: UTF8.self) }

    public func load() throws -> RelayState {
        var state = RelayState()
        for row in try database.query("SELECT json FROM daemons") {
            guard case .text(let text) = row[0] else { continue }
            let record = try decoder.decode(DaemonRecord.self, from: Data(text.utf8))
            state.daemons[record.id] = record
        }
        for row in try database.query("SELECT hash, json FROM tokens ORDER BY hash") {
            guard case .text(let hash) = row[0], case .text(let text) = row[1] else { continue }
            state.load(token: hash, try decoder.decode(TokenRecord.self, from: Data(text.utf8)))
        }
        return state
    }
}
