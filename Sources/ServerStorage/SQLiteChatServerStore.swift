import Foundation
public import LabStore
public import SecureChatServer
import LabKernel

/// The chat server's database: one `rows` table of `(kind, key, json)` holding the
/// durable tables of `ChatServerState` and the audit log. `apply` writes the rows a
/// request changed (its reply's `changes`) in one transaction; `load` rebuilds the state and its indexes.
/// Tickets, sockets, presence and rate buckets are not stored: they do not outlive the
/// process. Message contents of protocol version 2 are ciphertext, so the file holds none
/// of a conversation's plaintext (a test searches it).
public final class SQLiteChatServerStore {
    public let database: SQLiteDatabase
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    public init(path: String) throws {
        database = try .serverStore(path: path, schema: """
            CREATE TABLE IF NOT EXISTS rows (kind TEXT NOT NULL, key TEXT NOT NULL, json TEXT NOT NULL, PRIMARY KEY (kind, key));
            """)
        encoder.outputFormatting = [.sortedKeys]
    }

    /// Writes a request's changes, atomically.
    public func apply(_ changes: [ChatStoreChange]) throws {
        guard !changes.isEmpty else { return }
        let writes = try changes.map(row)
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

    /// A change as its row: kind, key, and the JSON (nil: delete).
    func row(_ change: ChatStoreChange) throws -> (String, String, String?) {
        func json(_ value: (some Encodable)?) throws -> String? { try value.map { String(decoding: try encoder.encode($0), as: UTF8.self) } }
        switch change {
        case .user(let key, let value): return ("user", key, try json(value))
        case .device(let key, let value): return ("device", key, try json(value))
        case .refreshToken(let key, let value): return ("refresh", key, try json(value))
        case .accessToken(let key, let value): return ("access", key, try json(value))
        case .bundle(let key, let value): return ("bundle", key, try json(value))
        case .channel(let key, let value): return ("channel", key, try json(value))
        case .members(let key, let value): return ("members", key, try json(value))
        case .invites(let key, let value): return ("invites", key, try json(value))
        case .message(let key, let value): return ("message", key, try json(value))
        case .x3dhSetup(let key, let value): return ("x3dh", key, try json(value))
        case .senderKeys(let key, let value): return ("sender_keys", key, try json(value))
        case .settings(let settings): return ("settings", "all", JSONValue.object(settings).canonicalText)
        case .audit(let index, let entry): return ("audit", String(format: "%010d", index), try json(entry))
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
            // "client_id" rows (older databases stored the retried-send index) are derived:
            // `rebuildIndexes` makes it from the messages.
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
