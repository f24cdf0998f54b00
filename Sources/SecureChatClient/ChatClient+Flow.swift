import ChatCrypto
public import LabKernel

extension ChatClient {
    public mutating func handle(_ input: ClientInput, now: Instant) -> [ClientEffect] {
        var out: [ClientEffect] = []
        switch input {
        case .register(let username, let password, let deviceName):
            snapshot.username = username
            request(.register, "POST", "/auth/register", ["username": .string(username), "password": .string(password), "device_name": .string(deviceName)],
                    auth: false, now: now, &out)
        case .login(let username, let password, let deviceName):
            snapshot.username = username
            request(.login, "POST", "/auth/login", ["username": .string(username), "password": .string(password), "device_name": .string(deviceName)],
                    auth: false, now: now, &out)
        case .start:
            guard isSignedIn else { out.append(.loggedOut(reason: "no saved session")); break }
            socket = .closed
            request(.me, "GET", "/users/me", nil, now: now, &out)
        case .catchUp:
            guard isSignedIn else { out.append(.loggedOut(reason: "no saved session")); break }
            anchorCatchUps()
            for channel in snapshot.channels.keys.sorted() { catchUp(channel, now: now, &out) }
        case .response(let id, let response):
            guard let flight = inFlight.removeValue(forKey: id) else { break }
            armRequestDeadline()
            respond(flight, response, now: now, &out)
        case .transportFailed(let id):
            guard let flight = inFlight.removeValue(forKey: id) else { break }
            armRequestDeadline()
            failed(flight, now: now, &out)
        case .socketOpened:
            socket = .open
            reconnectAttempts = 0
            // Events sent while the socket was down are not replayed: device sets may have
            // changed meanwhile, so each is checked again before the next send to its user.
            staleDeviceSets.formUnion(snapshot.deviceSets.keys)
            anchorCatchUps()
            request(.channels, "GET", "/channels", nil, now: now, &out)
        case .socketText(let text):
            frame(text, now: now, &out)
        case .socketClosed(let code):
            guard socket != .loggedOut else { break }
            if code == 4003 { logout("the server closed the session (\(code))", &out); break }
            socketLost(now: now, &out)
        case .timerFired:
            for timer in timers.popExpired(now: now) { fire(timer, now: now, &out) }
        case .send(let channel, let text):
            let clientID = UUIDText.random(using: &snapshot.generator)
            snapshot.pending.append(PendingSend(clientID: clientID, channelID: channel, text: text))
            advanceSend(now: now, &out)
        case .edit(let messageID, let text):
            edit(messageID, text: text, now: now, &out)
        case .delete(let messageID):
            request(.delete(message: messageID), "DELETE", "/channels/messages/\(messageID)", nil, now: now, &out)
        case .openDM(let user):
            request(.openDM, "POST", "/channels/dm", ["user_id": .string(user)], now: now, &out)
        case .createGroup(let name):
            request(.createGroup, "POST", "/channels", ["name": .string(name)], now: now, &out)
        case .addMember(let channel, let user):
            snapshot.channels[channel]?.membersFetched = false
            request(.addMember, "POST", "/channels/\(channel)/members", ["user_id": .string(user)], now: now, &out)
        case .leave(let channel):
            request(.leave(channel: channel), "POST", "/channels/\(channel)/leave", nil, now: now, &out)
        case .join(let channel):
            request(.join(channel: channel), "POST", "/channels/\(channel)/join", nil, now: now, &out)
        case .loadOlder(let channel):
            loadOlder(channel, now: now, &out)
        case .typing(let channel, let started):
            if socket == .open {
                out.append(.socketSend(JSONValue.object(["type": .string(started ? "typing.start" : "typing.stop"), "channel_id": .string(channel)]).canonicalText))
            }
        case .setPresence(let status):
            if socket == .open { out.append(.socketSend(JSONValue.object(["type": "presence.update", "status": .string(status)]).canonicalText)) }
        case .logout:
            endSession(all: false, now: now, &out)
        case .logoutAll:
            endSession(all: true, now: now, &out)
        case .removeDevice(let device):
            request(.removeDevice(device: device), "DELETE", "/devices/\(device)", nil, now: now, &out)
        }
        return out
    }

    mutating func fire(_ timer: ChatTimer, now: Instant, _ out: inout [ClientEffect]) {
        switch timer {
        case .reconnect:
            guard socket == .closed, isSignedIn else { return }
            stats.reconnects += 1
            socket = .ticketing
            request(.ticket, "POST", "/auth/ws-ticket", nil, now: now, &out)
        case .sendRetry:
            if sendStage == .waitingRetry { sendStage = .idle }
            advanceSend(now: now, &out)
        case .refreshRetry:
            guard case .backingOff(let attempt) = refresh, let token = snapshot.refreshToken else { return }
            startRefresh(token, attempt: attempt + 1, now: now, &out)
        case .requests:
            expireRequests(now: now, &out)
        case .parked:
            expireParked(now: now, &out)
        case .resync:
            guard socket == .open else { return }
            if resyncChannels {
                resyncChannels = false
                request(.channels, "GET", "/channels", nil, now: now, &out)
            }
            for channel in Set(resyncPages).sorted() where snapshot.channels[channel] != nil { catchUp(channel, now: now, &out) }
            resyncPages = []
        case .typing:
            lapseTyping(now: now, &out)
        }
    }

    mutating func respond(_ flight: InFlight, _ response: HTTPResponseMessage, now: Instant, _ out: inout [ClientEffect]) {
        let body = response.jsonBody
        if response.status == 401, ![.register, .login, .refresh, .logout].contains(flight.purpose) {
            return unauthorized(flight, now: now, &out)
        }
        switch flight.purpose {
        case .register, .login:
            guard (200...201).contains(response.status), let body else {
                out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body))))
                return
            }
            tokens(body, now: now)
            snapshot.userID = body["user_id"]?.stringValue
            snapshot.deviceID = body["device_id"]?.stringValue
            socket = .closed
            do {
                var keys = try ChatKeyStore(generator: &snapshot.generator)
                let oneTime = try keys.makeOneTimeKeys(20, generator: &snapshot.generator)
                snapshot.keys = keys
                request(.uploadKeys, "POST", "/keys/upload", keys.uploadBody(deviceID: snapshot.deviceID ?? "", oneTime: oneTime), now: now, &out)
            } catch {
                out.append(.surfaced(.requestFailed(status: 0, detail: "key generation failed: \(error)")))
            }
        case .refresh:
            refreshAnswered(response, now: now, &out)
        case .uploadKeys:
            guard response.status == 201 else { out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body)))); return }
            request(.me, "GET", "/users/me", nil, now: now, &out)
        case .me:
            guard response.status == 200 else {
                if response.status == 429 || response.status >= 500 { return socketLost(now: now, &out) }
                out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body))))
                return
            }
            socket = .ticketing
            request(.ticket, "POST", "/auth/ws-ticket", nil, now: now, &out)
        case .ticket:
            guard response.status == 200, let ticket = body?["ticket"]?.stringValue else { return socketLost(now: now, &out) }
            socket = .opening
            out.append(.openSocket(ticket: ticket))
        case .channels:
            guard response.status == 200, let list = body?.arrayValue else {
                resyncChannels = true
                timers.arm(.resync, at: now + .seconds(5))
                return
            }
            channelsLoaded = true
            let listed = Set(list.compactMap { $0["id"]?.stringValue })
            for gone in snapshot.channels.keys.sorted() where !listed.contains(gone) { removeChannel(gone, &out) }
            for channel in list { addChannel(channel, fetch: true, now: now, &out) }
            advanceSend(now: now, &out)
        case .messages(let channel):
            guard response.status == 200 else {
                if response.status == 403 || response.status == 404 { return removeChannel(channel, &out) }
                resyncPages.append(channel)
                timers.arm(.resync, at: now + .seconds(5))
                return
            }
            let page = body?["messages"]?.arrayValue ?? []
            // Catching up after time away: keep paging back until a page reaches messages we
            // already have (or the start), so a long absence loses nothing. A channel new to
            // this device starts from its newest page; older ones are `loadOlder`'s. Where
            // paging must go on is stored, so a stop before it ends leaves no hole.
            let hadHistory = snapshot.channels[channel]?.synced == true
            let reachedKnown = page.contains { reachesHeld($0, in: channel) }
            if let cursor = flight.request.query["before"] { snapshot.channels[channel]?.catchUpFrom?.removeAll { $0 == cursor } }
            if hadHistory, body?["has_more"] == true, !reachedKnown, let oldest = page.first?["created_at"]?.stringValue {
                let cursors = snapshot.channels[channel]?.catchUpFrom ?? []
                snapshot.channels[channel]?.catchUpFrom = cursors + [oldest]
                let limit = Self.pageBack(after: flight.request.query["limit"].flatMap { Int($0) } ?? Self.longPage)
                requestPage(.messages(channel: channel), of: channel, limit: limit, before: oldest, now: now, &out)
            }
            if snapshot.channels[channel]?.catchUpFrom?.isEmpty == true { snapshot.channels[channel]?.catchUpFrom = nil }
            // The catch-up is over once a page reaches what the device held (or the start)
            // and no stored cursor still has to page back.
            if reachedKnown || body?["has_more"] != true, snapshot.channels[channel]?.catchUpFrom == nil {
                snapshot.channels[channel]?.unfinishedCatchUp = nil
            }
            snapshot.channels[channel]?.synced = true
            for message in page { ingest(message, &out) }
        case .olderMessages(let channel):
            olderPage(channel, response, &out)
        case .replenish:
            break
        case .openDM, .createGroup:
            if let body, (200...201).contains(response.status) { addChannel(body, fetch: false, now: now, &out) }
            else { out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body)))) }
        case .addMember:
            if !(200...201).contains(response.status) { out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body)))) }
        case .members, .deviceSet, .bundle, .post, .edit:
            sendResponse(flight.purpose, response, now: now, &out)
        case .delete(let message), .leave(let message), .join(let message), .removeDevice(let message):
            actionAnswered(flight.purpose, id: message, response, now: now, &out)
        case .logout, .logoutAll:
            break
        }
    }

    mutating func addChannel(_ json: JSONValue, fetch: Bool, now: Instant, _ out: inout [ClientEffect]) {
        guard let id = json["id"]?.stringValue else { return }
        if snapshot.channels[id] == nil {
            snapshot.channels[id] = ChannelInfo(id: id, isDM: json["is_dm"] == true, name: json["name"]?.stringValue)
            out.append(.channelAdded(id))
        }
        if fetch { catchUp(id, now: now, &out) }
    }

    /// Fetches what a channel got while this device was away: a channel with history from
    /// a short newest page (most absences are short; a page that reaches nothing known
    /// pages back), and on from where an earlier catch-up stopped; a new channel its last 50.
    mutating func catchUp(_ channel: String, now: Instant, _ out: inout [ClientEffect]) {
        let synced = snapshot.channels[channel]?.synced == true
        if synced, snapshot.channels[channel]?.unfinishedCatchUp == nil {
            let anchor = catchUpAnchors[channel] ?? snapshot.timelines[channel]?.last?.compactCreatedAt
            snapshot.channels[channel]?.unfinishedCatchUp = UnfinishedCatchUp(newestHeld: anchor?.text)
        }
        let limit = synced ? Self.catchUpPage : 50
        requestPage(.messages(channel: channel), of: channel, limit: limit, now: now, &out)
        for cursor in snapshot.channels[channel]?.catchUpFrom ?? [] {
            requestPage(.messages(channel: channel), of: channel, limit: Self.longPage, before: cursor, now: now, &out)
        }
    }

    /// Asks for a page of `channel`: its newest `limit` messages, older than `before` (a
    /// message's `created_at`) when given.
    mutating func requestPage(_ purpose: Purpose, of channel: String, limit: Int, before: String? = nil, now: Instant, _ out: inout [ClientEffect]) {
        var path = "/channels/\(channel)/messages?limit=\(limit)"
        if let before { path += "&before=\(PercentEncoding.encode(before))" }
        request(purpose, "GET", path, nil, now: now, &out)
    }

    /// Notes each channel's newest held message (or that it held none), before the socket
    /// can deliver newer ones; a channel whose last catch-up did not finish keeps that
    /// catch-up's anchor, since what lies between it and what came since is still unread.
    mutating func anchorCatchUps() {
        catchUpAnchors = [:]
        for (channel, info) in snapshot.channels {
            if let unfinished = info.unfinishedCatchUp {
                catchUpAnchors[channel] = .some(unfinished.newestHeld.map(ChatTime.init))
            } else {
                catchUpAnchors[channel] = .some(snapshot.timelines[channel]?.last?.compactCreatedAt)
            }
        }
    }

    /// Whether a page's message shows that paging back has reached what the device held
    /// before this catch-up: one it holds (or saw), no newer than the channel's anchor. A
    /// message the socket delivered since, or one the device sent since, is newer, and older
    /// unread ones may lie between; in a channel that held nothing, no held message is old
    /// enough, so paging goes on to the start.
    func reachesHeld(_ item: JSONValue, in channel: String) -> Bool {
        guard let id = item["id"]?.stringValue, snapshot.holds(ChatID(id), in: channel) || seenOnly.contains(ChatID(id)) else { return false }
        guard let anchored = catchUpAnchors[channel], let created = item["created_at"]?.stringValue else { return true }
        guard let anchor = anchored else { return false }
        return ChatTime(created) <= anchor
    }

    /// The newest page a channel with history fetches when the client catches up: two
    /// messages. A reconnect is frequent (dozens a day) and usually finds nothing new
    /// (measured over a simulated day of 1,000 phones: 79 % of catch-ups found no new message,
    /// 18 % one, 3 % more), so the page is the channel's preview plus the one message that
    /// shows whether one new message was all; d3chat pages only by `before` and `limit`.
    static let catchUpPage = 2

    /// The longest page: where a catch-up resumes after a stop, and where paging back grows to.
    static let longPage = 100

    /// The page after one of `limit` that reached nothing known: five times longer, up to
    /// `longPage` (2, 10, 50, 100), so a short absence pays for a few messages and a long one
    /// for few round trips.
    static func pageBack(after limit: Int) -> Int { min(longPage, max(10, limit * 5)) }

    /// A channel left this device's list: its timeline, its keys and what is queued for it go.
    mutating func removeChannel(_ id: String, _ out: inout [ClientEffect]) {
        guard snapshot.channels.removeValue(forKey: id) != nil else { return }
        snapshot.retireTimeline(id)
        snapshot.keys?.senderChains[ChatID(id)] = nil
        snapshot.keys?.distributedTo[ChatID(id)] = nil
        snapshot.pending.removeAll { $0.channelID == id }
        out.append(.channelRemoved(id))
    }

    mutating func frame(_ text: String, now: Instant, _ out: inout [ClientEffect]) {
        guard let frame = try? JSONValue.parse(text), let type = frame["type"]?.stringValue else { return }
        switch type {
        case "message.new":
            if let message = frame["message"] { ingest(message, &out) }
        case "message.edit":
            if let m = frame["message"] { receiveEdit(m, &out) }
        case "message.delete":
            if let id = frame["message_id"]?.stringValue { markDeleted(id, &out) }
        case "channel.new":
            guard let channel = frame["channel"], let id = channel["id"]?.stringValue else { return }
            out.append(.socketSend(JSONValue.object(["type": "subscribe", "channel_id": .string(id)]).canonicalText))
            addChannel(channel, fetch: true, now: now, &out)
        case "channel.member_added", "channel.member_left":
            guard let channel = frame["channel_id"]?.stringValue, let user = frame["user_id"]?.stringValue else { return }
            if type == "channel.member_left", user == snapshot.userID { return removeChannel(channel, &out) }
            snapshot.channels[channel]?.membersFetched = false
            // A member back after time away may have other devices than we last saw.
            if type == "channel.member_added" { staleDeviceSets.insert(user) }
        case "channel.invite":
            if let channel = frame["channel"]?["id"]?.stringValue { out.append(.invited(channelID: channel, by: frame["invited_by"]?.stringValue ?? "")) }
        case "devices.changed":
            guard let user = frame["user_id"]?.stringValue, let version = frame["version"]?.numberValue else { return }
            if (snapshot.deviceSets[user]?.version ?? -1) < Int(version) { staleDeviceSets.insert(user) }
        case "typing.start", "typing.stop":
            receiveTyping(frame, started: type == "typing.start", now: now, &out)
        case "presence.update":
            if let user = frame["user_id"]?.stringValue, let status = frame["status"]?.stringValue { out.append(.presence(userID: user, status: status)) }
        case "keys.low_otp":
            guard frame["device_id"]?.stringValue == snapshot.deviceID, var keys = snapshot.keys,
                  let fresh = try? keys.makeOneTimeKeys(20, generator: &snapshot.generator) else { return }
            snapshot.keys = keys
            stats.replenished += 1
            request(.replenish, "POST", "/keys/one-time", ["device_id": .string(snapshot.deviceID ?? ""), "one_time_pre_keys": .array(fresh.map { .string($0) })],
                    now: now, &out)
        default:
            break
        }
    }
}
