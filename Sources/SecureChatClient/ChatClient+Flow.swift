import ChatCrypto
public import LabKernel

extension ChatClient {
    public mutating func handle(_ input: ClientInput, now: Instant) -> [ClientEffect] {
        var out: [ClientEffect] = []
        switch input {
        case .register(let username, let password, let deviceName):
            snapshot.username = username
            request(.register, "POST", "/auth/register", ["username": .string(username), "password": .string(password), "device_name": .string(deviceName)],
                    auth: false, &out)
        case .login(let username, let password, let deviceName):
            snapshot.username = username
            request(.login, "POST", "/auth/login", ["username": .string(username), "password": .string(password), "device_name": .string(deviceName)],
                    auth: false, &out)
        case .start:
            guard isSignedIn else { out.append(.loggedOut(reason: "no saved session")); break }
            request(.me, "GET", "/users/me", nil, &out)
        case .response(let id, let response):
            guard let flight = inFlight.removeValue(forKey: id) else { break }
            respond(flight, response, now: now, &out)
        case .transportFailed(let id):
            guard let flight = inFlight.removeValue(forKey: id) else { break }
            switch flight.purpose {
            case .post, .members, .bundles:
                // Retried later; a post keeps its client_message_id, so the server answers a
                // repeat with the first message.
                sendStage = .waitingRetry
                out.append(.startTimer(after: .seconds(2)))
            default:
                break
            }
            if [.me, .ticket].contains(flight.purpose) { socketLost(&out) }
        case .socketOpened:
            socket = .open
            reconnectAttempts = 0
            request(.channels, "GET", "/channels", nil, &out)
        case .socketText(let text):
            frame(text, now: now, &out)
        case .socketClosed(let code):
            guard socket != .loggedOut else { break }
            if code == 4003 { logout("the server closed the session (\(code))", &out); break }
            socketLost(&out)
        case .timerFired:
            if socket == .closed && isSignedIn {
                stats.reconnects += 1
                socket = .ticketing
                request(.ticket, "POST", "/auth/ws-ticket", nil, &out)
            }
            if sendStage == .waitingRetry { sendStage = .idle }
            advanceSend(now: now, &out)
        case .send(let channel, let text):
            let clientID = UUIDText.random(using: &snapshot.generator)
            snapshot.pending.append(PendingSend(clientID: clientID, channelID: channel, text: text, blocked: nil))
            advanceSend(now: now, &out)
        case .openDM(let user):
            request(.openDM, "POST", "/channels/dm", ["user_id": .string(user)], &out)
        case .createGroup(let name):
            request(.createGroup, "POST", "/channels", ["name": .string(name)], &out)
        case .typing(let channel, let started):
            if socket == .open {
                out.append(.socketSend(JSONValue.object(["type": .string(started ? "typing.start" : "typing.stop"), "channel_id": .string(channel)]).canonicalText))
            }
        case .addMember(let channel, let user):
            snapshot.channels[channel]?.membersFetched = false
            request(.addMember, "POST", "/channels/\(channel)/members", ["user_id": .string(user)], &out)
        }
        return out
    }

    mutating func request(_ purpose: Purpose, _ method: String, _ path: String, _ body: JSONValue?, auth: Bool = true, _ out: inout [ClientEffect]) {
        var bytes: [UInt8] = []
        body?.write(to: &bytes)
        var headers = body == nil ? [:] : ["content-type": "application/json"]
        if auth, let token = snapshot.accessToken { headers["authorization"] = "Bearer \(token)" }
        issue(InFlight(purpose: purpose, request: HTTPRequestMessage(method: method, target: "/api/v1" + path, headers: headers, body: bytes), retried: false), &out)
    }

    mutating func issue(_ flight: InFlight, _ out: inout [ClientEffect]) {
        let id = nextRequest
        nextRequest += 1
        inFlight[id] = flight
        out.append(.request(id: id, flight.request))
    }

    mutating func respond(_ flight: InFlight, _ response: HTTPResponseMessage, now: Instant, _ out: inout [ClientEffect]) {
        let body = response.jsonBody
        if response.status == 401, ![.register, .login, .refresh].contains(flight.purpose) {
            guard !flight.retried else { logout("the server refused the refreshed token", &out); return }
            parked.append(flight)
            if !refreshing, let refresh = snapshot.refreshToken {
                refreshing = true
                stats.refreshes += 1
                request(.refresh, "POST", "/auth/refresh", ["refresh_token": .string(refresh)], auth: false, &out)
            } else if snapshot.refreshToken == nil {
                logout("no refresh token", &out)
            }
            return
        }
        switch flight.purpose {
        case .register, .login:
            guard (200...201).contains(response.status), let body else {
                out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body))))
                return
            }
            tokens(body)
            snapshot.userID = body["user_id"]?.stringValue
            snapshot.deviceID = body["device_id"]?.stringValue
            do {
                var keys = try ChatKeyStore(generator: &snapshot.generator)
                let oneTime = try keys.makeOneTimeKeys(20, generator: &snapshot.generator)
                snapshot.keys = keys
                request(.uploadKeys, "POST", "/keys/upload", keys.uploadBody(deviceID: snapshot.deviceID ?? "", oneTime: oneTime), &out)
            } catch {
                out.append(.surfaced(.requestFailed(status: 0, detail: "key generation failed: \(error)")))
            }
        case .refresh:
            refreshing = false
            guard response.status == 200, let body else { logout("the refresh token was refused", &out); return }
            tokens(body)
            let retry = parked
            parked = []
            for var flight in retry {
                flight.retried = true
                flight.request.headers["authorization"] = "Bearer \(snapshot.accessToken ?? "")"
                issue(flight, &out)
            }
        case .uploadKeys:
            guard response.status == 201 else { out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body)))); return }
            request(.me, "GET", "/users/me", nil, &out)
        case .me:
            guard response.status == 200 else { out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body)))); return }
            socket = .ticketing
            request(.ticket, "POST", "/auth/ws-ticket", nil, &out)
        case .ticket:
            guard response.status == 200, let ticket = body?["ticket"]?.stringValue else { socketLost(&out); return }
            socket = .opening
            out.append(.openSocket(ticket: ticket))
        case .channels:
            guard response.status == 200, let list = body?.arrayValue else { return }
            channelsLoaded = true
            for channel in list { addChannel(channel, fetch: true, &out) }
            advanceSend(now: now, &out)
        case .messages(let channel):
            let page = body?["messages"]?.arrayValue ?? []
            // Catching up after time away: keep paging back until a page reaches messages we
            // already have (or the start), so a long absence loses nothing.
            let reachedKnown = page.contains { $0["id"]?.stringValue.map { snapshot.messages[$0] != nil || seenOnly.contains($0) } ?? false }
            if body?["has_more"] == true, !reachedKnown, let oldest = page.first?["created_at"]?.stringValue {
                request(.messages(channel: channel), "GET", "/channels/\(channel)/messages?limit=100&before=\(PercentEncoding.encode(oldest))", nil, &out)
            }
            for message in page { ingest(message, &out) }
        case .replenish:
            break
        case .openDM, .createGroup:
            if let body, (200...201).contains(response.status) { addChannel(body, fetch: false, &out) }
            else { out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body)))) }
        case .addMember:
            if !(200...201).contains(response.status) { out.append(.surfaced(.requestFailed(status: response.status, detail: Self.detail(body)))) }
        case .members, .bundles, .post, .announceSenderKey:
            sendResponse(flight.purpose, response, now: now, &out)
        }
    }

    mutating func tokens(_ body: JSONValue) {
        snapshot.accessToken = body["access_token"]?.stringValue
        snapshot.refreshToken = body["refresh_token"]?.stringValue
    }

    static func detail(_ body: JSONValue?) -> String {
        body?["detail"]?.stringValue ?? body?["detail"]?.arrayValue?.first?["msg"]?.stringValue ?? ""
    }

    /// A clean logout: tokens gone, socket closed, nothing retried.
    mutating func logout(_ reason: String, _ out: inout [ClientEffect]) {
        snapshot.accessToken = nil
        snapshot.refreshToken = nil
        parked = []
        refreshing = false
        if socket == .open || socket == .opening { out.append(.closeSocket) }
        socket = .loggedOut
        out.append(.loggedOut(reason: reason))
    }

    /// Schedules a reconnect: 1 s doubling to 30 s, times 0.5…1.5 from the device's stream.
    mutating func socketLost(_ out: inout [ClientEffect]) {
        guard socket != .loggedOut else { return }
        socket = .closed
        reconnectAttempts += 1
        let base = min(30.0, Double(1 << min(reconnectAttempts - 1, 5)))
        let jitter = 0.5 + Double(snapshot.generator.next() >> 11) / Double(1 << 53)
        out.append(.startTimer(after: .milliseconds(Int64(base * jitter * 1000))))
    }

    mutating func addChannel(_ json: JSONValue, fetch: Bool, _ out: inout [ClientEffect]) {
        guard let id = json["id"]?.stringValue else { return }
        if snapshot.channels[id] == nil {
            snapshot.channels[id] = ChannelInfo(id: id, isDM: json["is_dm"] == true, name: json["name"]?.stringValue)
            out.append(.channelAdded(id))
        }
        if fetch { request(.messages(channel: id), "GET", "/channels/\(id)/messages?limit=50", nil, &out) }
    }

    mutating func frame(_ text: String, now: Instant, _ out: inout [ClientEffect]) {
        guard let frame = try? JSONValue.parse(text), let type = frame["type"]?.stringValue else { return }
        switch type {
        case "message.new":
            if let message = frame["message"] { ingest(message, &out) }
        case "message.edit":
            if let m = frame["message"] { edit(m, &out) }
        case "message.delete":
            if let id = frame["message_id"]?.stringValue, var message = snapshot.messages[id] {
                message.deleted = true
                message.text = ""
                snapshot.messages[id] = message
                out.append(.delivered(message))
            }
        case "channel.new":
            guard let channel = frame["channel"], let id = channel["id"]?.stringValue else { return }
            out.append(.socketSend(JSONValue.object(["type": "subscribe", "channel_id": .string(id)]).canonicalText))
            addChannel(channel, fetch: true, &out)
        case "keys.low_otp":
            guard frame["device_id"]?.stringValue == snapshot.deviceID, var keys = snapshot.keys,
                  let fresh = try? keys.makeOneTimeKeys(20, generator: &snapshot.generator) else { return }
            snapshot.keys = keys
            stats.replenished += 1
            request(.replenish, "POST", "/keys/one-time", ["device_id": .string(snapshot.deviceID ?? ""), "one_time_pre_keys": .array(fresh.map { .string($0) })], &out)
        default:
            break
        }
    }
}
