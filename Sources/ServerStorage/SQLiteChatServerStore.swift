import Foundation
public import LabStore
public import SecureChatServer
import LabKernel

/// The chat server's database: one `rows` table of `(kind, key, json)` holding the
/// durable tables of `ChatServerState` and the audit log. `commit` writes the rows a
/// request changed in one transaction; `load` rebuilds the state and its indexes.
/// Tickets, sockets, presence and rate buckets are not stored: they do not outlive the
/// process. Message contents of protocol version 2 are ciphertext, so the file holds none
/// of a conversation's plaintext (a test searches it).
public final class SQLiteChatServerStore {
    public let database: SQLiteDatabase
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    public init(path: String) throws {
        database = try SQLiteDatabase(path: path)
        try database.execute("""
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = NORMAL;
            CREATE TABLE IF NOT EXISTS rows (kind TEXT NOT NULL, key TEXT NOT NULL, json TEXT NOT NULL, PRIMARY KEY (kind, key));
            """)
        encoder.outputFormatting = [.sortedKeys]
    }

    /// Writes every row changed since the last commit, atomically.
    public func commit(_ state: inout ChatServerState) throws {
        var writes: [(String, String, String?)] = []
        func collect<V: Encodable>(_ kind: String, _ table: inout Table<V>) throws {
            for (key, value) in table.takeDirty() {
                writes.append((kind, key, try value.map { String(decoding: try encoder.encode($0), as: UTF8.self) }))
            }
        }
        try collect("user", &state.users)
        try collect("device", &state.devices)
        try collect("refresh", &state.refreshTokens)
        try collect("access", &state.accessTokens)
        try collect("bundle", &state.bundles)
        try collect("channel", &state.channels)
        try collect("members", &state.members)
        try collect("invites", &state.invites)
        try collect("message", &state.messages)
        try collect("client_id", &state.messageByClientID)
        try collect("x3dh", &state.x3dhSetups)
        try collect("sender_keys", &state.senderKeys)
        if state.settingsChanged {
            writes.append(("settings", "all", JSONValue.object(state.settings).canonicalText))
            state.settingsChanged = false
        }
        for index in state.auditStored..<state.audit.count {
            writes.append(("audit", String(format: "%010d", index), String(decoding: try encoder.encode(state.audit[index]), as: UTF8.self)))
        }
        state.auditStored = state.audit.count
        guard !writes.isEmpty else { return }
        try database.transaction {
            for (kind, key, json) in writes {
                if let json {
                    try database.run("INSERT OR REPLACE INTO rows (kind, key, json) VALUES (?, ?, ?)", [.text(kind), .text(key), .text(json)])
                } else {
                    try database.run("DELETE FROM rows WHERE kind = ? AND key = ?", [.text(kind), .text(key)])
                }
            }
        }
    }

    public func load() throws -> ChatServerState {
        var state = ChatServerState()
        for row in try database.query("SELECT kind, key, json FROM rows ORDER BY kind, key") {
            guard case .text(let kind) = row[0], case .text(let key) = row[1], case .text(let json) = row[2] else { continue }
            let data = Data(json.utf8)
            switch kind {
            case "user": state.users.load(key, try decoder.decode(ChatUser.self, from: data))
            case "device": state.devices.load(key, try decoder.decode(ChatDevice.self, from: data))
            case "refresh": state.refreshTokens.load(key, try decoder.decode(RefreshRecord.self, from: data))
            case "access": state.accessTokens.load(key, try decoder.decode(AccessRecord.self, from: data))
            case "bundle": state.bundles.load(key, try decoder.decode(KeyBundleRecord.self, from: data))
            case "channel": state.channels.load(key, try decoder.decode(ChatChannel.self, from: data))
            case "members": state.members.load(key, try decoder.decode([String: Membership].self, from: data))
            case "invites": state.invites.load(key, try decoder.decode([String: ChannelInvite].self, from: data))
            case "message": state.messages.load(key, try decoder.decode(ChatMessage.self, from: data))
            case "client_id": state.messageByClientID.load(key, try decoder.decode(String.self, from: data))
            case "x3dh": state.x3dhSetups.load(key, try JSONValue.parse(json))
            case "sender_keys": state.senderKeys.load(key, try decoder.decode([String: SenderKeyRecord].self, from: data))
            case "settings": state.settings = try JSONValue.parse(json).objectValue ?? state.settings
            case "audit": state.audit.append(try decoder.decode(AuditEntry.self, from: data))
            default: continue
            }
        }
        state.auditStored = state.audit.count
        state.rebuildIndexes()
        return state
    }
}
