import LabKernel

extension ChatServer {
    func channelJSON(_ c: ChatChannel) -> JSONValue {
        ["id": .string(c.id), "name": c.name.map { .string($0) } ?? .null, "is_dm": .bool(c.isDM), "is_federated": false,
         "encryption_type": .string(c.encryption.rawValue), "visibility": .string(c.isDM ? "private" : c.visibility.rawValue),
         "legacy_plaintext": .bool(c.legacyPlaintext), "created_by": .string(c.createdBy), "created_at": .string(timestamp(c.createdAt))]
    }

    /// `channel.new` to every connection of `users`.
    func announce(_ channel: ChatChannel, to users: Set<String>) -> [ChatOutput] {
        deliver(["type": "channel.new", "channel": channelJSON(channel)], users: users) { users.contains($0.userID) }
    }

    /// `channel.member_added` / `channel.member_left` to the members' sockets: clients
    /// refresh the member list at once, and a sender rotates its sender key when someone
    /// left (what they hold must open nothing sent after).
    func announceMembership(_ channelID: String, user: String, joined: Bool, extra: Set<String> = []) -> [ChatOutput] {
        let type = joined ? "channel.member_added" : "channel.member_left"
        return deliver(["type": .string(type), "channel_id": .string(channelID), "user_id": .string(user)], users: memberIDs(channelID).union(extra)) { _ in true }
    }

    mutating func createChannel(_ request: HTTPRequestMessage, caller: Caller, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let name: String, isDM: Bool, encryption: String, visibility: String, legacy: Bool
        do {
            name = try f.string("name")
            isDM = try f.optionalBool("is_dm") ?? false
            encryption = try f.optionalString("encryption_type") ?? "sender_keys"
            visibility = try f.optionalString("visibility") ?? "private"
            legacy = try f.optionalBool("legacy_plaintext") ?? false
        } catch { throw ChatAPIError.field(error) }
        guard (1...128).contains(name.count) else { throw ChatAPIError.validation(["body", "name"], "String should have 1 to 128 characters", type: "string_too_long") }
        guard !isDM else { throw ChatAPIError(400, "Use POST /channels/dm for direct messages") }
        guard let kind = ChatChannel.Encryption(rawValue: encryption) else {
            throw ChatAPIError.validation(["body", "encryption_type"], "Input should be 'x3dh' or 'sender_keys'", type: "enum")
        }
        guard let scope = ChatChannel.Visibility(rawValue: visibility) else {
            throw ChatAPIError.validation(["body", "visibility"], "Input should be 'private' or 'public'", type: "enum")
        }
        guard !legacy || config.allowLegacyPlaintext else {
            throw ChatAPIError.validation(["body", "legacy_plaintext"], "This server accepts ciphertext only; legacy plaintext channels are off")
        }
        let channel = ChatChannel(id: newID(), name: name, isDM: false, encryption: kind, visibility: scope, legacyPlaintext: legacy,
                                  createdBy: caller.userID, createdAt: now)
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

    /// A channel's metadata, rename and deletion: members, and admins as moderators (who
    /// see a DM's metadata and may delete it, never its messages).
    mutating func channel(_ method: String, _ id: String, _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                          outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        var channel = try moderatedChannel(id, caller)
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
            if caller.isAdmin && !state.isMember(caller.userID, of: id) { audit(now, actor: caller.userID, "channel.delete", target: id, "") }
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
            if let key = state.messages[message].flatMap(ClientMessageKey.init) { state.messageByClientID[key] = nil }
            state.messages[message] = nil
        }
        if channel.setAsideCount > 0 { state.messages.archive?.removeChannel(id) }
        for user in (state.members[id] ?? [:]).keys { state.channelsOfUser[user]?.remove(id) }
        state.members[id] = nil
        state.invites[id] = nil
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
        case ("POST", "join"): return try join(id, caller: caller, now: now, outputs: &outputs)
        case ("POST", "leave"):
            let channel = try memberChannel(id, caller)
            guard !channel.isDM else { throw ChatAPIError(400, "A direct message cannot be left") }
            removeMember(caller.userID, from: id, outputs: &outputs)
            return .empty(204)
        case ("POST", "invites"): return try invite(id, request, caller: caller, now: now, outputs: &outputs)
        case ("GET", "members"):
            _ = try moderatedChannel(id, caller)
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
            let user = try newMember(request, of: id)
            addMember(user, to: channel, now: now, outputs: &outputs)
            return .json(201, ["status": "ok"])
        case (_, "messages"):
            return try messages(method, channelID: id, request, caller: caller, now: now, outputs: &outputs)
        default:
            throw ChatAPIError(404, "Not Found")
        }
    }

    /// `DELETE /channels/{id}/members/{user}`: the group's owner or admins, or a server
    /// admin as moderator, removes someone (leaving is `POST …/leave`).
    mutating func removeMemberRoute(_ id: String, user: String, caller: Caller, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let channel = try moderatedChannel(id, caller)
        guard !channel.isDM else { throw ChatAPIError(400, "Members of a direct message cannot be removed") }
        try requireOwner(channel, caller)
        try requireUUID(user, ["path", "user_id"])
        guard state.isMember(user, of: id) else { throw ChatAPIError(404, "Not a member of this channel") }
        removeMember(user, from: id, outputs: &outputs)
        audit(now, actor: caller.userID, "channel.remove_member", target: id, user)
        return .empty(204)
    }

    /// Joining: anyone for a public group; for a private one only with an invitation
    /// (which is used up). DMs cannot be joined.
    mutating func join(_ id: String, caller: Caller, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        try requireUUID(id, ["path", "channel_id"])
        guard let channel = state.channels[id] else { throw ChatAPIError(404, "Channel not found") }
        guard !channel.isDM else { throw ChatAPIError(403, "Direct messages cannot be joined") }
        guard !state.isMember(caller.userID, of: id) else { return .empty(204) }
        if channel.visibility == .private {
            guard let invite = state.invites[id]?[caller.userID], now < invite.expiresAt else {
                throw ChatAPIError(403, "This group is private: a member must invite or add you")
            }
        }
        addMember(caller.userID, to: channel, now: now, outputs: &outputs)
        return .empty(204)
    }

    /// `POST /channels/{id}/invites {user_id}`: a member invites someone into a group; they
    /// hear `channel.invite` and may join within `inviteLifetime`.
    mutating func invite(_ id: String, _ request: HTTPRequestMessage, caller: Caller, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let channel = try memberChannel(id, caller)
        guard !channel.isDM else { throw ChatAPIError(400, "Direct messages take no invitations") }
        let user = try newMember(request, of: id)
        let invite = ChannelInvite(userID: user, invitedBy: caller.userID, expiresAt: now + config.inviteLifetime)
        var pending = (state.invites[id] ?? [:]).filter { now < $0.value.expiresAt }
        pending[user] = invite
        state.invites[id] = pending
        let json: JSONValue = ["channel_id": .string(id), "user_id": .string(user), "invited_by": .string(caller.userID),
                               "expires_at": .string(timestamp(invite.expiresAt))]
        outputs += deliver(["type": "channel.invite", "channel": channelJSON(channel), "invited_by": .string(caller.userID)], users: [user]) { _ in true }
        return .json(201, json)
    }

    /// `GET /channels/invites`: the caller's invitations still open, newest first.
    func myInvites(_ caller: Caller, now: Instant) -> HTTPResponseMessage {
        var rows: [(ChannelInvite, ChatChannel)] = []
        for (channelID, invites) in state.invites {
            if let invite = invites[caller.userID], now < invite.expiresAt, let channel = state.channels[channelID] { rows.append((invite, channel)) }
        }
        rows.sort { ($0.0.expiresAt, $0.1.id) > ($1.0.expiresAt, $1.1.id) }
        return .json(200, .array(rows.map { ["channel": channelJSON($0.1), "invited_by": .string($0.0.invitedBy), "expires_at": .string(timestamp($0.0.expiresAt))] }))
    }

    /// The `user_id` of a body naming someone to add or invite: an existing user who is
    /// not a member yet.
    func newMember(_ request: HTTPRequestMessage, of channelID: String) throws -> String {
        let f = try fields(request)
        let user: String
        do { user = try f.string("user_id") } catch { throw ChatAPIError.field(error) }
        try requireUUID(user, ["body", "user_id"])
        guard state.users[user] != nil else { throw ChatAPIError(404, "User not found") }
        guard !state.isMember(user, of: channelID) else { throw ChatAPIError(409, "User is already a member") }
        return user
    }

    mutating func addMember(_ user: String, to channel: ChatChannel, now: Instant, outputs: inout [ChatOutput]) {
        state.addMember(user, to: channel.id, role: .member, at: now)
        if state.invites[channel.id]?[user] != nil { state.invites[channel.id]?[user] = nil }
        outputs += announce(channel, to: [user])
        outputs += announceMembership(channel.id, user: user, joined: true)
    }

    mutating func removeMember(_ user: String, from id: String, outputs: inout [ChatOutput]) {
        state.removeMember(user, from: id)
        for (key, var connection) in state.connections where connection.userID == user && connection.channels.contains(id) {
            connection.channels.remove(id)
            state.connections[key] = connection
        }
        outputs += announceMembership(id, user: user, joined: false, extra: [user])
    }
}
