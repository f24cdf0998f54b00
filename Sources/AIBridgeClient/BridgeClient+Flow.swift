import AIBridgeWire
public import LabKernel

extension BridgeClient {
    public mutating func handle(_ input: BridgeClientInput, now: Instant) -> [BridgeClientEffect] {
        var out: [BridgeClientEffect] = []
        switch input {
        case .pair(let pin):
            let body: JSONValue = ["pin": .string(pin), "device_id": .string(snapshot.deviceID)]
            start(.pair, HTTPRequestMessage(method: "POST", path: "/v1/pair/confirm", headers: ["content-type": "application/json"],
                                            body: Array(body.canonicalText.utf8)), key: nil, limit: config.pairLimit, now: now, &out)
        case .send(let command, let payload):
            send(command, payload, now: now, &out)
        case .cancel(let id):
            guard flights.removeValue(forKey: id) != nil else { break }
            out.append(.cancelRequest(id: id))
            armDeadline()
        case .response(let id, let response):
            guard let flight = flights.removeValue(forKey: id) else { break }
            armDeadline()
            answered(id, flight, response, &out)
        case .streamHead(let id, let status, let headers):
            guard var flight = flights[id] else { break }
            let type = headers.first { $0.name.lowercased() == "content-type" }?.value ?? ""
            guard status == 200, type.hasPrefix("text/event-stream") else {
                // Not a stream: the body will be the whole answer.
                flight.streaming = false
                flights[id] = flight
                pendingStatus[id] = status
                break
            }
            flight.streaming = true
            flight.deadline = now + config.idleLimit
            flights[id] = flight
            armDeadline()
        case .streamBody(let id, let bytes):
            guard var flight = flights[id] else { break }
            guard flight.streaming else {
                pendingBody[id, default: []] += bytes
                break
            }
            flight.deadline = now + config.idleLimit
            let events: [ServerSentEvents.Event]
            do { events = try flight.parser.feed(bytes) } catch {
                flights[id] = nil
                out.append(.cancelRequest(id: id))
                fail(id, .interrupted("a line of the stream was too long"), &out)
                break
            }
            flights[id] = flight
            for event in events { streamed(id, event, &out) }
            armDeadline()
        case .streamEnd(let id):
            if let status = pendingStatus.removeValue(forKey: id), let flight = flights.removeValue(forKey: id) {
                answered(id, flight, HTTPResponseMessage(status: status, headers: [HTTPHeader("Content-Type", "application/json")],
                                                         body: pendingBody.removeValue(forKey: id) ?? []), &out)
            } else if flights.removeValue(forKey: id) != nil {
                // The stream ended without `done` or `error`: cut off.
                fail(id, .interrupted("the stream ended early"), &out)
            }
            armDeadline()
        case .transportFailed(let id):
            guard let flight = flights.removeValue(forKey: id) else { break }
            pendingStatus[id] = nil
            pendingBody[id] = nil
            armDeadline()
            fail(id, flight.streaming ? .interrupted("the connection dropped") : .bridgeOffline, &out)
        case .timerFired:
            for _ in timers.popExpired(now: now) {}
            for id in flights.keys.sorted() where flights[id]!.deadline <= now {
                flights[id] = nil
                pendingStatus[id] = nil
                pendingBody[id] = nil
                stats.timeouts += 1
                out.append(.cancelRequest(id: id))
                fail(id, .timedOut, &out)
            }
            armDeadline()
        case .forget:
            snapshot.keychain = nil
            out.append(.keychainChanged(nil))
        }
        return out
    }

    /// A command: an envelope, sealed to the daemon's key when the keychain has one.
    mutating func send(_ command: String, _ payload: [String: JSONValue], now: Instant, _ out: inout [BridgeClientEffect]) {
        let id = nextRequest
        guard let keychain = snapshot.keychain else {
            nextRequest += 1
            out.append(.started(id: id, command: command))
            fail(id, .notPaired, &out)
            return
        }
        let envelope = CommandEnvelope(command: command, payload: payload).json
        var body = envelope
        var key: [UInt8]?
        if config.seal {
            do {
                let sealed = try BridgeSeal.seal(envelope, to: keychain.serverPublicKey, ephemeralSeed: snapshot.generator.bytes(32),
                                                 nonce: snapshot.generator.bytes(24))
                (body, key) = (sealed.body, sealed.key)
            } catch {
                nextRequest += 1
                out.append(.started(id: id, command: command))
                fail(id, .invalidRequest("the daemon's key in the keychain is not usable; pair again"), &out)
                return
            }
        }
        out.append(.started(id: id, command: command))
        start(.command(command), HTTPRequestMessage(method: "POST", path: "/v1/chat",
                                                    headers: ["content-type": "application/json", "accept": "text/event-stream",
                                                              "authorization": "Bearer " + keychain.token],
                                                    body: Array(body.canonicalText.utf8)), key: key, limit: config.firstAnswer, now: now, &out)
    }

    mutating func start(_ purpose: Flight.Purpose, _ request: HTTPRequestMessage, key: [UInt8]?, limit: TimeSpan, now: Instant,
                        _ out: inout [BridgeClientEffect]) {
        let id = nextRequest
        nextRequest += 1
        flights[id] = Flight(purpose: purpose, key: key, deadline: now + limit)
        armDeadline()
        out.append(.request(id: id, request))
    }

    mutating func armDeadline() {
        if let earliest = flights.values.map(\.deadline).min() { timers.arm(.deadlines, at: earliest) } else { timers.cancel(.deadlines) }
    }

    /// A whole answer: a pairing, a command's response, or a refusal.
    mutating func answered(_ id: Int, _ flight: Flight, _ response: HTTPResponseMessage, _ out: inout [BridgeClientEffect]) {
        let body = response.jsonBody
        guard response.status == 200 else {
            let error = BridgeFailure(status: response.status, body: body).map(BridgeError.init)
                ?? .server(status: response.status, code: body?["error"]?.stringValue ?? "http_\(response.status)")
            if error == .unauthorized, snapshot.keychain != nil {
                snapshot.keychain = nil
                out.append(.keychainChanged(nil))
            }
            return fail(id, error, &out)
        }
        switch flight.purpose {
        case .pair:
            guard let token = body?["token"]?.stringValue, !token.isEmpty,
                  let key = body?["server_public_key"]?.stringValue.flatMap(Base64.decode), key.count == 32 else {
                return fail(id, .server(status: 502, code: "bad_pairing_answer"), &out)
            }
            // Both items together: re-pairing clears and replaces them.
            let keychain = Keychain(token: token, serverPublicKey: key, workerURL: body?["worker_url"]?.stringValue ?? config.relayURL,
                                    daemonID: body?["daemon_id"]?.stringValue ?? "")
            snapshot.keychain = keychain
            stats.paired += 1
            out.append(.keychainChanged(keychain))
            out.append(.paired(daemonID: keychain.daemonID))
        case .command:
            guard let body else { return fail(id, .server(status: 502, code: "not_json"), &out) }
            guard let opened = open(body, flight.key) else { return fail(id, .interrupted("the answer does not open with this request's key"), &out) }
            stats.finished += 1
            out.append(.finished(id: id, opened))
        }
    }

    /// One event of a streamed answer.
    mutating func streamed(_ id: Int, _ event: ServerSentEvents.Event, _ out: inout [BridgeClientEffect]) {
        guard let flight = flights[id] else { return }
        let data = (try? JSONValue.parse(event.data)) ?? .null
        switch event.name {
        case "chunk":
            guard let opened = open(data, flight.key), let text = opened["text"]?.stringValue else {
                flights[id] = nil
                out.append(.cancelRequest(id: id))
                return fail(id, .interrupted("a chunk did not open with this request's key"), &out)
            }
            stats.chunks += 1
            out.append(.chunk(id: id, text: text))
        case "done":
            flights[id] = nil
            stats.finished += 1
            out.append(.finished(id: id, open(data, flight.key) ?? data))
        case "error":
            flights[id] = nil
            let failure = BridgeFailure(status: 502, body: data)
            fail(id, failure.map(BridgeError.init) ?? .interrupted(data["message"]?.stringValue ?? "the stream failed"), &out)
        default:
            break
        }
    }

    /// A frame's data, opened with the request's key when the request was sealed; nil when
    /// it does not open, and for plaintext in a sealed exchange (a relay that injects frames
    /// gets nothing shown).
    func open(_ data: JSONValue, _ key: [UInt8]?) -> JSONValue? {
        guard let key else { return data["sealed"] == nil ? data : nil }
        return BridgeSeal.openReply(data, key: key)
    }

    mutating func fail(_ id: Int, _ error: BridgeError, _ out: inout [BridgeClientEffect]) {
        stats.failed += 1
        out.append(.failed(id: id, error))
    }
}
