import ChatCrypto
import LabCrypto
import LabKernel

extension ChatServer {
    func messageJSON(_ m: ChatMessage) -> JSONValue {
        let reply = m.replyToID.flatMap { state.messages[$0] }.map { r -> JSONValue in
            ["id": .string(r.id), "sender_id": .string(r.senderID), "content": .string(r.content), "content_type": .string(r.contentType),
             "protocol_version": .number(Double(r.protocolVersion))]
        }
        return ["id": .string(m.id), "channel_id": .string(m.channelID), "sender_id": .string(m.senderID),
                "sender_device_id": m.senderDeviceID.map { .string($0) } ?? .null, "content": .string(m.content),
                "content_type": .string(m.contentType), "protocol_version": .number(Double(m.protocolVersion)),
                "reply_to_id": m.replyToID.map { .string($0) } ?? .null, "reply_to": reply ?? .null, "attachments": [],
                "client_message_id": m.clientMessageID.map { .string($0) } ?? .null,
                "edited_at": m.editedAt.map { .string(timestamp($0)) } ?? .null, "created_at": .string(timestamp(m.createdAt))]
    }

    /// `messageJSON(m)` as canonical (key-sorted) JSON, written member by member: a page
    /// of messages is the hottest answer the server gives (every catch-up asks for one).
    func renderMessage(_ m: ChatMessage) -> [UInt8] {
        var w = JSONObjectWriter()
        w.member("attachments", json: [0x5B, 0x5D])
        w.member("channel_id", string: m.channelID)
        w.member("client_message_id", optionalString: m.clientMessageID)
        w.member("content", string: m.content)
        w.member("content_type", string: m.contentType)
        w.member("created_at", string: timestamp(m.createdAt))
        w.member("edited_at", optionalString: m.editedAt.map(timestamp))
        w.member("id", string: m.id)
        w.member("protocol_version", integer: m.protocolVersion)
        if let r = m.replyToID.flatMap({ state.messages[$0] }) {
            var reply = JSONObjectWriter()
            reply.member("content", string: r.content)
            reply.member("content_type", string: r.contentType)
            reply.member("id", string: r.id)
            reply.member("protocol_version", integer: r.protocolVersion)
            reply.member("sender_id", string: r.senderID)
            w.member("reply_to", json: reply.finish())
        } else {
            w.member("reply_to", optionalString: nil)
        }
        w.member("reply_to_id", optionalString: m.replyToID)
        w.member("sender_device_id", optionalString: m.senderDeviceID)
        w.member("sender_id", string: m.senderID)
        return w.finish()
    }

    mutating func messages(_ method: String, channelID: String, _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                           outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let channel = try memberChannel(channelID, caller)
        switch method {
        case "GET": return try page(channel, request)
        case "POST": return try send(channel, request, caller: caller, now: now, outputs: &outputs)
        default: throw ChatAPIError(405, "Method Not Allowed")
        }
    }

    /// `?before=<created_at>&limit=` → the newest `limit` messages older than `before`,
    /// oldest first. `created_at` strictly increases within a channel (to the millisecond
    /// it is written with), so a page boundary never skips or repeats a message however
    /// many arrive meanwhile.
    func page(_ channel: ChatChannel, _ request: HTTPRequestMessage) throws -> HTTPResponseMessage {
        var limit = 50
        if let text = request.query["limit"] {
            guard let n = Int(text), (1...100).contains(n) else {
                throw ChatAPIError.validation(["query", "limit"], "Input should be an integer from 1 to 100", type: "int_parsing")
            }
            limit = n
        }
        var end = channel.messageIDs.endIndex
        var cutoff: Instant?
        if let before = request.query["before"] {
            guard let ms = RFC3339.parse(before) else {
                throw ChatAPIError.validation(["query", "before"], "Input should be a valid datetime", type: "datetime_parsing")
            }
            // Any parsed date works, from year 0001 to 9999: the conversion saturates.
            let instant = wallClock.instant(atUnixMilliseconds: ms)
            cutoff = instant
            // Binary search: messageIDs are in created_at order.
            var low = 0, high = channel.messageIDs.count
            while low < high {
                let mid = (low + high) / 2
                if state.messages[channel.messageIDs[mid]]!.createdAt < instant { low = mid + 1 } else { high = mid }
            }
            end = low
        }
        var picked: [ChatMessage] = []
        var index = end
        while index > 0 && picked.count <= limit {
            index -= 1
            if let m = state.messages[channel.messageIDs[index]], !m.deleted { picked.append(m) }
        }
        // Past the messages in memory, the older ones set aside (`MessageTable`).
        if picked.count <= limit, channel.setAsideCount > 0, let archive = state.messages.archive {
            picked += archive.newest(limit + 1 - picked.count, in: channel.id, before: cutoff)
        }
        var list: [UInt8] = [0x5B]
        for (index, message) in picked.prefix(limit).reversed().enumerated() {
            if index > 0 { list.append(0x2C) }
            list += renderMessage(message)
        }
        list.append(0x5D)
        var page = JSONObjectWriter()
        page.member("has_more", bool: picked.count > limit)
        page.member("messages", json: list)
        return HTTPResponseMessage(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: page.finish())
    }

    mutating func send(_ channel: ChatChannel, _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                       outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let content: String, contentType: String, version: Int, device: String?, replyTo: String?, clientID: String?
        do {
            content = try f.string("content")
            contentType = try f.optionalString("content_type") ?? "text"
            // d3chat's default: a client that says nothing means plaintext, which only a
            // legacy channel takes (elsewhere the answer says why).
            version = try f.optionalInt("protocol_version") ?? 1
            device = try f.optionalString("sender_device_id")
            replyTo = try f.optionalString("reply_to_id")
            clientID = try f.optionalString("client_message_id")
        } catch { throw ChatAPIError.field(error) }
        if let clientID, let message = state.message(sentBy: caller.userID, clientID: clientID) {
            return .json(200, messageJSON(message))  // a retried send: the first one's message, no new event
        }
        try validate(content: content, contentType: contentType, version: version, in: channel)
        if let device { try requireUUID(device, ["body", "sender_device_id"]) }
        // The id as the device's row holds it: the message shares that string rather than
        // keeping the copy parsed from this request for the rest of the run.
        guard let senderDevice = state.devices[device ?? caller.deviceID].flatMap({ $0.userID == caller.userID ? $0.id : nil }) else {
            throw ChatAPIError.validation(["body", "sender_device_id"], "sender_device_id is not one of your devices")
        }
        if channel.isDM, version == 2, contentType != ChatEnvelope.distributionContentType {
            try requireEveryDevice(content, in: channel, from: senderDevice)
        }
        if let replyTo {
            try requireUUID(replyTo, ["body", "reply_to_id"])
            guard state.messages[replyTo]?.channelID == channel.id else { throw ChatAPIError(404, "Reply target not found in this channel") }
        }
        if let clientID, clientID.isEmpty || clientID.utf8.count > 128 {
            throw ChatAPIError.validation(["body", "client_message_id"], "String should have 1 to 128 characters")
        }
        let last = channel.messageIDs.last.flatMap { state.messages[$0]?.createdAt }
        let created = last.map { max(now, $0 + .milliseconds(1)) } ?? now
        let message = ChatMessage(id: newID(), channelID: channel.id, senderID: caller.userID, senderDeviceID: senderDevice, content: content,
                                  contentType: contentType, protocolVersion: version, replyToID: replyTo, clientMessageID: clientID,
                                  editedAt: nil, createdAt: Instant(nanoseconds: created.nanoseconds / 1_000_000 * 1_000_000))
        state.append(message)
        outputs += deliver(["type": "message.new", "message": messageJSON(message)], users: memberIDs(channel.id)) { $0.channels.contains(channel.id) }
        return .json(201, messageJSON(message))
    }

    /// A DM must be encrypted to exactly the members' devices that can be encrypted to
    /// (less the sender's): a 409 names the missing and the extra ones, and the client
    /// re-fetches those device sets and sends again. So a phone added a moment ago gets
    /// the message, and a removed one never does (the way Signal's server answers a
    /// "mismatched devices" send).
    func requireEveryDevice(_ content: String, in channel: ChatChannel, from sender: String) throws {
        guard let envelope = ChatEnvelope.decode(content) else { return }
        let members = memberIDs(channel.id)
        var expected: Set<String> = []
        for member in members { expected.formUnion(state.bundlesOfUser[member] ?? []) }
        expected.remove(sender)
        let addressed = Set(envelope.to.keys)
        guard addressed != expected else { return }
        var error = ChatAPIError(409, "The device set changed: encrypt to the listed devices and send again")
        error.detail = ["msg": .string("The device set changed: encrypt to the listed devices and send again"),
                        "missing_devices": .array(expected.subtracting(addressed).sorted().map { .string($0) }),
                        "extra_devices": .array(addressed.subtracting(expected).sorted().map { .string($0) })]
        throw error
    }

    /// Protocol version 2 is ciphertext only: a group message is base64 of a sender-key
    /// wire (`0x03…`), a DM or a key distribution an envelope of per-device ratchet wires
    /// (docs/chat.md). Anything else is refused, so a client bug cannot store plaintext.
    func validate(content: String, contentType: String, version: Int, in channel: ChatChannel) throws {
        guard !content.isEmpty else { throw ChatAPIError.validation(["body", "content"], "String should have at least 1 character", type: "string_too_short") }
        guard content.utf8.count <= config.maxContentBytes else {
            throw ChatAPIError.validation(["body", "content"], "String should have at most \(config.maxContentBytes) bytes", type: "string_too_long")
        }
        guard (1...128).contains(contentType.count) else { throw ChatAPIError.validation(["body", "content_type"], "String should have 1 to 128 characters") }
        switch version {
        case 1:
            guard channel.legacyPlaintext else {
                throw ChatAPIError.validation(["body", "protocol_version"],
                                              "This channel is end-to-end encrypted: protocol_version 1 (plaintext) is refused; send ciphertext as 2",
                                              type: "literal_error")
            }
        case 2:
            let pairwise = channel.encryption == .x3dh || contentType == ChatEnvelope.distributionContentType
            let ok = pairwise ? ChatEnvelope.isPairwiseCiphertext(content) : ChatEnvelope.isGroupCiphertext(content)
            guard ok else {
                throw ChatAPIError.validation(["body", "content"], pairwise ? "protocol_version 2 content must be a pairwise envelope of ratchet messages"
                                                                            : "protocol_version 2 content must be base64 of a sender-key message")
            }
        default:
            throw ChatAPIError.validation(["body", "protocol_version"], "Input should be 1 or 2", type: "literal_error")
        }
    }

    mutating func editOrDelete(_ method: String, messageID: String, _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                               outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        try requireUUID(messageID, ["path", "message_id"])
        guard var message = state.messages[messageID], !message.deleted, let channel = state.channels[message.channelID] else {
            throw ChatAPIError(404, "Message not found")
        }
        guard state.isMember(caller.userID, of: channel.id) else { throw ChatAPIError(403, "Not a member of this channel") }
        guard message.senderID == caller.userID else { throw ChatAPIError(403, "You can only change your own messages") }
        switch method {
        case "PATCH":
            let f = try fields(request)
            let content: String
            do { content = try f.string("content") } catch { throw ChatAPIError.field(error) }
            try validate(content: content, contentType: message.contentType, version: message.protocolVersion, in: channel)
            message.content = content
            message.editedAt = now
            state.messages[messageID] = message
            outputs += deliver(["type": "message.edit", "message": ["id": .string(message.id), "channel_id": .string(channel.id),
                                                                   "content": .string(content), "edited_at": .string(timestamp(now))]],
                               users: memberIDs(channel.id)) {
                $0.channels.contains(channel.id)
            }
            return .json(200, messageJSON(message))
        case "DELETE":
            message.deleted = true
            message.content = ""
            state.messages[messageID] = message
            outputs += deliver(["type": "message.delete", "message_id": .string(message.id), "channel_id": .string(channel.id)],
                               users: memberIDs(channel.id)) {
                $0.channels.contains(channel.id)
            }
            return .empty(204)
        default:
            throw ChatAPIError(405, "Method Not Allowed")
        }
    }
}
