import AgentRuntimeWire
public import LabKernel

extension AgentClient {
    public mutating func handle(_ input: AgentClientInput, now: Instant) -> [AgentClientEffect] {
        var out: [AgentClientEffect] = []
        switch input {
        case .start(let workflow):
            forceNew = false
            begin(workflow: workflow, now: now, &out)
        case .startNew(let workflow):
            forceNew = true
            snapshot.pendingStart = nil
            begin(workflow: workflow, now: now, &out)
        case .restore:
            if socket == .stopped { socket = .closed }
            if activeChat != nil {
                connect(now: now, &out)
            } else if let pending = snapshot.pendingStart {
                requestStart(pending.workflow, now: now, &out)
            }
        case .submit(let text):
            enqueue(PendingAction(id: UUIDText.random(using: &snapshot.generator), text: text, response: nil), now: now, &out)
        case .respond(let id, let response):
            enqueue(PendingAction(id: id, text: nil, response: response.canonicalText), now: now, &out)
        case .upload(let filename, let contentType, let bytes, let intent):
            upload(filename: filename, contentType: contentType, bytes: bytes, intent: intent, now: now, &out)
        case .response(let id, let response):
            guard let flight = inFlight.removeValue(forKey: id) else { break }
            armRequestDeadline()
            respond(flight, response, now: now, &out)
        case .transportFailed(let id):
            guard let flight = inFlight.removeValue(forKey: id) else { break }
            armRequestDeadline()
            failed(flight, status: nil, now: now, &out)
        case .socketOpened:
            guard socket == .opening, let chat = activeChat else { break }
            socket = .resuming
            askResume(chat, now: now, &out)
        case .socketText(let text):
            frame(text, now: now, &out)
        case .socketClosed(let code):
            socketLost(code: code, now: now, &out)
        case .timerFired:
            for timer in timers.popExpired(now: now) { fire(timer, now: now, &out) }
        case .suspend:
            if socket == .opening || socket == .resuming || socket == .open { out.append(.closeSocket) }
            socket = .closed
            awaitingReply = []
            resumeAsked = false
            timers.cancel(.reconnect)
            timers.cancel(.resume)
        case .tokenRefreshed(let token):
            snapshot.token = token
            if socket == .stopped { socket = .closed }
            if activeChat != nil && socket == .closed { connect(now: now, &out) }
        }
        return out
    }

    /// Startup: discovery first (the workflow list may have changed since last time).
    mutating func begin(workflow: String?, now: Instant, _ out: inout [AgentClientEffect]) {
        if socket == .stopped { socket = .closed }
        if !forceNew, let pending = snapshot.pendingStart, workflow == nil || workflow == pending.workflow {
            return requestStart(pending.workflow, now: now, &out)
        }
        request(.discover(wanted: workflow), HTTPRequestMessage(method: "GET", path: RuntimePaths.workflows), now: now, &out)
    }

    /// The workflow to start: the one asked for if listed, else the entry point, else the
    /// first by name.
    static func select(_ listing: [String: JSONValue], wanted: String?) -> String? {
        if let wanted, listing[wanted] != nil { return wanted }
        let names = listing.keys.sorted()
        return names.first { listing[$0]?["entry_point"]?.boolValue == true } ?? names.first
    }

    mutating func requestStart(_ workflow: String, now: Instant, _ out: inout [AgentClientEffect]) {
        let id = snapshot.pendingStart?.workflow == workflow ? snapshot.pendingStart!.clientRequestID : UUIDText.random(using: &snapshot.generator)
        // Stored before the request leaves: a retry, or a relaunch, asks for the same chat.
        snapshot.pendingStart = PendingStart(workflow: workflow, clientRequestID: id)
        var body: [String: JSONValue] = ["user_id": .string(snapshot.userID), "client_request_id": .string(id)]
        if forceNew { body["force_new"] = true }
        request(.start(workflow: workflow), HTTPRequestMessage(method: "POST", path: RuntimePaths.start(app: snapshot.appID, workflow: workflow),
                                                                headers: ["content-type": "application/json"],
                                                                body: Array(JSONValue.object(body).canonicalText.utf8)), now: now, &out)
    }

    mutating func request(_ purpose: Purpose, _ message: HTTPRequestMessage, now: Instant, _ out: inout [AgentClientEffect]) {
        var message = message
        if let token = snapshot.token { message.headers["authorization"] = "Bearer " + token }
        let id = nextRequest
        nextRequest += 1
        inFlight[id] = InFlight(purpose: purpose, request: message, deadline: now + config.requestTimeout)
        armRequestDeadline()
        out.append(.request(id: id, message))
    }

    mutating func armRequestDeadline() {
        if let earliest = inFlight.values.map(\.deadline).min() { timers.arm(.requests, at: earliest) } else { timers.cancel(.requests) }
    }

    mutating func respond(_ flight: InFlight, _ response: HTTPResponseMessage, now: Instant, _ out: inout [AgentClientEffect]) {
        guard response.status == 200, let body = response.jsonBody else { return failed(flight, status: response.status, body: response.jsonBody, now: now, &out) }
        switch flight.purpose {
        case .discover(let wanted):
            guard let listing = body.objectValue, let workflow = Self.select(listing, wanted: wanted) else {
                out.append(.surfaced(AgentClientError(message: "No assistant is available right now.", code: "NO_WORKFLOW")))
                return
            }
            requestStart(workflow, now: now, &out)
        case .start(let workflow):
            guard let chatID = body["chat_id"]?.stringValue else { return failed(flight, status: 502, body: nil, now: now, &out) }
            startAttempts = 0
            forceNew = false
            snapshot.pendingStart = nil
            let key = Self.key(app: snapshot.appID, user: snapshot.userID, chat: chatID)
            if snapshot.chats[key] == nil {
                snapshot.chats[key] = ChatCache(chatID: chatID, workflow: workflow, cacheSeed: Int(body["cache_seed"]?.numberValue ?? 0))
            }
            if snapshot.activeChat != key {
                if socket == .opening || socket == .resuming || socket == .open { out.append(.closeSocket) }
                socket = .closed
            }
            snapshot.activeChat = key
            out.append(.chatReady(chatID: chatID, reused: body["reused"]?.boolValue ?? false))
            if socket == .closed || socket == .backingOff { connect(now: now, &out) }
        case .upload:
            if let id = body["attachment_id"]?.stringValue { out.append(.uploaded(attachmentID: id)) }
        }
    }

    /// A request failed: 401/403 stop and ask for a token; a start retries (same id) after
    /// a backoff; anything else is shown.
    mutating func failed(_ flight: InFlight, status: Int?, body: JSONValue? = nil, now: Instant, _ out: inout [AgentClientEffect]) {
        if status == 401 || status == 403 {
            socket = .stopped
            out.append(.authRequired(reason: body?["detail"]?.stringValue ?? "The runtime refused the token (\(status!))"))
            return
        }
        let retryable = status == nil || status! >= 500 || status == 429
        switch flight.purpose {
        case .discover, .start:
            guard retryable else {
                out.append(.surfaced(AgentClientError(message: "The assistant could not be started.", code: "HTTP_\(status!)")))
                return
            }
            startAttempts += 1
            stats.startRetries += 1
            timers.arm(.startRetry, at: now + backoff(startAttempts))
        case .upload:
            out.append(.surfaced(AgentClientError(message: status == 413 ? "That file is too large to upload." : "The file could not be uploaded.",
                                                  code: status.map { "HTTP_\($0)" } ?? "NETWORK")))
        }
    }

    /// Opens the active chat's socket; the resume follows once it is open.
    mutating func connect(now: Instant, _ out: inout [AgentClientEffect]) {
        guard let chat = activeChat, socket != .stopped else { return }
        socket = .opening
        awaitingReply = []
        resumeAsked = false
        timers.cancel(.reconnect)
        var target = RuntimePaths.socket(workflow: chat.workflow, app: snapshot.appID, chat: chat.chatID, user: snapshot.userID) + "?resume=client"
        if let token = snapshot.token { target += "&access_token=" + PercentEncoding.encode(token) }
        out.append(.openSocket(target: target))
    }

    mutating func askResume(_ chat: ChatCache, now: Instant, _ out: inout [AgentClientEffect]) {
        resumeAsked = true
        stats.resumes += 1
        timers.arm(.resume, at: now + config.resumeTimeout)
        out.append(.socketSend(ClientMessage.resume(chatID: chat.chatID, lastClientIndex: chat.lastIndex).text))
    }

    /// The socket dropped (or never opened): try again after a backoff, unless the token
    /// was refused.
    mutating func socketLost(code: UInt16, now: Instant, _ out: inout [AgentClientEffect]) {
        guard socket != .closed && socket != .stopped else { return }
        awaitingReply = []
        resumeAsked = false
        timers.cancel(.resume)
        if code == 1008 && reconnectAttempts > 0 {
            // Refused twice in a row: the token (or the chat) is not accepted any more.
            socket = .stopped
            out.append(.authRequired(reason: "The runtime closed the socket (1008)"))
            return
        }
        socket = .backingOff
        reconnectAttempts += 1
        stats.reconnects += 1
        timers.arm(.reconnect, at: now + backoff(reconnectAttempts))
    }

    /// `reconnectBase` doubling per attempt up to `reconnectMax`, times a jitter of 0.5…1.5.
    mutating func backoff(_ attempt: Int) -> TimeSpan {
        var delay = config.reconnectBase
        for _ in 1..<max(1, min(attempt, 20)) where delay < config.reconnectMax { delay = delay * 2 }
        delay = min(delay, config.reconnectMax)
        let jitter = 500 + Int64(snapshot.generator.next(below: 1_001))
        return .nanoseconds(delay.nanoseconds / 1_000 * jitter)
    }

    mutating func fire(_ timer: AgentTimer, now: Instant, _ out: inout [AgentClientEffect]) {
        switch timer {
        case .reconnect:
            if socket == .backingOff { connect(now: now, &out) }
        case .resume:
            // No boundary in time: drop this socket and try again.
            guard socket == .resuming || (socket == .open && resumeAsked) else { return }
            stats.timeouts += 1
            out.append(.closeSocket)
            socketLost(code: 1006, now: now, &out)
        case .startRetry:
            if let pending = snapshot.pendingStart { requestStart(pending.workflow, now: now, &out) } else { begin(workflow: nil, now: now, &out) }
        case .requests:
            let expired = inFlight.filter { $0.value.deadline <= now }.keys.sorted()
            for id in expired {
                guard let flight = inFlight.removeValue(forKey: id) else { continue }
                stats.timeouts += 1
                failed(flight, status: nil, now: now, &out)
            }
            armRequestDeadline()
        }
    }
}
