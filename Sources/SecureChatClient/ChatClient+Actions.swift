import ChatCrypto
import LabKernel

extension ChatClient {
    // MARK: Sessions

    /// Logout (this login) or logout-all (every login of the user). The device forgets
    /// its tokens at once; the request is sent with what it needs (the refresh token, or
    /// the access token) and its answer only confirms what already happened here.
    mutating func endSession(all: Bool, now: Instant, _ out: inout [ClientEffect]) {
        guard isSignedIn else { return out.append(.loggedOut(reason: "not signed in")) }
        if all {
            request(.logoutAll, "POST", "/auth/logout-all", nil, now: now, &out)
        } else if let token = snapshot.refreshToken {
            request(.logout, "POST", "/auth/logout", ["refresh_token": .string(token)], auth: false, now: now, &out)
        }
        // The request effect is already out; forgetting it in flight only drops its answer.
        logout(all ? "logged out everywhere" : "logged out", &out)
    }

    // MARK: Edit, delete, leave, join

    /// Queues an edit of one of our messages: it goes through the send pipeline (members,
    /// devices, keys) so the new content is encrypted for the channel as it is now.
    mutating func edit(_ messageID: String, text: String, now: Instant, _ out: inout [ClientEffect]) {
        guard let message = snapshot.message(ChatID(messageID)), message.senderID == snapshot.userID, !message.deleted else {
            return out.append(.surfaced(.sendRefused(clientID: messageID, status: 403, detail: "only your own messages can be edited")))
        }
        let clientID = UUIDText.random(using: &snapshot.generator)
        snapshot.pending.append(PendingSend(clientID: clientID, channelID: message.channelID, text: text, edits: messageID))
        advanceSend(now: now, &out)
    }

    mutating func actionAnswered(_ purpose: Purpose, id: String, _ response: HTTPResponseMessage, now: Instant, _ out: inout [ClientEffect]) {
        guard (200..<300).contains(response.status) else {
            return out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(response.jsonBody))))
        }
        switch purpose {
        case .delete: markDeleted(id, &out)
        case .leave: removeChannel(id, &out)
        case .join: request(.channels, "GET", "/channels", nil, now: now, &out)
        case .removeDevice:
            if let me = snapshot.userID { staleDeviceSets.insert(me) }
        default: break
        }
    }

    mutating func markDeleted(_ id: String, _ out: inout [ClientEffect]) {
        let deleted = snapshot.update(ChatID(id)) { message in
            guard !message.deleted else { return false }
            message.deleted = true
            message.text = ""
            return true
        }
        guard let message = deleted else { return }
        snapshot.ownPlaintexts[id] = nil
        snapshot.editedAt?[message.compactID] = nil
        out.append(.delivered(message))
    }

    // MARK: Older history

    /// The page before the oldest message this device has (`before=` its `created_at`).
    mutating func loadOlder(_ channel: String, now: Instant, _ out: inout [ClientEffect]) {
        guard let info = snapshot.channels[channel] else {
            return out.append(.surfaced(.requestFailed(status: 404, detail: "unknown channel \(channel)")))
        }
        guard !info.reachedStart else { return out.append(.historyLoaded(channelID: channel, added: 0, hasMore: false)) }
        requestPage(.olderMessages(channel: channel), of: channel, limit: config.historyPage, before: timeline(channel).first?.createdAt, now: now, &out)
    }

    mutating func olderPage(_ channel: String, _ response: HTTPResponseMessage, _ out: inout [ClientEffect]) {
        guard response.status == 200, let body = response.jsonBody else {
            return out.append(.historyLoaded(channelID: channel, added: 0, hasMore: true))
        }
        let before = snapshot.count(in: channel)
        for message in body["messages"]?.arrayValue ?? [] { ingest(message, &out) }
        let hasMore = body["has_more"] == true
        if !hasMore { snapshot.channels[channel]?.reachedStart = true }
        out.append(.historyLoaded(channelID: channel, added: snapshot.count(in: channel) - before, hasMore: hasMore))
    }

    // MARK: Typing and presence

    /// Someone else's typing indicator: shown until a `typing.stop` or until it lapses.
    mutating func receiveTyping(_ frame: JSONValue, started: Bool, now: Instant, _ out: inout [ClientEffect]) {
        guard let channel = frame["channel_id"]?.stringValue, let user = frame["user_id"]?.stringValue, user != snapshot.userID else { return }
        let key = TypingKey(channel: channel, user: user)
        let wasTyping = typingUntil[key] != nil
        if started { typingUntil[key] = now + config.typingLapse } else { typingUntil[key] = nil }
        if wasTyping != started { out.append(.typing(channelID: channel, userID: user, active: started)) }
        armTyping()
    }

    mutating func lapseTyping(now: Instant, _ out: inout [ClientEffect]) {
        for (key, until) in typingUntil.sorted(by: { ($0.value, $0.key.channel, $0.key.user) < ($1.value, $1.key.channel, $1.key.user) }) where until <= now {
            typingUntil[key] = nil
            out.append(.typing(channelID: key.channel, userID: key.user, active: false))
        }
        armTyping()
    }

    mutating func armTyping() {
        if let next = typingUntil.values.min() { timers.arm(.typing, at: next) } else { timers.cancel(.typing) }
    }
}
