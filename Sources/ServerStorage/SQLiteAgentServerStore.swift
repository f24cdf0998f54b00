import Foundation
public import AgentRuntimeServer
public import LabStore
import LabKernel

/// The agent runtime's database: chats, transcripts (one row per event), tool calls and
/// upload records in SQLite, and each upload's bytes in a file named by its id under
/// `uploads/` beside the database (never by the client's filename). `apply` commits a
/// reply's changes (files first, then rows in one transaction); `load` rebuilds the state,
/// so a restart keeps every chat resumable.
public final class SQLiteAgentServerStore {
    public let database: SQLiteDatabase
    public let uploadsDirectory: String
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    public init(path: String) throws {
        uploadsDirectory = ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent("agent-uploads")
        try FileManager.default.createDirectory(atPath: uploadsDirectory, withIntermediateDirectories: true)
        database = try .serverStore(path: path, schema: """
            CREATE TABLE IF NOT EXISTS chats (id TEXT PRIMARY KEY, json TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS events (chat_id TEXT NOT NULL, idx INTEGER NOT NULL, text TEXT NOT NULL, PRIMARY KEY (chat_id, idx));
            CREATE TABLE IF NOT EXISTS tool_calls (id TEXT PRIMARY KEY, json TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS uploads (id TEXT PRIMARY KEY, json TEXT NOT NULL);
            """)
        encoder.outputFormatting = [.sortedKeys]
    }

    /// Where an upload's bytes are.
    public func uploadPath(_ id: String) -> String { (uploadsDirectory as NSString).appendingPathComponent(id) }

    public func apply(_ changes: [AgentStoreChange]) throws {
        guard !changes.isEmpty else { return }
        for case .upload(let record, let bytes) in changes {
            let temporary = uploadPath(record.id) + ".partial"
            guard FileManager.default.createFile(atPath: temporary, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
                throw CocoaError(.fileWriteUnknown)
            }
            // rename(2) replaces atomically: a reader never sees half a file.
            guard rename(temporary, uploadPath(record.id)) == 0 else { throw CocoaError(.fileWriteUnknown) }
        }
        try database.transaction {
            for change in changes {
                switch change {
                case .chat(let chat):
                    try database.run("INSERT OR REPLACE INTO chats (id, json) VALUES (?, ?)", [.text(chat.id), .text(try json(chat))])
                case .event(let chat, let index, let text):
                    try database.run("INSERT OR REPLACE INTO events (chat_id, idx, text) VALUES (?, ?, ?)", [.text(chat), .integer(Int64(index)), .text(text)])
                case .toolCall(let call):
                    try database.run("INSERT OR REPLACE INTO tool_calls (id, json) VALUES (?, ?)", [.text(call.id), .text(try json(call))])
                case .upload(let record, _):
                    try database.run("INSERT OR REPLACE INTO uploads (id, json) VALUES (?, ?)", [.text(record.id), .text(try json(record))])
                }
            }
        }
    }

    func json(_ value: some Encodable) throws -> String { String(decoding: try encoder.encode(value), as: UTF8.self) }

    public func load() throws -> AgentServerState {
        var state = AgentServerState()
        var chats: [AgentChat] = []
        for row in try database.query("SELECT json FROM chats") {
            guard case .text(let text) = row[0] else { continue }
            chats.append(try decoder.decode(AgentChat.self, from: Data(text.utf8)))
        }
        // Creation order, so each user's list keeps the order the routes rely on.
        for chat in chats.sorted(by: { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }) {
            state.insert(chat)
            state.transcripts[chat.id] = []
        }
        for row in try database.query("SELECT chat_id, idx, text FROM events ORDER BY chat_id, idx") {
            guard case .text(let chat) = row[0], case .integer(let index) = row[1], case .text(let text) = row[2],
                  state.transcripts[chat]?.count == Int(index) else { continue }
            state.transcripts[chat]!.append(text)
        }
        for row in try database.query("SELECT json FROM tool_calls") {
            guard case .text(let text) = row[0] else { continue }
            let call = try decoder.decode(ToolCallRecord.self, from: Data(text.utf8))
            state.toolCalls[call.id] = call
        }
        for row in try database.query("SELECT json FROM uploads") {
            guard case .text(let text) = row[0] else { continue }
            let upload = try decoder.decode(UploadRecord.self, from: Data(text.utf8))
            state.uploads[upload.id] = upload
        }
        return state
    }
}
