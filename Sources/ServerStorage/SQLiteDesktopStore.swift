import Foundation
public import DesktopBridgeServer
import DesktopBridgeWire
public import LabStore
import LabKernel

/// The desktop bridge's history (the seed's Tinyvex `acp_events`): one row per session
/// and one per update it broadcast, the update stored in the current ACP dialect's JSON
/// and read back into `SessionUpdate`, so a phone of either dialect rebuilds the same
/// timeline after the desktop restarts.
public final class SQLiteDesktopStore {
    public let database: SQLiteDatabase
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    public init(path: String) throws {
        database = try .serverStore(path: path, schema: """
            CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, json TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS acp_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL,
                                                   kind TEXT NOT NULL, update_json TEXT NOT NULL, PRIMARY KEY (session_id, seq));
            """)
        encoder.outputFormatting = [.sortedKeys]
    }

    public func apply(_ changes: [DesktopStoreChange]) throws {
        guard !changes.isEmpty else { return }
        try database.transaction {
            for change in changes {
                switch change {
                case .session(let record):
                    try database.run("INSERT OR REPLACE INTO sessions (id, json) VALUES (?, ?)",
                                     [.text(record.id), .text(String(decoding: try encoder.encode(record), as: UTF8.self))])
                case .event(let session, let entry):
                    try database.run("INSERT OR REPLACE INTO acp_events (session_id, seq, ts, kind, update_json) VALUES (?, ?, ?, ?, ?)",
                                     [.text(session), .integer(Int64(entry.seq)), .integer(entry.at), .text(entry.update.kind),
                                      .text(entry.update.json(.current).canonicalText)])
                case .deleteSession(let id):
                    try database.run("DELETE FROM acp_events WHERE session_id = ?", [.text(id)])
                    try database.run("DELETE FROM sessions WHERE id = ?", [.text(id)])
                }
            }
        }
    }

    public func load() throws -> DesktopState {
        var state = DesktopState()
        for row in try database.query("SELECT json FROM sessions") {
            guard case .text(let text) = row[0] else { continue }
            let record = try decoder.decode(SessionRecord.self, from: Data(text.utf8))
            state.sessions[record.id] = record
        }
        for row in try database.query("SELECT session_id, seq, ts, update_json FROM acp_events ORDER BY session_id, seq") {
            guard case .text(let session) = row[0], case .integer(let seq) = row[1], case .integer(let at) = row[2], case .text(let json) = row[3],
                  let value = try? JSONValue.parse(json), let update = SessionUpdate(json: value, dialect: .current) else { continue }
            state.history[session, default: []].append(HistoryEntry(seq: Int(seq), at: at, update: update))
        }
        return state
    }
}
