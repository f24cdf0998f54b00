import LabKernel

extension ChatServer {
    func channelJSON(_ c: ChatChannel) -> JSONValue {
        ["id": .string(c.id), "name": c.name.map { .string($0) } ?? .null, "is_dm": .bool(c.isDM), "is_federated": false,
         "encryption_type": .string(c.encryption.rawValue), "created_by": .string(c.createdBy), "created_at": .string(timestamp(c.createdAt))]
    }

    /// `channel.new` to every connection of `users`.
    func announce(_ channel: ChatChannel, to users: Set<String>) -> [ChatOutput] {
        deliver(["type": "channel.new", "channel": channelJSON(channel)], users: users) { users.contains($0.userID) }
    }

    mutating func createChannel(_ request: HTTPRequestMessage, caller: Caller, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let name: String, isDM: Bool, encryption: String
        do {
            name = try f.string("name")
            isDM = try f.optionalBool("is_dm") ?? false
            encryption = try f.optionalString("encryption_type") ?? "sender_keys"
        } catch { throw ChatAPIError.field(error) }
        guard (1...128).contains(name.count) else { throw ChatAPIError.validation(["body", "name"], "String should have 1 to 128 characters", type: "string_too_long") }
        guard !isDM else { throw ChatAPIError(400, "Use POST /channels/dm for direct messages") }
        guard let kind = ChatChannel.Encryption(rawValue: encryption) else {
            throw ChatAPIError.validation(["body", "encryption_type"], "Input should be 'x3dh' or 'sender_keys'", type: "enum")
        }
        let channel = ChatChannel(id: newID(), name: name, isDM: false, encryption: kind, createdBy: caller.userID, createdAt: now)
        state.channels[channel.id] = channel
        state.addMember(caller.userID, to: channel.id, role: .owner, at: now)
        outputs += announce(channel, to: [caller.userID])
        return .json(201, channelJSON(channel))
    }

    func listChannels(_ caller: Caller) -> HTTPResponseMessage {
        let ids = (state.channelsOfUser[caller.userID] ?? []).sorted()
        return .json(200, .array(ids.compactMap { state.channels[$0] }.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }.map(channelJSON)))
    }

    /// The DM of the caller and `user_id`: the existing one, or a new `x3dh` channel.
    mutating func openDM(_ request: HTTPRequestMessage, caller: Caller, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let other: String
        do { other = try f.string("user_id") } catch { throw ChatAPIError.field(error) }
        try requireUUID(other, ["body", "user_id"])
        guard state.users[other] != nil else { throw ChatAPIError(404, "User not found") }
        guard other != caller.userID else { throw ChatAPIError(400, "A direct message needs another user") }
        let pair = ChatServerState.pairKey(caller.userID, other)
        if let id = state.dmByPair[pair], let existing = state.channels[id] { return .json(200, channelJSON(existing)) }
        let channel = ChatChannel(id: newID(), name: nil, isDM: true, encryption: .x3dh, createdBy: caller.userID, createdAt: now)
        state.channels[channel.id] = channel
        state.dmByPair[pair] = channel.id
        state.addMember(caller.userID, to: channel.id, role: .member, at: now)
        state.addMember(other, to: channel.id, role: .member, at: now)
        outputs += announce(channel, to: [caller.userID, other])
        return .json(201, channelJSON(channel))
    }

    mutating func channel(_ method: String, _ id: String, _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                          outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        var channel = try memberChannel(id, caller)
        switch method {
        case "GET": return .json(200, channelJSON(channel))
        case "PATCH":
            try requireOwner(channel, caller)
            let f = try fields(request)
            let name: String
            do { name = try f.string("name") } catch { throw ChatAPIError.field(error) }
            guard (1...128).contains(name.count), !channel.isDM else { throw ChatAPIError.validation(["body", "name"], "A group name has 1 to 128 characters") }
            channel.name = name
            state.channels[id] = channel
            return .json(200, channelJSON(channel))
        case "DELETE":
            try requireOwner(channel, caller)
            deleteChannel(id)
            return .empty(204)
        default: throw ChatAPIError(405, "Method Not Allowed")
        }
    }

    func requireOwner(_ channel: ChatChannel, _ caller: Caller) throws {
        let role = state.members[channel.id]?[caller.userID]?.role
        guard caller.isAdmin || role == .owner || role == .admin else { throw ChatAPIError(403, "Only the channel's owner may do this") }
    }

    mutating func deleteChannel(_ id: String) {
        guard let channel = state.channels[id] else { return }
        for message in channel.messageIDs {
            if let m = state.messages[message], let key = m.clientMessageID { state.messageByClientID["\(m.senderID)|\(key)"] = nil }
            state.messages[message] = nil
        }
        for user in (state.members[id] ?? [:]).keys { state.channelsOfUser[user]?.remove(id) }
        state.members[id] = nil
        state.channels[id] = nil
        state.senderKeys[id] = nil
        state.x3dhSetups[id] = nil
        state.dmByPair = state.dmByPair.filter { $0.value != id }
        for (key, var connection) in state.connections where connection.channels.contains(id) {
            connection.channels.remove(id)
            state.connections[key] = connection
        }
    }

    mutating func channelAction(_ method: String, _ id: String, _ action: String, _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                                outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        switch (method, action) {
        case ("POST", "join"):
            try requireUUID(id, ["path", "channel_id"])
            guard let channel = state.channels[id] else { throw ChatAPIError(404, "Channel not found") }
            guard !channel.isDM else { throw ChatAPIError(403, "Direct messages cannot be joined") }
            if !state.isMember(caller.userID, of: id) {
                state.addMember(caller.userID, to: id, role: .member, at: now)
                outputs += announce(channel, to: [caller.userID])
            }
            return .empty(204)
        case ("POST", "leave"):
            _ = try memberChannel(id, caller)
            state.removeMember(caller.userID, from: id)
            for (key, var connection) in state.connections where connection.userID == caller.userID {
                connection.channels.remove(id)
                state.connections[key] = connection
            }
            return .empty(204)
        case ("GET", "members"):
            _ = try memberChannel(id, caller)
            let rows = (state.members[id] ?? [:]).values.sorted { ($0.joinedAt, $0.userID) < ($1.joinedAt, $1.userID) }.map { m -> JSONValue in
                let user = state.users[m.userID]
                return ["user_id": .string(m.userID), "username": .string(user?.username ?? ""), "server_domain": .string(config.domain),
                        "is_local": true, "role": .string(m.role.rawValue), "joined_at": .string(timestamp(m.joinedAt)),
                        "display_name": user?.displayName.map { .string($0) } ?? .null, "avatar_url": .null]
            }
            return .json(200, .array(rows))
        case ("POST", "members"):
            let channel = try memberChannel(id, caller)
            guard !channel.isDM else { throw ChatAPIError(400, "Cannot add members to a direct message") }
            let f = try fields(request)
            let user: String
            do { user = try f.string("user_id") } catch { throw ChatAPIError.field(error) }
            try requireUUID(user, ["body", "user_id"])
            guard state.users[user] != nil else { throw ChatAPIError(404, "User not found") }
            guard !state.isMember(user, of: id) else { throw ChatAPIError(409, "User is already a member") }
            state.addMember(user, to: id, role: .member, at: now)
            outputs += announce(channel, to: [user])
            return .json(201, ["status": "ok"])
        case (_, "messages"):
            return try messages(method, channelID: id, request, caller: caller, now: now, outputs: &outputs)
        default:
            throw ChatAPIError(404, "Not Found")
        }
    }
}
