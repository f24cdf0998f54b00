import LabKernel

extension ChatServer {
    // MARK: Finding people

    /// `GET /users/by-username/{name}`: what opening a DM needs, without knowing an id.
    func userByName(_ name: String) throws -> HTTPResponseMessage {
        guard let id = state.userIDByName[name.lowercased()], let user = state.users[id] else { throw ChatAPIError(404, "User not found") }
        return .json(200, publicUserJSON(user))
    }

    /// The profile other users see (no email, no role).
    func publicUserJSON(_ user: ChatUser) -> JSONValue {
        ["id": .string(user.id), "username": .string(user.username), "display_name": user.displayName.map { .string($0) } ?? .null]
    }

    // MARK: A user's device set

    /// `GET /users/{id}/devices`: the devices that can be encrypted to (they uploaded
    /// keys), with the set's version; it hands out no one-time key, so a client checks it
    /// as often as it likes and fetches bundles only for devices it has no session with.
    func userDevices(_ userID: String) throws -> HTTPResponseMessage {
        try requireUUID(userID, ["path", "user_id"])
        guard let user = state.users[userID] else { throw ChatAPIError(404, "User not found") }
        let devices = state.bundleDevices(of: userID).compactMap { state.bundles[$0] }
            .map { JSONValue.object(["device_id": .string($0.deviceID), "identity_key": .string($0.identityKey)]) }
        return .json(200, ["user_id": .string(userID), "version": .number(Double(user.deviceSetVersion)), "devices": .array(devices)])
    }

    /// The user's addressable devices changed: bump the version and tell everyone who
    /// shares a channel with them (and their own devices), so senders re-fetch before
    /// their next message, encrypt to a new device and stop encrypting to a removed one.
    mutating func deviceSetChanged(_ userID: String, outputs: inout [ChatOutput]) {
        guard var user = state.users[userID] else { return }
        user.deviceSetVersion += 1
        state.users[userID] = user
        var audience: Set<String> = [userID]
        for channel in state.channelsOfUser[userID] ?? [] { audience.formUnion(memberIDs(channel)) }
        outputs += deliver(["type": "devices.changed", "user_id": .string(userID), "version": .number(Double(user.deviceSetVersion))],
                           users: audience) { _ in true }
    }

    // MARK: Admin listings

    /// `?q=&limit=&offset=` of an admin listing: a case-insensitive substring, 1…200 rows
    /// (default 50), an offset.
    func listing(_ request: HTTPRequestMessage) throws -> (query: String?, limit: Int, offset: Int) {
        let q = request.query["q"].flatMap { $0.isEmpty ? nil : $0.lowercased() }
        if let q, q.count > 128 { throw ChatAPIError.validation(["query", "q"], "String should have at most 128 characters", type: "string_too_long") }
        return (q, try integer(request, "limit", default: 50, in: 1...200), try integer(request, "offset", default: 0, in: 0...10_000_000))
    }

    func integer(_ request: HTTPRequestMessage, _ name: String, default value: Int, in range: ClosedRange<Int>) throws -> Int {
        guard let text = request.query[name] else { return value }
        guard let n = Int(text), range.contains(n) else {
            throw ChatAPIError.validation(["query", name], "Input should be an integer from \(range.lowerBound) to \(range.upperBound)", type: "int_parsing")
        }
        return n
    }

    /// `GET /admin/users`: every account, by username, with its standing and device count.
    func adminUsers(_ request: HTTPRequestMessage) throws -> HTTPResponseMessage {
        let (q, limit, offset) = try listing(request)
        var devicesOf: [String: Int] = [:]
        for device in state.devices.values { devicesOf[device.userID, default: 0] += 1 }
        let matching = state.users.values.filter { user in
            q.map { user.username.lowercased().contains($0) || (user.displayName?.lowercased().contains($0) ?? false)
                || (user.email?.lowercased().contains($0) ?? false) } ?? true
        }.sorted { ($0.username.lowercased(), $0.id) < ($1.username.lowercased(), $1.id) }
        let items = matching.dropFirst(offset).prefix(limit).map { user -> JSONValue in
            var extra: [String: JSONValue] = ["devices": .number(Double(devicesOf[user.id] ?? 0)), "suspended_until": .null]
            switch user.standing {
            case .active: extra["standing"] = "active"
            case .suspended(let until):
                extra["standing"] = "suspended"
                extra["suspended_until"] = .string(timestamp(until))
            case .banned: extra["standing"] = "banned"
            }
            return userJSON(user).merging(extra)
        }
        return .json(200, ["items": .array(Array(items)), "total": .number(Double(matching.count)), "limit": .number(Double(limit)),
                           "offset": .number(Double(offset))])
    }

    /// `GET /admin/channels`: every channel by creation, with its member count; DMs show
    /// their members' ids (moderation), never their messages.
    func adminChannels(_ request: HTTPRequestMessage) throws -> HTTPResponseMessage {
        let (q, limit, offset) = try listing(request)
        let matching = state.channels.values.filter { channel in q.map { channel.name?.lowercased().contains($0) ?? false } ?? true }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
        let items = matching.dropFirst(offset).prefix(limit).map { channel in
            channelJSON(channel).merging(["member_count": .number(Double(state.members[channel.id]?.count ?? 0)),
                                          "message_count": .number(Double(channel.messageIDs.count + channel.setAsideCount))])
        }
        return .json(200, ["items": .array(Array(items)), "total": .number(Double(matching.count)), "limit": .number(Double(limit)),
                           "offset": .number(Double(offset))])
    }

    /// `GET /admin/audit-log?actor=&action=&since=&until=&limit=&offset=`: newest first,
    /// filtered by who, what (an exact action or a prefix ending in `.`) and when; the
    /// total of the filtered log is in `X-Total-Count` (the body stays d3chat's array).
    func auditLog(_ request: HTTPRequestMessage) throws -> HTTPResponseMessage {
        let limit = try integer(request, "limit", default: 100, in: 1...500), offset = try integer(request, "offset", default: 0, in: 0...10_000_000)
        func time(_ name: String) throws -> Instant? {
            guard let text = request.query[name] else { return nil }
            guard let ms = RFC3339.parse(text) else { throw ChatAPIError.validation(["query", name], "Input should be a valid datetime", type: "datetime_parsing") }
            return wallClock.instant(atUnixMilliseconds: ms)
        }
        let actor = request.query["actor"], action = request.query["action"], since = try time("since"), until = try time("until")
        let matching = state.audit.reversed().filter { entry in
            (actor == nil || entry.actorID == actor) && (since.map { entry.at >= $0 } ?? true) && (until.map { entry.at < $0 } ?? true)
                && (action.map { $0.hasSuffix(".") ? entry.action.hasPrefix($0) : entry.action == $0 } ?? true)
        }
        let rows = matching.dropFirst(offset).prefix(limit).map { e -> JSONValue in
            ["at": .string(timestamp(e.at)), "actor_id": .string(e.actorID), "action": .string(e.action), "target": .string(e.target),
             "detail": .string(e.detail)]
        }
        return .json(200, .array(Array(rows)), headers: [HTTPHeader("X-Total-Count", String(matching.count))])
    }
}
