/// Where a client keeps its delivered messages: each channel's timeline, in order, as the
/// messages themselves.
///
/// A phone keeps every message of its day, so they are stored once and densely: a
/// dictionary of them by id beside timelines of ids kept each message twice over and its
/// table a third empty. An id is looked up where it can be: a page or a frame names its
/// channel and asks about recent messages, found from the end of that channel's timeline;
/// an edit or a delete by id alone looks through every timeline, which only actions do.
extension ChatClient.Snapshot {
    /// How many messages this device has had delivered (those of channels it left too).
    public var messageCount: Int {
        timelines.values.reduce(0) { $0 + $1.count } + (formerTimelines?.values.reduce(0) { $0 + $1.count } ?? 0)
    }

    /// Whether the message was delivered here (in `channel`, when it is known).
    public func holds(_ id: ChatID, in channel: String? = nil) -> Bool { place(of: id, in: channel) != nil }

    /// The delivered message with that id.
    public func message(_ id: ChatID) -> ChatClientMessage? {
        place(of: id, in: nil).map { place in lines(place.former)[place.channel]![place.index] }
    }

    /// Changes the delivered message with that id where it is; returns it as changed (nil:
    /// no such message, or `change` returned false and nothing changed).
    mutating func update(_ id: ChatID, _ change: (inout ChatClientMessage) -> Bool) -> ChatClientMessage? {
        guard let place = place(of: id, in: nil) else { return nil }
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
        while position > line.startIndex,
              (line[position - 1].compactCreatedAt, line[position - 1].compactID) > (message.compactCreatedAt, message.compactID) {
            position -= 1
        }
        timelines[channel, default: []].insert(message, at: position)  // in place: no copy of the timeline
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
        guard let line = timelines.removeValue(forKey: channel) else { return }
        if formerTimelines == nil { formerTimelines = [:] }
        formerTimelines![channel, default: []] += line
    }

    // MARK: Finding a message

    private func lines(_ former: Bool) -> [String: [ChatClientMessage]] { former ? formerTimelines ?? [:] : timelines }

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
