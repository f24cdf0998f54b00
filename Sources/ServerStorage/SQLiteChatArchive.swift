public import LabKernel
public import LabStore
public import SecureChatServer

/// What a chat server sets aside, its older messages (`MessageArchive`) and its rotated
/// and revoked refresh tokens (`RefreshTokenArchive`, SQLiteChatArchive+RefreshTokens.swift),
/// in a temporary SQLite file (`ArchiveFile`).
///
/// One simulated world owns an archive and calls it from one thread at a time, as its
/// server core does (hence `@unchecked Sendable`). A failed write is kept (`failure`), and
/// later calls do nothing.
public final class SQLiteChatArchive: MessageArchive, RefreshTokenArchive, @unchecked Sendable {
    let file: ArchiveFile
    var database: SQLiteDatabase { file.database }
    public var failure: String? { file.failure }
    /// How many messages and tokens are set aside (counts of the tables: only the tables'
    /// totals ask, which no request reads, so no write pays for a lookup to keep a running count).
    public var messageCount: Int { file.count("messages") }
    public var tokenCount: Int { file.count("refresh_tokens") }

    public init() throws(SQLiteError) {
        file = try ArchiveFile("the chat server's message archive", schema: """
            CREATE TABLE messages (id TEXT PRIMARY KEY, channel TEXT NOT NULL, sender TEXT NOT NULL, sender_device TEXT,
                                   content TEXT NOT NULL, content_type TEXT NOT NULL, version INTEGER NOT NULL, reply_to TEXT,
                                   client_id TEXT, edited_at INTEGER, created_at INTEGER NOT NULL, deleted INTEGER NOT NULL);
            CREATE INDEX messages_by_channel ON messages (channel, created_at);
            CREATE INDEX messages_by_client_id ON messages (sender, client_id) WHERE client_id IS NOT NULL;
            """ + Self.tokenSchema)
    }

    public func put(_ message: ChatMessage) {
        attempt {
            let statement = try database.statement(static: """
                INSERT OR REPLACE INTO messages (id, channel, sender, sender_device, content, content_type, version, reply_to, client_id,
                                                 edited_at, created_at, deleted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            try statement.bind([.text(message.id), .text(message.channelID), .text(message.senderID), SQLiteValue.textOrNull(message.senderDeviceID),
                                .text(message.content), .text(message.contentType), .integer(Int64(message.protocolVersion)),
                                SQLiteValue.textOrNull(message.replyToID), SQLiteValue.textOrNull(message.clientMessageID),
                                message.editedAt.map { .integer($0.nanoseconds) } ?? .null, .integer(message.createdAt.nanoseconds),
                                .integer(message.deleted ? 1 : 0)])
            try statement.execute()
        }
    }

    public func message(_ id: String) -> ChatMessage? {
        attempt { try rows(.one, "SELECT \(Self.columns) FROM messages WHERE id = ?", [.text(id)]).first } ?? nil
    }

    public func message(sentBy sender: String, clientID: String) -> ChatMessage? {
        attempt { try rows(.one, "SELECT \(Self.columns) FROM messages WHERE sender = ? AND client_id = ?", [.text(sender), .text(clientID)]).first } ?? nil
    }

    public func newest(_ limit: Int, in channel: String, before cutoff: Instant?) -> [ChatMessage] {
        attempt {
            try rows(.many, "SELECT \(Self.columns) FROM messages WHERE channel = ? AND created_at < ? AND deleted = 0 ORDER BY created_at DESC, id DESC LIMIT ?",
                     [.text(channel), .integer(cutoff?.nanoseconds ?? .max), .integer(Int64(limit))])
        } ?? []
    }

    public func removeMessage(_ id: String) {
        attempt {
            try file.run("DELETE FROM messages WHERE id = ?", [.text(id)])
        }
    }

    public func removeChannel(_ channel: String) {
        attempt {
            try file.run("DELETE FROM messages WHERE channel = ?", [.text(channel)])
        }
    }

    public func forEach(_ body: (ChatMessage) -> Void) {
        attempt { try rows(.many, "SELECT \(Self.columns) FROM messages ORDER BY rowid", [], each: body) }
    }

    // MARK: Rows

    static let columns = "id, channel, sender, sender_device, content, content_type, version, reply_to, client_id, edited_at, created_at, deleted"

    enum Rows { case one, many }

    func rows(_ expected: Rows, _ sql: String, _ bindings: [SQLiteValue]) throws -> [ChatMessage] {
        var messages: [ChatMessage] = []
        try rows(expected, sql, bindings) { messages.append($0) }
        return messages
    }

    func rows(_ expected: Rows, _ sql: String, _ bindings: [SQLiteValue], each: (ChatMessage) -> Void) throws {
        try database.forEachRow(sql, bindings) { statement in
            let message = ChatMessage(
                id: statement.string(at: 0) ?? "", channelID: statement.string(at: 1) ?? "", senderID: statement.string(at: 2) ?? "",
                senderDeviceID: statement.string(at: 3), content: statement.string(at: 4) ?? "", contentType: statement.string(at: 5) ?? "",
                protocolVersion: Int(statement.int64(at: 6)), replyToID: statement.string(at: 7), clientMessageID: statement.string(at: 8),
                editedAt: statement.value(at: 9) == .null ? nil : Instant(nanoseconds: statement.int64(at: 9)),
                createdAt: Instant(nanoseconds: statement.int64(at: 10)), deleted: statement.int64(at: 11) != 0)
            each(message)
            return expected == .many
        }
    }

    /// Runs `body` unless an earlier call failed; keeps its failure.
    @discardableResult
    func attempt<T>(_ body: () throws -> T) -> T? { file.attempt(body) }
}
