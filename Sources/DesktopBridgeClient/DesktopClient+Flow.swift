public import DesktopBridgeWire
public import LabKernel

extension DesktopClient {
    public mutating func handle(_ input: DesktopClientInput, now: Instant) -> [DesktopClientEffect] {
        var out: [DesktopClientEffect] = []
        switch input {
        case .connect:
            switch link {
            case .idle, .gaveUp, .waiting:
                attempts = 0
                timers.cancel(.reconnect)
                link = .opening
                out.append(.openSocket)
            case .opening, .handshaking, .connected:
                break
            }
        case .socketOpened:
            guard link == .opening else { break }
            let id = nextID
            nextID += 1
            link = .handshaking(id: id)
            let d = config.dialect
            let params = d.object(["protocolVersion": d.protocolVersion, "clientCapabilities": d.object([:]),
                                   "clientInfo": d.object(["name": .string(config.clientName), "version": "0.1.0"])])
            out.append(.send(RPCMessage.request(id: .number(Double(id)), method: "initialize", params: params).text))
            timers.arm(.handshake, at: now + (handshakes == 0 ? config.firstHandshake : config.laterHandshake))
            handshakes += 1
        case .socketText(let text):
            switch RPCFrame(text: text) {
            case .single(.message(let message)): receive(message, now: now, &out)
            case .batch(let items):
                for case .message(let message) in items { receive(message, now: now, &out) }
            case .single(.invalid), .refused:
                break  // nothing a phone can do about a frame it cannot read
            }
        case .socketClosed:
            lost(now: now, &out)
        case .suspend:
            switch link {
            case .opening, .handshaking, .connected: out.append(.closeSocket)
            case .idle, .waiting, .gaveUp: break
            }
            for id in inFlight.keys.sorted() { out.append(.failed(.disconnected(inFlight[id]!.intent))) }
            for entry in queued { out.append(.failed(.disconnected(entry.intent))) }
            inFlight = [:]
            queued = []
            timers = TimerTable()
            link = .idle
        case .timerFired:
            for timer in timers.popExpired(now: now) {
                switch timer {
                case .handshake:
                    guard case .handshaking = link else { continue }
                    out.append(.failed(.handshakeFailed("no answer to initialize in time")))
                    out.append(.closeSocket)
                    lost(now: now, &out)
                case .reconnect:
                    guard link == .waiting else { continue }
                    stats.reconnects += 1
                    link = .opening
                    out.append(.openSocket)
                case .deadlines:
                    for id in inFlight.keys.sorted() where inFlight[id]!.deadline <= now {
                        let intent = inFlight.removeValue(forKey: id)!.intent
                        stats.timeouts += 1
                        out.append(.failed(.timedOut(intent)))
                    }
                    armDeadlines()
                }
            }
        case .newSession(let cwd):
            var params: [String: JSONValue] = ["mcpServers": []]
            if let cwd { params["cwd"] = .string(cwd) }
            request("session/new", params, .newSession, now: now, &out)
        case .prompt(let session, let text):
            request("session/prompt", ["sessionId": .string(session), "prompt": [["type": "text", "text": .string(text)]]], .prompt(session: session),
                    now: now, &out)
        case .cancel(let session, let asRequest):
            if asRequest {
                request("session/cancel", ["sessionId": .string(session)], .cancel(session: session), now: now, &out)
            } else if link == .connected {
                out.append(.send(RPCMessage.notification(method: "session/cancel", params: config.dialect.object(["sessionId": .string(session)])).text))
            }
        case .setMode(let session, let mode):
            request("session/set_mode", ["sessionId": .string(session), "modeId": .string(mode)], .setMode(session: session), now: now, &out)
        case .refresh:
            if link == .connected { request("tinyvex/history.recentSessions", [:], .recent, now: now, &out) }
        case .call(let method, let params):
            let id = nextID
            nextID += 1
            send(id, method, params, .call(method), now: now, &out)
        }
        return out
    }

    /// A request in the dialect's spelling: sent now when connected, else after the handshake.
    mutating func request(_ method: String, _ fields: [String: JSONValue], _ intent: Intent, now: Instant, _ out: inout [DesktopClientEffect]) {
        let id = nextID
        nextID += 1
        send(id, method, config.dialect.object(fields), intent, now: now, &out)
    }

    mutating func send(_ id: Int, _ method: String, _ params: JSONValue, _ intent: Intent, now: Instant, _ out: inout [DesktopClientEffect]) {
        guard link == .connected else {
            queued.append((id, method, params, intent))
            if link == .idle || link == .gaveUp {
                attempts = 0
                link = .opening
                out.append(.openSocket)
            }
            return
        }
        var limit = config.requestDeadline
        if case .prompt = intent, config.dialect == .current { limit = config.turnDeadline }
        inFlight[id] = InFlight(intent: intent, deadline: now + limit)
        armDeadlines()
        out.append(.send(RPCMessage.request(id: .number(Double(id)), method: method, params: params).text))
    }

    mutating func armDeadlines() {
        if let earliest = inFlight.values.map(\.deadline).min() {
            timers.arm(.deadlines, at: earliest)
        } else {
            timers.cancel(.deadlines)
        }
    }

    /// The socket is gone: requests in flight fail (a turn goes on on the desktop and the
    /// history will show it), and the client dials again after a backoff.
    mutating func lost(now: Instant, _ out: inout [DesktopClientEffect]) {
        guard link != .idle, link != .gaveUp, link != .waiting else { return }
        timers.cancel(.handshake)
        for id in inFlight.keys.sorted() { out.append(.failed(.disconnected(inFlight[id]!.intent))) }
        inFlight = [:]
        armDeadlines()
        attempts += 1
        guard attempts <= config.maxAttempts else {
            link = .gaveUp
            for entry in queued { out.append(.failed(.disconnected(entry.intent))) }
            queued = []
            out.append(.gaveUp)
            return
        }
        link = .waiting
        var delay = config.backoffBase
        for _ in 1..<attempts where delay < config.backoffMax { delay = delay * 2 }
        delay = min(delay, config.backoffMax)
        // ±20 % so phones that lost one desktop together do not all dial in the same instant.
        let jitter = 800 + Int64(generator.next(below: 401))
        timers.arm(.reconnect, at: now + .nanoseconds(delay.nanoseconds / 1_000 * jitter))
    }

    mutating func receive(_ message: RPCMessage, now: Instant, _ out: inout [DesktopClientEffect]) {
        switch message {
        case .response(.number(let number), let result):
            let id = Int(exactly: number) ?? -1
            if case .handshaking(let expected) = link, expected == id {
                handshake(result, now: now, &out)
                return
            }
            guard let flight = inFlight.removeValue(forKey: id) else { return }
            armDeadlines()
            answered(flight.intent, result, now: now, &out)
        case .failure(.number(let number), let error):
            let id = Int(exactly: number) ?? -1
            if case .handshaking(let expected) = link, expected == id {
                out.append(.failed(.handshakeFailed(error.message)))
                out.append(.closeSocket)
                lost(now: now, &out)
                return
            }
            guard let flight = inFlight.removeValue(forKey: id) else { return }
            armDeadlines()
            stats.failures += 1
            out.append(.failed(.rpc(intent: flight.intent, code: error.code, message: error.message)))
        case .notification("session/update", let params?):
            guard let notification = SessionNotification(params: params, dialect: config.dialect) else { return }
            apply(notification, now: now, &out)
        case .response, .failure, .notification, .request:
            break  // ids this client never uses, other notifications, calls it does not serve
        }
    }

    mutating func handshake(_ result: JSONValue, now: Instant, _ out: inout [DesktopClientEffect]) {
        timers.cancel(.handshake)
        let version = result[config.dialect.key("protocolVersion")]
        let accepted: Bool
        switch config.dialect {
        case .legacy: accepted = version?.stringValue?.hasPrefix("0.2") == true
        case .current: accepted = version?.numberValue == 1
        }
        guard accepted else {
            // The seed's rule: a desktop that speaks another version is not retried.
            link = .gaveUp
            out.append(.failed(.handshakeFailed("the desktop speaks protocol version \(version?.canonicalText ?? "none")")))
            out.append(.closeSocket)
            return
        }
        link = .connected
        attempts = 0
        stats.connects += 1
        workingDirectory = result["_meta"]?["working_directory"]?.stringValue
        out.append(.connected(workingDirectory: workingDirectory))
        let waiting = queued
        queued = []
        for entry in waiting { send(entry.id, entry.method, entry.params, entry.intent, now: now, &out) }
        request("tinyvex/history.recentSessions", [:], .recent, now: now, &out)
    }

    mutating func answered(_ intent: Intent, _ result: JSONValue, now: Instant, _ out: inout [DesktopClientEffect]) {
        let d = config.dialect
        switch intent {
        case .initialize: break
        case .newSession:
            guard let session = result[d.key("sessionId")]?.stringValue else { return }
            if timelines[session] == nil { timelines[session] = [] }
            out.append(.sessionCreated(session))
        case .prompt(let session):
            if let reason = result["stopReason"]?.stringValue {
                out.append(.turnEnded(session: session, stopReason: reason))
            } else {
                out.append(.promptAccepted(session: session))
            }
        case .cancel: out.append(.answered(method: "session/cancel", result: result))
        case .setMode: out.append(.answered(method: "session/set_mode", result: result))
        case .recent:
            var sessions = Set(timelines.keys)
            for entry in result.arrayValue ?? [] { if let id = entry[d.key("sessionId")]?.stringValue { sessions.insert(id) } }
            for session in sessions.sorted() { request("tinyvex/history.sessionTimeline", ["sessionId": .string(session)], .timeline(session: session), now: now, &out) }
        case .timeline(let session):
            // The socket is in order: every update sent before this answer is in it, every
            // one after it comes after it. So the history replaces the timeline.
            let entries = (result.arrayValue ?? []).compactMap { SessionNotification(params: $0, dialect: d) }
            timelines[session] = entries
            stats.rebuilds += 1
            out.append(.rebuilt(session: session, updates: entries.count))
            out.append(.timelineChanged(session: session))
        case .call(let method): out.append(.answered(method: method, result: result))
        }
    }

    /// A live update: applied if it is the next of its session; one already shown is
    /// skipped; one after a gap asks the history for the session.
    mutating func apply(_ notification: SessionNotification, now: Instant, _ out: inout [DesktopClientEffect]) {
        let session = notification.sessionID
        let last = timelines[session]?.last?.seq ?? 0
        if notification.seq != 0 && notification.seq <= last {
            stats.skipped += 1
            return
        }
        if notification.seq > last + 1 {
            // A gap: what came between is in the history.
            if !inFlight.values.contains(where: { $0.intent == .timeline(session: session) }) {
                request("tinyvex/history.sessionTimeline", ["sessionId": .string(session)], .timeline(session: session), now: now, &out)
            }
            return
        }
        timelines[session, default: []].append(notification)
        stats.applied += 1
        out.append(.timelineChanged(session: session))
    }
}
