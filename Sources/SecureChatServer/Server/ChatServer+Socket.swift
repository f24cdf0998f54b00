public import LabKernel

/// The result of a WebSocket connection attempt.
public enum ChatConnectResult: Sendable, Equatable {
    case accepted(connection: Int)
    /// Close with this code: 4001 for a bad or expired ticket, 4003 for a barred account.
    case refused(code: UInt16, reason: String)
}

extension ChatServer {
    /// `/ws?ticket=`: a ticket works once, within its 30 s; the socket hears every channel
    /// its user belongs to and the user's own events.
    public mutating func connect(ticket: String, now: Instant) -> ChatConnectResult {
        guard let record = state.tickets.removeValue(forKey: ticket), now < record.expiresAt else {
            return .refused(code: 4001, reason: "Invalid or expired ticket")
        }
        guard let user = state.users[record.userID], (try? checkStanding(user, now: now)) != nil else {
            return .refused(code: 4003, reason: "Account barred")
        }
        let id = state.nextConnection
        state.nextConnection += 1
        state.connections[id] = ChatServerState.Connection(userID: record.userID, deviceID: record.deviceID, familyID: record.familyID,
                                                           channels: state.channelsOfUser[record.userID] ?? [])
        state.connectionsOfUser[record.userID, default: []].insert(id)
        state.presence[record.userID] = "online"
        return .accepted(connection: id)
    }

    public mutating func disconnect(_ connection: Int) {
        guard let gone = state.connections.removeValue(forKey: connection) else { return }
        state.connectionsOfUser[gone.userID]?.remove(connection)
        if !state.connections.values.contains(where: { $0.userID == gone.userID }) { state.presence[gone.userID] = "offline" }
    }

    /// A text frame from a client: typing, presence or subscribe.
    public mutating func receive(_ connection: Int, text: String, now: Instant) -> [ChatOutput] {
        guard let conn = state.connections[connection] else { return [] }
        guard let frame = try? JSONValue.parse(text), let type = frame["type"]?.stringValue else {
            return [.send(connection: connection, ["error": "Invalid JSON"])]
        }
        func error(_ message: String) -> [ChatOutput] { [.send(connection: connection, ["error": .string(message)])] }
        switch type {
        case "typing.start", "typing.stop":
            guard let channel = frame["channel_id"]?.stringValue, state.isMember(conn.userID, of: channel) else {
                return error("Not a member of this channel")
            }
            return deliver(["type": .string(type), "user_id": .string(conn.userID), "channel_id": .string(channel)], users: memberIDs(channel)) {
                $0.channels.contains(channel) && $0.deviceID != conn.deviceID
            }
        case "presence.update":
            guard let status = frame["status"]?.stringValue, ["online", "away", "offline"].contains(status) else {
                return error("status is online, away or offline")
            }
            state.presence[conn.userID] = status
            let channels = state.channelsOfUser[conn.userID] ?? []
            return deliver(["type": "presence.update", "user_id": .string(conn.userID), "status": .string(status)]) {
                !$0.channels.isDisjoint(with: channels) && $0.userID != conn.userID
            }
        case "subscribe":
            guard let channel = frame["channel_id"]?.stringValue, state.isMember(conn.userID, of: channel) else {
                return error("Not a member of this channel")
            }
            state.connections[connection]?.channels.insert(channel)
            return []
        default:
            return error("Unknown message type '\(type)'")
        }
    }

    /// `payload` to every connection matching `filter`, in connection order; with `users`,
    /// only their connections are looked at.
    func deliver(_ payload: JSONValue, users: Set<String>? = nil, where filter: (ChatServerState.Connection) -> Bool) -> [ChatOutput] {
        let candidates = users.map { $0.flatMap { state.connectionsOfUser[$0] ?? [] } } ?? Array(state.connections.keys)
        return candidates.sorted().compactMap { id in filter(state.connections[id]!) ? .send(connection: id, payload) : nil }
    }

    /// The members of a channel, for `deliver(users:)`.
    func memberIDs(_ channel: String) -> Set<String> { Set((state.members[channel] ?? [:]).keys) }

    /// Closes the matching connections (4003 unless said otherwise).
    mutating func closeConnections(code: UInt16 = 4003, reason: String = "Logged out",
                                   where filter: (ChatServerState.Connection) -> Bool) -> [ChatOutput] {
        let ids = state.connections.keys.sorted().filter { filter(state.connections[$0]!) }
        for id in ids { disconnect(id) }
        return ids.map { .close(connection: $0, code: code, reason: reason) }
    }
}
