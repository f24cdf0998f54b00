public import AIBridgeWire
import LabCrypto
public import LabKernel

/// The Mobile AI Bridge relay (the seed's Cloudflare Worker) as a sans-I/O core: it pairs
/// phones with a daemon by PIN, authenticates their bearer tokens, forwards their
/// command envelopes through the daemon's tunnel and streams the answers back.
///
/// Theory of operation. A driver hands in HTTP requests (`handle`), tunnel events
/// (`tunnelOpened`, `tunnelReceived`, `tunnelClosed`), a client that went away
/// (`exchangeAbandoned`) and expired deadlines (`expire`), each with `now`. A request the
/// relay can answer alone (a bad token, a malformed envelope, no daemon) is answered at
/// once; one that needs the daemon becomes an *exchange*: the reply says `pending(id)`
/// and the answer comes later as outputs: `respond` (a whole response, e.g. the daemon's
/// 400 unknown_command), or `streamOpen`, `streamEvent`s and `streamClose` (Server-Sent
/// Events). Every exchange has a deadline (the first answer within `firstAnswer`, then
/// silence at most `idleLimit`), so no phone waits forever; a daemon that goes away ends
/// each of its exchanges: 503 before the stream began, an `error` event after.
///
/// The relay reads envelopes only to refuse malformed ones early; a sealed envelope
/// (docs/ai-bridge.md) is forwarded as it came, and only the daemon can open it. It never
/// logs or stores a body, a PIN or a token: tokens are kept as SHA-256, PINs in memory
/// for their five minutes. Wrong PINs are counted per client address (the driver's peer,
/// never a header) and against every session open at the time; a session that has seen
/// `sessionFailures` of them dies.
public struct BridgeRelay: Sendable {
    public var state: RelayState
    public var config: RelayConfig
    var generator: SeededGenerator

    public init(state: RelayState = RelayState(), config: RelayConfig = RelayConfig(), seed: StreamSeed) {
        self.state = state
        self.config = config
        generator = seed.generator()
    }

    public mutating func handle(_ request: HTTPRequestMessage, now: Instant) -> RelayReply {
        var reply = RelayReply()
        do {
            try route(request, now: now, &reply)
        } catch {
            reply.response = error.response
            reply.pending = nil
        }
        return reply
    }

    mutating func route(_ request: HTTPRequestMessage, now: Instant, _ reply: inout RelayReply) throws(BridgeFailure) {
        switch (request.method, request.path) {
        case ("POST", "/v1/pair/confirm"): try confirm(request, now: now, &reply)
        case ("POST", "/v1/chat"): try chat(request, now: now, &reply)
        case ("GET", "/v1/status"):
            let (_, record) = try authenticate(request)
            reply.response = .json(200, ["paired": true, "daemon_id": .string(record.daemonID),
                                         "daemon_online": .bool(state.tunnelOfDaemon[record.daemonID] != nil)])
        case ("GET", "/v1/health"): reply.response = .json(200, ["status": "ok"])
        case (_, "/v1/pair/confirm"), (_, "/v1/chat"), (_, "/v1/status"): throw .methodNotAllowed
        default: throw .notFound
        }
    }

    // MARK: Pairing

    /// `POST /v1/pair/confirm {"pin", "device_id"?}`: a PIN an open session holds is used
    /// up at once and the daemon issues the token; the phone gets `token`,
    /// `server_public_key` (32 bytes, base64) and `worker_url`.
    mutating func confirm(_ request: HTTPRequestMessage, now: Instant, _ reply: inout RelayReply) throws(BridgeFailure) {
        let peer = request.peer ?? "unknown"
        if var window = state.attempts[peer] {
            if now - window.since > config.attemptWindow { window = Attempts(since: now, failures: 0) }
            state.attempts[peer] = window
            if window.failures >= config.attemptsPerWindow {
                let wait = max(1, (window.since + config.attemptWindow - now).nanoseconds / 1_000_000_000)
                throw .tooManyAttempts(retryAfterSeconds: Int(wait))
            }
        }
        let body = try Self.object(request)
        guard case .string(let pin)? = body["pin"] else { throw .invalidPayload(field: "pin", message: "'pin' is required: the six digits the daemon shows") }
        guard pin.utf8.count == 6, pin.utf8.allSatisfy({ (48...57).contains($0) }) else {
            throw .invalidPayload(field: "pin", message: "'pin' is six digits")
        }
        let device: String
        switch body["device_id"] {
        case nil, .null?: device = UUIDText.random(using: &generator)
        case .string(let id)? where !id.isEmpty && id.utf8.count <= 128: device = id
        default: throw .invalidPayload(field: "device_id", message: "'device_id' is a string of 1 to 128 characters")
        }
        expireSessions(now: now, &reply)
        // Every open session is compared (in constant time), so timing tells nothing.
        // Two open sessions with the same PIN: the greater id is taken, the same on every run.
        let match = state.sessions.filter({ Self.equal(Array($0.value.pin.utf8), Array(pin.utf8)) }).keys.max()
        guard let sessionID = match, let session = state.sessions.removeValue(forKey: sessionID) else {
            wrongPIN(peer: peer, now: now, &reply)
            throw .invalidPIN
        }
        guard let tunnel = state.tunnelOfDaemon[session.daemonID] else { throw .bridgeOffline }
        let exchange = open(.pair(deviceID: device), daemon: session.daemonID, tunnel: tunnel, deadline: now + config.firstAnswer)
        reply.pending = exchange
        reply.send(tunnel, .pairIssue(requestID: exchange, sessionID: sessionID, deviceID: device))
    }

    /// A wrong PIN: counted for the address and against every open session.
    mutating func wrongPIN(peer: String, now: Instant, _ reply: inout RelayReply) {
        state.attempts[peer, default: Attempts(since: now, failures: 0)].failures += 1
        for id in state.sessions.keys.sorted() {
            state.sessions[id]!.failures += 1
            guard state.sessions[id]!.failures >= config.sessionFailures, let session = state.sessions.removeValue(forKey: id) else { continue }
            if let tunnel = state.tunnelOfDaemon[session.daemonID] { reply.send(tunnel, .pairingClosed(sessionID: id, reason: "too many wrong PINs")) }
        }
    }

    mutating func expireSessions(now: Instant, _ reply: inout RelayReply) {
        for id in state.sessions.filter({ $0.value.expiresAt <= now }).keys.sorted() {
            let session = state.sessions.removeValue(forKey: id)!
            if let tunnel = state.tunnelOfDaemon[session.daemonID] { reply.send(tunnel, .pairingClosed(sessionID: id, reason: "expired")) }
        }
    }

    // MARK: Chat

    /// `POST /v1/chat`: the bearer's daemon gets the envelope (plain or sealed) through its
    /// tunnel; its answer comes back as an exchange.
    mutating func chat(_ request: HTTPRequestMessage, now: Instant, _ reply: inout RelayReply) throws(BridgeFailure) {
        let (_, record) = try authenticate(request)
        guard request.body.count <= config.maxBodyBytes else { throw .payloadTooLarge(limit: config.maxBodyBytes) }
        let body = try Self.object(request)
        if let sealed = body["sealed"] {
            guard sealed.objectValue != nil, body.count == 1 else { throw .invalidEnvelope("a sealed request is {\"sealed\": {v, epk, nonce, box}} and nothing else") }
        } else {
            _ = try CommandEnvelope(parsing: .object(body))
        }
        guard let tunnel = state.tunnelOfDaemon[record.daemonID] else { throw .bridgeOffline }
        let exchange = open(.chat, daemon: record.daemonID, tunnel: tunnel, deadline: now + config.firstAnswer)
        reply.pending = exchange
        reply.send(tunnel, .request(requestID: exchange, body: .object(body)))
    }

    /// The bearer's token record: 401 for a missing, unknown or revoked token, and for one
    /// issued under a key its daemon no longer has (it restarted: pair again).
    func authenticate(_ request: HTTPRequestMessage) throws(BridgeFailure) -> (hash: String, record: TokenRecord) {
        guard let header = request.header("authorization"), header.lowercased().hasPrefix("bearer "), header.utf8.count <= 512 else {
            throw .unauthorized("a bearer token is required; pair first")
        }
        let hash = Self.hash(String(header.dropFirst(7)).trimmingWhitespace())
        guard let record = state.tokens[hash] else { throw .unauthorized("unknown or revoked token; pair again") }
        guard state.daemons[record.daemonID]?.serverPublicKey == record.serverPublicKey else {
            throw .unauthorized("the daemon restarted with a new key; pair again")
        }
        return (hash, record)
    }

    mutating func open(_ kind: Exchange.Kind, daemon: String, tunnel: Int, deadline: Instant) -> Int {
        let id = state.nextExchange
        state.nextExchange += 1
        state.exchanges[id] = Exchange(kind: kind, daemonID: daemon, tunnel: tunnel, deadline: deadline, streaming: false)
        return id
    }

    /// The client of an exchange went away: the daemon is told to stop.
    public mutating func exchangeAbandoned(_ id: Int) -> RelayReply {
        var reply = RelayReply()
        guard let exchange = state.exchanges.removeValue(forKey: id) else { return reply }
        reply.send(exchange.tunnel, .cancel(requestID: id))
        return reply
    }

    /// Deadlines due by `now`: 504 before an answer began, an error event after; PIN
    /// sessions past their five minutes close.
    public mutating func expire(now: Instant) -> RelayReply {
        var reply = RelayReply()
        expireSessions(now: now, &reply)
        for id in state.exchanges.filter({ $0.value.deadline <= now }).keys.sorted() {
            let exchange = state.exchanges.removeValue(forKey: id)!
            reply.send(exchange.tunnel, .cancel(requestID: id))
            end(id, exchange, with: .bridgeTimeout, &reply)
        }
        return reply
    }

    /// When `expire` next has work (nil: nothing pending).
    public var nextDeadline: Instant? {
        // Called after every exchange the relay has: a scan, with nothing allocated.
        let exchange = state.exchanges.values.lazy.map(\.deadline).min()
        let session = state.sessions.values.lazy.map(\.expiresAt).min()
        guard let exchange, let session else { return exchange ?? session }
        return min(exchange, session)
    }

    /// Ends an exchange that failed: its response, or an `error` event if it was streaming.
    mutating func end(_ id: Int, _ exchange: Exchange, with failure: BridgeFailure, _ reply: inout RelayReply) {
        if exchange.streaming {
            reply.outputs.append(.streamEvent(exchange: id, ServerSentEvents.Event("error", failure.body.canonicalText)))
            reply.outputs.append(.streamClose(exchange: id))
        } else {
            reply.outputs.append(.respond(exchange: id, failure.response))
        }
    }

    // MARK: Helpers

    static func object(_ request: HTTPRequestMessage) throws(BridgeFailure) -> [String: JSONValue] {
        guard !request.body.isEmpty else { throw .invalidEnvelope("the body is empty; send a JSON object") }
        guard let value = try? JSONValue.parse(bytes: request.body) else { throw .invalidEnvelope("the body is not JSON") }
        guard case .object(let object) = value else { throw .invalidEnvelope("the body must be a JSON object") }
        return object
    }

    static func hash(_ token: String) -> String { SHA256.hash(token).hexString }

    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

public struct RelayConfig: Sendable {
    /// What pairing hands out as `worker_url`.
    public var workerURL = "http://127.0.0.1:7740"
    public var attemptsPerWindow = 5
    public var attemptWindow: TimeSpan = .minutes(15)
    /// Wrong PINs a session survives.
    public var sessionFailures = 5
    public var pairingLifetime: TimeSpan = .minutes(5)
    /// The daemon's first answer must come within this; then no silence longer than `idleLimit`.
    public var firstAnswer: TimeSpan = .seconds(15)
    public var idleLimit: TimeSpan = .seconds(60)
    public var maxBodyBytes = 256 * 1024

    public init() {}
}

/// What one call produced.
public struct RelayReply: Sendable {
    /// The answer to `handle`, unless the request became an exchange (`pending`).
    public var response: HTTPResponseMessage = .empty(204)
    public var pending: Int?
    public var outputs: [RelayOutput] = []
    public var changes: [RelayStoreChange] = []

    public init() {}

    mutating func send(_ tunnel: Int, _ message: TunnelMessage) { outputs.append(.tunnelSend(tunnel: tunnel, message.text)) }
}

public enum RelayOutput: Sendable, Equatable {
    /// An exchange's whole answer.
    case respond(exchange: Int, HTTPResponseMessage)
    /// An exchange's answer is a stream (200, `text/event-stream`); events follow.
    case streamOpen(exchange: Int)
    case streamEvent(exchange: Int, ServerSentEvents.Event)
    case streamClose(exchange: Int)
    case tunnelSend(tunnel: Int, String)
    case tunnelClose(tunnel: Int, code: UInt16, reason: String)
}
