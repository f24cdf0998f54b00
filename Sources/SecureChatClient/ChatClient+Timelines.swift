/// Where a client keeps its delivered messages: each channel's timeline, in order, as the
/// messages themselves.
///
/// A phone keeps every message of its day, so they are stored once and densely: a
/// dictionary of them by id beside timelines of ids kept each message twice over and its
/// table a third empty. An id is looked up where it can be: a page or a frame names its
/// channel and asks about recent messages, found from the end of that channel's timeline;
/// an edit or a delete by id alone looks through every timeline, which only actions do.
///
/// Given an archive (`setAside`), each channel keeps only its newest few messages in
/// memory and the older ones there, as an app keeps its history in its database and only
/// the screen's worth in memory. What a client reads is at the newest end: the last
/// message's time for a catch-up, the recent senders whose origin a new message shares.
/// Within a channel every message set aside sorts before every one kept (they leave
/// oldest first, and one older than the kept ones goes straight there), so the newest is
/// always in memory; the lookups by id, the counts and the whole timeline read the archive
/// as well.
extension ChatClient.Snapshot {
    /// How many messages this device has had delivered (those of channels it left too).
    public var messageCount: Int {
        timelines.values.reduce(0) { $0 + $1.count } + (formerTimelines?.values.reduce(0) { $0 + $1.count } ?? 0) + messagesSetAside
    }

    /// How many messages a channel's timeline holds.
    func count(in channel: String) -> Int {
        (timelines[channel]?.count ?? 0) + (archive.map { $0.archive.count(in: channel, former: false, owner: $0.owner) } ?? 0)
    }

    /// A channel's whole timeline, in order (the messages set aside first).
    public func timeline(_ channel: String) -> [ChatClientMessage] {
        let setAside = archive.map { $0.archive.messages(in: channel, former: false, owner: $0.owner).sorted(by: Self.precedes) } ?? []
        return setAside + (timelines[channel] ?? [])
    }

    /// Drops what this snapshot set aside, for a store that is being replaced (a new
    /// install): the archive outlives the snapshot, and would keep its rows to the end.
    public func forgetSetAside() {
        if let archive { archive.archive.forget(owner: archive.owner) }
    }

    /// Sets older messages aside into `archive` from now on, under `owner` (a number no
    /// other snapshot given that archive uses), keeping each channel's newest
    /// `keptPerChannel` (at least 1) in memory.
    public mutating func setAside(into archive: any TimelineArchive, owner: Int, keepingPerChannel kept: Int) {
        self.archive = TimelineArchiveSlot(archive: archive, owner: owner, keptPerChannel: max(1, kept))
        for channel in timelines.keys { trim(channel) }
        for (channel, line) in formerTimelines ?? [:] {
            for message in line { put(message, in: channel, former: true, isNew: true) }
        }
        formerTimelines = nil
    }

    /// The order of a timeline: `created_at`, then id.
    static func precedes(_ a: ChatClientMessage, _ b: ChatClientMessage) -> Bool {
        (a.compactCreatedAt, a.compactID) < (b.compactCreatedAt, b.compactID)
    }

    /// Whether the message was delivered here (in `channel`, when it is known).
    public func holds(_ id: ChatID, in channel: String? = nil) -> Bool { holdsAnywhere(id, in: channel) }

    /// The delivered message with that id.
    public func message(_ id: ChatID) -> ChatClientMessage? {
        if let place = place(of: id, in: nil) { return lines(place.former)[place.channel]![place.index] }
        return archive.flatMap { $0.archive.message(id, in: nil, owner: $0.owner)?.message }
    }

    /// Changes the delivered message with that id where it is; returns it as changed (nil:
    /// no such message, or `change` returned false and nothing changed).
    mutating func update(_ id: ChatID, _ change: (inout ChatClientMessage) -> Bool) -> ChatClientMessage? {
        guard let place = place(of: id, in: nil) else {
            guard let archive, var held = archive.archive.message(id, in: nil, owner: archive.owner), change(&held.message) else { return nil }
            put(held.message, in: held.channel, former: held.former, isNew: false)
            return held.message
        }
        if place.former {
            guard change(&formerTimelines![place.channel]![place.index]) else { return nil }
            return formerTimelines![place.channel]![place.index]
        }
        guard change(&timelines[place.channel]![place.index]) else { return nil }
        return timelines[place.channel]![place.index]
    }

    /// Puts a newly delivered message in its channel's timeline, ordered by `created_at`
    /// then id: after the last one that is not later (messages mostly arrive in order, so
    /// the search starts at the end).
    mutating func insert(_ message: ChatClientMessage, in channel: String) {
        let line = timelines[channel] ?? []
        var position = line.endIndex
        while position > line.startIndex, Self.precedes(message, line[position - 1]) {
            position -= 1
        }
        timelines[channel, default: []].insert(message, at: position)  // in place: no copy of the timeline
        trim(channel)  // one older than every message kept leaves at once
    }

    /// Moves a channel's oldest messages beyond the kept number to the archive.
    private mutating func trim(_ channel: String) {
        guard let archive, let count = timelines[channel]?.count, count > archive.keptPerChannel else { return }
        let leaving = timelines[channel]!.prefix(count - archive.keptPerChannel)
        for message in leaving { put(message, in: channel, former: false, isNew: true) }
        timelines[channel]!.removeFirst(leaving.count)
    }

    private mutating func put(_ message: ChatClientMessage, in channel: String, former: Bool, isNew: Bool) {
        guard let archive else { return }
        archive.archive.put(message, in: channel, former: former, owner: archive.owner)
        if isNew { messagesSetAside += 1 }
    }

    /// The version held of an edited message is the one edited at `editedAt` (the server's
    /// text): an edit event for it, or an older one, is then not opened.
    mutating func noteEdit(_ id: ChatID, at editedAt: String) {
        if editedAt.isEmpty { return }
        if self.editedAt == nil { self.editedAt = [:] }
        self.editedAt![id] = editedAt
    }

    /// A channel this device left: its timeline goes from view, and its messages stay
    /// delivered (a page of it after a rejoin does not deliver them again).
    mutating func retireTimeline(_ channel: String) {
        if let archive { archive.archive.retire(channel, owner: archive.owner) }
        guard let line = timelines.removeValue(forKey: channel) else { return }
        if archive != nil {
            for message in line { put(message, in: channel, former: true, isNew: true) }
            return
        }
        if formerTimelines == nil { formerTimelines = [:] }
        formerTimelines![channel, default: []] += line
    }

    // MARK: Finding a message

    private func lines(_ former: Bool) -> [String: [ChatClientMessage]] { former ? formerTimelines ?? [:] : timelines }

    /// Whether the message is here, in memory or set aside.
    private func holdsAnywhere(_ id: ChatID, in channel: String?) -> Bool {
        if place(of: id, in: channel) != nil { return true }
        return archive.map { $0.archive.message(id, in: channel, owner: $0.owner) != nil } ?? false
    }

    private func place(of id: ChatID, in channel: String?) -> (channel: String, former: Bool, index: Int)? {
        for former in [false, true] {
            let lines = lines(former)
            if let channel {
                if let index = lines[channel]?.lastIndex(where: { $0.compactID == id }) { return (channel, former, index) }
            } else {
                for (name, line) in lines {
                    if let index = line.lastIndex(where: { $0.compactID == id }) { return (name, former, index) }
                }
            }
        }
        return nil
    }
}

/// Where a client's older messages go (the simulator gives its phones one temporary SQLite
/// file, `SQLiteTimelineArchive`): rows by owner (one snapshot), channel and id, marked
/// `former` once the device left the channel.
///
/// Every call answers at once; the core stays free of I/O waits. A snapshot holds the
/// archive by reference, so copies of it share the rows set aside: a driver that keeps a
/// snapshot's older copy (to restore it later) must not give it an archive, and a snapshot
/// encodes only what is in memory. The simulator keeps one copy of each phone's snapshot,
/// which is its app's storage, so neither arises there.
public protocol TimelineArchive: AnyObject, Sendable {
    /// Stores `message`, replacing the owner's message with its id.
    func put(_ message: ChatClientMessage, in channel: String, former: Bool, owner: Int)
    /// The owner's message with that id (in `channel`, when given), where it is.
    func message(_ id: ChatID, in channel: String?, owner: Int) -> (message: ChatClientMessage, channel: String, former: Bool)?
    /// The owner's messages of a channel, in no particular order.
    func messages(in channel: String, former: Bool, owner: Int) -> [ChatClientMessage]
    func count(in channel: String, former: Bool, owner: Int) -> Int
    /// Marks the owner's messages of a channel former: the device left it.
    func retire(_ channel: String, owner: Int)
    /// Drops every message of the owner: its store was replaced (the app installed anew)
    /// and nothing reads them again.
    func forget(owner: Int)
}

/// A snapshot's archive, the number its rows are kept under, and how many of each
/// channel's messages stay in memory.
public struct TimelineArchiveSlot: Sendable {
    let archive: any TimelineArchive
    let owner: Int
    let keptPerChannel: Int
}
