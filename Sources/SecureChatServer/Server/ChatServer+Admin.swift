import LabKernel

extension ChatServer {
    /// `/admin/...`: stats, moderation, settings and the audit log, for admins only (the
    /// first account registered is an admin).
    mutating func admin(_ method: String, _ path: [String], _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                        outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        guard caller.isAdmin else { throw ChatAPIError(403, "Admin access required") }
        switch (method, path) {
        case ("GET", ["stats"]):
            return .json(200, ["users": .number(Double(state.users.count)), "devices": .number(Double(state.devices.count)),
                               "channels": .number(Double(state.channels.count)),
                               "messages": .number(Double(state.messages.values.filter { !$0.deleted }.count)),
                               "connections": .number(Double(state.connections.count))])
        case ("GET", ["settings"]):
            return .json(200, .object(state.settings))
        case ("PATCH", ["settings"]):
            let f = try fields(request)
            var next = state.settings
            for (key, value) in f.object {
                switch (key, value) {
                case ("registration_open", .bool): next[key] = value
                case ("max_message_bytes", .number(let n)) where n >= 1 && n <= 1_048_576 && n.rounded() == n: next[key] = value
                default: throw ChatAPIError.validation(["body", key], "Unknown setting or wrong type")
                }
            }
            state.settings = next
            if let n = next["max_message_bytes"]?.numberValue { config.maxContentBytes = Int(n) }
            audit(now, actor: caller.userID, "settings.update", target: "settings", f.object.keys.sorted().joined(separator: ","))
            return .json(200, .object(next))
        case ("GET", ["audit-log"]): return try auditLog(request)
        case ("GET", ["users"]): return try adminUsers(request)
        case ("GET", ["channels"]): return try adminChannels(request)
        case ("DELETE", let p) where p.count == 2 && p[0] == "channels":
            try requireUUID(p[1], ["path", "channel_id"])
            guard state.channels[p[1]] != nil else { throw ChatAPIError(404, "Channel not found") }
            deleteChannel(p[1])
            audit(now, actor: caller.userID, "channel.delete", target: p[1], "")
            return .empty(204)
        case ("POST", let p) where p.count == 3 && p[0] == "users":
            return try moderate(p[1], action: p[2], request, caller: caller, now: now, outputs: &outputs)
        default:
            throw ChatAPIError(404, "Not Found")
        }
    }

    /// Ban, suspend (`{"minutes": n}`) or reinstate: a barred account's tokens are revoked
    /// and its sockets closed at once; its next login is refused.
    mutating func moderate(_ userID: String, action: String, _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                           outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        try requireUUID(userID, ["path", "user_id"])
        guard var user = state.users[userID] else { throw ChatAPIError(404, "User not found") }
        guard userID != caller.userID else { throw ChatAPIError(400, "Admins cannot moderate themselves") }
        switch action {
        case "ban":
            user.standing = .banned
        case "suspend":
            let f = try fields(request)
            let minutes: Int?
            do { minutes = try f.optionalInt("minutes") } catch { throw ChatAPIError.field(error) }
            guard let minutes, (1...525_600).contains(minutes) else { throw ChatAPIError.validation(["body", "minutes"], "Input should be 1 to 525600") }
            user.standing = .suspended(until: now + .minutes(Int64(minutes)))
        case "unban":
            user.standing = .active
        default:
            throw ChatAPIError(404, "Not Found")
        }
        state.users[userID] = user
        if user.standing != .active { revokeAll(of: userID, outputs: &outputs, reason: "Account \(action == "ban" ? "banned" : "suspended")") }
        audit(now, actor: caller.userID, "user.\(action)", target: userID, "")
        return .json(200, userJSON(user).merging(["standing": .string(action == "unban" ? "active" : action == "ban" ? "banned" : "suspended")]))
    }
}

extension JSONValue {
    func merging(_ other: [String: JSONValue]) -> JSONValue {
        guard case .object(var fields) = self else { return self }
        for (k, v) in other { fields[k] = v }
        return .object(fields)
    }
}
