public import LabKernel

/// Where a chat server can set aside the messages it keeps but seldom reads: outside the
/// process's memory (the simulator gives it a temporary SQLite file,
/// `SQLiteChatArchive`), as the real server keeps its history in its database.
///
/// Every call answers at once; the core stays free of I/O waits. The archive is a
/// reference the state holds, so copies of the state share it: a message edited or
/// deleted in the archive after a copy was taken is edited or deleted for both. The
/// simulator keeps one copy of a server's state, so this never arises there; a driver
/// that keeps older copies of a state must not give it an archive. A failure to write is
/// the driver's to report (the simulator ends the run with it), not the core's.
public protocol MessageArchive: AnyObject, Sendable {
    /// Stores `message`, replacing the one with its id.
    func put(_ message: ChatMessage)
    func message(_ id: String) -> ChatMessage?
    /// The message `sender` sent with that `client_message_id`.
    func message(sentBy sender: String, clientID: String) -> ChatMessage?
    /// The newest `limit` messages of `channel` that are not deleted, created before
    /// `cutoff` (any time when nil), newest first.
    func newest(_ limit: Int, in channel: String, before cutoff: Instant?) -> [ChatMessage]
    func removeMessage(_ id: String)
    func removeChannel(_ channel: String)
    /// Calls `body` with every message set aside, in no particular order, one at a time
    /// (a day's messages are not all read back into memory at once).
    func forEach(_ body: (ChatMessage) -> Void)
    var messageCount: Int { get }
}

/// The chat server's messages: rows in memory, like any `Table`, and with an archive the
/// older ones set aside there.
///
/// Without an archive (the live driver, which has its database, and unit tests) every
/// message stays in memory and this is a `Table`. With one, each channel keeps its newest
/// `keptPerChannel` messages in memory (`ChatChannel.messageIDs`) and the rest in the
/// archive: a day of a fleet's messages is the largest thing a chat server holds, and
/// what its clients read is mostly the newest few of each channel (a catch-up's page).
/// Within a channel every message set aside is older than every one kept, since messages
/// leave oldest first and `created_at` strictly increases, so a page reads the kept ones
/// and goes on into the archive only past them. Messages leave memory without being
/// marked changed: they have not changed.
public struct MessageTable: Sendable {
    private var kept = Table<ChatMessage>()
    public private(set) var archive: (any MessageArchive)?
    /// How many of each channel's newest messages stay in memory when there is an archive.
    public private(set) var keptPerChannel = Int.max

    public init() {}

    /// Sets older messages aside into `archive` from now on, keeping each channel's newest
    /// `keptPerChannel` (at least 1) in memory.
    public mutating func setAside(into archive: any MessageArchive, keepingPerChannel kept: Int) {
        self.archive = archive
        keptPerChannel = max(1, kept)
    }

    public subscript(id: String) -> ChatMessage? {
        get { kept[id] ?? archive?.message(id) }
        set {
            if let archive, kept[id] == nil {
                if let newValue { archive.put(newValue) } else { archive.removeMessage(id) }
            } else {
                kept[id] = newValue
            }
        }
    }

    /// Stores a new message in memory.
    mutating func insert(_ message: ChatMessage) { kept[message.id] = message }

    /// Moves a kept message into the archive; returns it (nil: not kept here, or no archive).
    mutating func moveToArchive(_ id: String) -> ChatMessage? {
        guard let archive, let message = kept.rows[id] else { return nil }
        archive.put(message)
        kept.forget(id)
        return message
    }

    /// Every message, those set aside included (made anew on each call).
    public var values: [ChatMessage] {
        var all = Array(kept.values)
        archive?.forEach { all.append($0) }
        return all
    }

    /// Calls `body` with every message, those set aside included, one at a time.
    public func forEach(_ body: (ChatMessage) -> Void) {
        kept.values.forEach(body)
        archive?.forEach(body)
    }
    public var count: Int { kept.count + (archive?.messageCount ?? 0) }
    /// The messages in memory, by id.
    public var rows: [String: ChatMessage] { kept.rows }

    package mutating func load(_ key: String, _ value: ChatMessage) { kept.load(key, value) }
    package mutating func takeDirty() -> [(String, ChatMessage?)] { kept.takeDirty() }
}

extension ChatServerState {
    /// The message `sender` sent with that `client_message_id`: a retried send finds it.
    func message(sentBy sender: String, clientID: String) -> ChatMessage? {
        if let id = messageByClientID[ClientMessageKey(userID: sender, clientID: clientID)] { return messages[id] }
        return messages.archive?.message(sentBy: sender, clientID: clientID)
    }

    /// Appends a new message to its channel, and sets the channel's oldest aside when it
    /// keeps more than it may in memory.
    mutating func append(_ message: ChatMessage) {
        messages.insert(message)
        if let key = ClientMessageKey(message) { messageByClientID[key] = message.id }
        guard var channel = channels[message.channelID] else { return }
        channel.messageIDs.append(message.id)
        let surplus = channel.messageIDs.count - messages.keptPerChannel
        if surplus > 0 {
            for id in channel.messageIDs.prefix(surplus) {
                if let key = messages.moveToArchive(id).flatMap(ClientMessageKey.init) { messageByClientID[key] = nil }
            }
            channel.messageIDs.removeFirst(surplus)
            channel.setAsideCount += surplus
        }
        channels[message.channelID] = channel
    }
}
