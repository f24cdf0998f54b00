public import LabStore
public import SecureChatClient

/// What the chat clients of a simulated fleet set aside (`TimelineArchive`): each phone's
/// older messages, in one temporary SQLite file (`ArchiveFile`) for the whole fleet, by
/// owner (a phone's snapshot), id and channel. Ids and times are kept as the text the
/// server sent; a message read back is compacted again as it was on arrival.
///
/// One simulated world owns an archive and calls it from one thread at a time, as its
/// clients do (hence `@unchecked Sendable`). A failed write is kept (`failure`), and later
/// calls do nothing.
public final class SQLiteTimelineArchive: TimelineArchive, @unchecked Sendable {
    let file: ArchiveFile
    public var failure: String? { file.failure }
    /// How many messages are set aside, all owners together (a count of the table: a
    /// replaced row is not told apart from a new one when it is written).
    public var messageCount: Int { file.count("messages") }

    public init() throws(SQLiteError) {
        file = try ArchiveFile("the chat clients' timeline archive", schema: """
            CREATE TABLE messages (owner INTEGER NOT NULL, id TEXT NOT NULL, channel TEXT NOT NULL, former INTEGER NOT NULL,
                                   sender TEXT NOT NULL, sender_device TEXT, text TEXT NOT NULL, created_at TEXT NOT NULL,
                                   edited INTEGER NOT NULL, deleted INTEGER NOT NULL, PRIMARY KEY (owner, id)) WITHOUT ROWID;
            CREATE INDEX messages_by_channel ON messages (owner, channel, former);
            """)
    }

    static let columns = "id, channel, former, sender, sender_device, text, created_at, edited, deleted"

    public func put(_ message: ChatClientMessage, in channel: String, former: Bool, owner: Int) {
        file.attempt {
            try file.run("INSERT OR REPLACE INTO messages (owner, \(Self.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .integer(Int64(owner)), .text(message.id), .text(channel), .integer(former ? 1 : 0), .text(message.senderID),
                .textOrNull(message.senderDeviceID), .text(message.text), .text(message.createdAt), .integer(message.edited ? 1 : 0),
                .integer(message.deleted ? 1 : 0),
            ])
        }
    }

    public func message(_ id: ChatID, in channel: String?, owner: Int) -> (message: ChatClientMessage, channel: String, former: Bool)? {
        let bindings: [SQLiteValue] = [.integer(Int64(owner)), .text(id.text)] + (channel.map { [.text($0)] } ?? [])
        return rows("WHERE owner = ? AND id = ?\(channel == nil ? "" : " AND channel = ?")", bindings).first
    }

    public func messages(in channel: String, former: Bool, owner: Int) -> [ChatClientMessage] {
        rows("WHERE owner = ? AND channel = ? AND former = ?", [.integer(Int64(owner)), .text(channel), .integer(former ? 1 : 0)]).map(\.message)
    }

    public func count(in channel: String, former: Bool, owner: Int) -> Int {
        file.count("messages", "WHERE owner = ? AND channel = ? AND former = ?", [.integer(Int64(owner)), .text(channel), .integer(former ? 1 : 0)])
    }

    public func retire(_ channel: String, owner: Int) {
        file.attempt { try file.run("UPDATE messages SET former = 1 WHERE owner = ? AND channel = ?", [.integer(Int64(owner)), .text(channel)]) }
    }

    public func forget(owner: Int) {
        file.attempt { try file.run("DELETE FROM messages WHERE owner = ?", [.integer(Int64(owner))]) }
    }

    private func rows(_ clauses: String, _ bindings: [SQLiteValue]) -> [(message: ChatClientMessage, channel: String, former: Bool)] {
        file.attempt {
            try file.rows("SELECT \(Self.columns) FROM messages \(clauses)", bindings) { row in
                let channel = row.string(at: 1) ?? ""
                let message = ChatClientMessage(id: row.string(at: 0) ?? "", channelID: channel, senderID: row.string(at: 3) ?? "",
                                                senderDeviceID: row.string(at: 4), text: row.string(at: 5) ?? "",
                                                createdAt: row.string(at: 6) ?? "", edited: row.int64(at: 7) != 0, deleted: row.int64(at: 8) != 0)
                return (message, channel, row.int64(at: 2) != 0)
            }
        } ?? []
    }
}
