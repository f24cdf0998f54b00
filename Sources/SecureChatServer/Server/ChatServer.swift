public import LabCrypto
public import LabKernel

/// The d3chat reference server (wire-notes §d) as a sans-I/O core, with the fixes the
/// issue asks for: refresh rotation with reuse detection, membership checks on every
/// channel-scoped route, idempotent sends, rate limits, ciphertext-only v2 messages.
///
/// Theory of operation. A driver hands in HTTP requests (`handle`) and WebSocket events
/// (`connect`, `receive`, `disconnect`) with `now`; the core reads and writes its
/// `ChatServerState` and returns the response and the frames to write to connections
/// (`ChatOutput`). It keeps the connection registry itself, so fan-out (who hears
/// `message.new`) is decided here and the same in live mode and in simulation. Ids,
/// tokens and password salts come from its seeded stream. Errors are FastAPI's
/// `{"detail": …}`: a string, or for invalid input (422) a list of
/// `{loc, msg, type}`; every route validates before its first write.
public struct ChatServer: Sendable {
    public var state: ChatServerState
    public var config: ChatServerConfig
    public let wallClock: WallClockOrigin
    var generator: SeededGenerator

    public init(state: ChatServerState = ChatServerState(), config: ChatServerConfig = ChatServerConfig(), seed: StreamSeed,
                wallClock: WallClockOrigin) {
        self.state = state
        self.config = config
        self.wallClock = wallClock
        self.generator = seed.generator()
    }

    /// Handles one HTTP request, password work included (tests and the simulator; the
    /// live driver uses `begin` and `finish` to keep that work out of its lock).
    public mutating func handle(_ request: HTTPRequestMessage, now: Instant) -> ChatReply {
        switch begin(request, now: now) {
        case .reply(let reply): return reply
        case .password(let job): return finish(job, job.run(), now: now)
        }
    }

    /// Phase one of a request: its reply, or the password work it needs first (a register
    /// or a login). Run that job without holding whatever guards this core, then `finish`.
    public mutating func begin(_ request: HTTPRequestMessage, now: Instant) -> ChatStep {
        var outputs: [ChatOutput] = []
        forgetExpiredIfDue(now: now)
        let step: ChatStep
        do {
            step = try route(request, now: now, outputs: &outputs)
        } catch let error as ChatAPIError {
            step = .reply(ChatReply(response: error.response, outputs: outputs))
        } catch {
            step = .reply(ChatReply(response: .json(500, ["detail": "Internal server error"]), outputs: outputs))
        }
        guard case .reply(var reply) = step else { return step }
        reply.changes = state.takeChanges()
        return .reply(reply)
    }

    /// Phase two of a register or login: the job's result, turned into the reply.
    public mutating func finish(_ job: PasswordJob, _ result: PasswordJob.Result, now: Instant) -> ChatReply {
        var reply = finishing(job, result, now: now)
        reply.changes = state.takeChanges()
        return reply
    }

    mutating func finishing(_ job: PasswordJob, _ result: PasswordJob.Result, now: Instant) -> ChatReply {
        guard let pending = state.pendingAuth.removeValue(forKey: job.id) else {
            return ChatReply(response: .json(500, ["detail": "Internal server error"]), outputs: [])
        }
        do {
            return ChatReply(response: try finishAuth(pending, result, now: now), outputs: [])
        } catch let error as ChatAPIError {
            return ChatReply(response: error.response, outputs: [])
        } catch {
            return ChatReply(response: .json(500, ["detail": "Internal server error"]), outputs: [])
        }
    }

    mutating func route(_ request: HTTPRequestMessage, now: Instant, outputs: inout [ChatOutput]) throws -> ChatStep {
        var path = request.segments
        if path == [".well-known", "d3chat-server"] {
            return .reply(ChatReply(response: .json(200, ["domain": .string(config.domain), "signing_key_public": .null,
                                                          "api_base_url": .string(config.baseURL + "/api/v1"), "protocol_version": 2]),
                                    outputs: []))
        }
        guard path.count >= 2, path[0] == "api", path[1] == "v1" else { throw ChatAPIError(404, "Not Found") }
        path.removeFirst(2)
        let method = request.method
        if path.first == "auth" {
            // Keyed by the connection's address as the driver saw it, never by a header.
            try rateLimit("auth:" + (request.peer ?? "unknown"), capacity: config.authRequestsPerMinute, now: now)
            switch (method, Array(path.dropFirst())) {
            case ("POST", ["register"]): return try register(request, now: now)
            case ("POST", ["login"]): return try login(request, now: now)
            case ("POST", ["refresh"]): return .reply(ChatReply(response: try refresh(request, now: now, outputs: &outputs), outputs: outputs))
            case ("POST", ["logout"]): return .reply(ChatReply(response: try logout(request, now: now, outputs: &outputs), outputs: outputs))
            default: break
            }
        }
        let response = try routeAuthenticated(request, path: path, now: now, outputs: &outputs)
        return .reply(ChatReply(response: response, outputs: outputs))
    }

    mutating func routeAuthenticated(_ request: HTTPRequestMessage, path: [String], now: Instant,
                                     outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let method = request.method
        let caller = try authenticate(request, now: now)
        try rateLimit("user:" + caller.userID, capacity: config.requestsPerMinute, now: now)
        state.devices[caller.deviceID]?.lastSeenAt = now
        switch (method, path) {
        case ("POST", ["auth", "logout-all"]): return logoutAll(caller, outputs: &outputs)
        case ("POST", ["auth", "ws-ticket"]): return wsTicket(caller, now: now)
        case ("GET", ["users", "me"]): return .json(200, userJSON(state.users[caller.userID]!))
        case ("GET", let p) where p.count == 3 && p[0] == "users" && p[1] == "by-username": return try userByName(p[2])
        case ("GET", let p) where p.count == 3 && p[0] == "users" && p[2] == "devices": return try userDevices(p[1])
        case ("POST", ["devices"]): return try createDevice(request, caller: caller, now: now)
        case ("GET", ["devices"]): return listDevices(caller)
        case ("POST", ["keys", "upload"]): return try uploadKeys(request, caller: caller, outputs: &outputs)
        case ("POST", ["keys", "one-time"]): return try addOneTimeKeys(request, caller: caller)
        case ("POST", ["channels"]): return try createChannel(request, caller: caller, now: now, outputs: &outputs)
        case ("GET", ["channels"]): return listChannels(caller)
        case ("POST", ["channels", "dm"]): return try openDM(request, caller: caller, now: now, outputs: &outputs)
        case ("GET", ["channels", "invites"]): return myInvites(caller, now: now)
        default: break
        }
        switch (method, path.count, path.first) {
        case ("DELETE", 2, "devices"): return try deleteDevice(path[1], caller: caller, outputs: &outputs)
        case ("GET", 3, "keys") where path[2] == "bundles": return try userBundles(path[1], caller: caller, now: now, outputs: &outputs)
        case ("GET", 3, "keys") where path[2] == "bundle": return try deviceBundle(path[1], caller: caller, now: now, outputs: &outputs)
        case (_, 4, "keys") where path[1] == "channels" && path[3] == "x3dh-setup":
            return try x3dhSetup(method, channelID: path[2], request, caller: caller)
        case (_, 4, "keys") where path[1] == "channels" && path[3] == "sender-keys":
            return try senderKeys(method, channelID: path[2], request, caller: caller, outputs: &outputs)
        case (_, 3, "channels") where path[1] == "messages": return try editOrDelete(method, messageID: path[2], request, caller: caller, now: now, outputs: &outputs)
        case (_, 2, "channels"): return try channel(method, path[1], request, caller: caller, now: now, outputs: &outputs)
        case (_, 3, "channels"): return try channelAction(method, path[1], path[2], request, caller: caller, now: now, outputs: &outputs)
        case ("DELETE", 4, "channels") where path[2] == "members":
            return try removeMemberRoute(path[1], user: path[3], caller: caller, now: now, outputs: &outputs)
        case (_, _, "admin"): return try admin(method, Array(path.dropFirst()), request, caller: caller, now: now, outputs: &outputs)
        default: throw ChatAPIError(404, "Not Found")
        }
    }

    // MARK: Helpers shared by the routes

    func fields(_ request: HTTPRequestMessage) throws -> JSONFields {
        guard !request.body.isEmpty else { throw ChatAPIError.validation(["body"], "Field required", type: "missing") }
        let value: JSONValue
        do { value = try JSONValue.parse(bytes: request.body) } catch {
            throw ChatAPIError.validation(["body"], "JSON decode error: \(error)", type: "json_invalid")
        }
        do { return try JSONFields(value) } catch { throw ChatAPIError.validation(["body"], "Input should be a valid dictionary", type: "dict_type") }
    }

    mutating func newID() -> String { UUIDText.random(using: &generator) }

    func timestamp(_ instant: Instant) -> String { wallClock.rfc3339(at: instant) }

    func requireUUID(_ text: String, _ loc: [String]) throws {
        guard UUIDText.isValid(text) else { throw ChatAPIError.validation(loc, "Input should be a valid UUID", type: "uuid_parsing") }
    }

    /// The channel, if the caller is a member: 404 when it does not exist, 403 otherwise.
    /// Reading and posting messages and key setup need this: being a server admin does
    /// not open anyone else's conversation.
    func memberChannel(_ id: String, _ caller: Caller) throws -> ChatChannel {
        try requireUUID(id, ["path", "channel_id"])
        guard let channel = state.channels[id] else { throw ChatAPIError(404, "Channel not found") }
        guard state.isMember(caller.userID, of: id) else { throw ChatAPIError(403, "Not a member of this channel") }
        return channel
    }

    /// The channel, if the caller is a member or a server admin moderating it (metadata,
    /// the member list, removal and deletion: never its messages).
    func moderatedChannel(_ id: String, _ caller: Caller) throws -> ChatChannel {
        try requireUUID(id, ["path", "channel_id"])
        guard let channel = state.channels[id] else { throw ChatAPIError(404, "Channel not found") }
        guard state.isMember(caller.userID, of: id) || caller.isAdmin else { throw ChatAPIError(403, "Not a member of this channel") }
        return channel
    }
}

public struct ChatServerConfig: Sendable {
    public var passwordCost: PasswordHash.Cost = .interactive
    public var accessTokenLifetime: TimeSpan = .minutes(15)
    public var refreshTokenLifetime: TimeSpan = .days(30)
    /// A rotated refresh token presented again this soon, while the token it was rotated
    /// to has never been used, is a retry whose answer was lost: it gets a fresh pair (the
    /// unused one is revoked) instead of ending the login as reuse (Auth0's "reuse
    /// interval", Okta's grace period). Covers a client's request deadline and backoff.
    public var refreshRetryGrace: TimeSpan = .minutes(3)
    public var ticketLifetime: TimeSpan = .seconds(30)
    public var inviteLifetime: TimeSpan = .days(7)
    public var lowOneTimeKeyThreshold = 10
    /// Token-bucket capacities, refilled over a minute: per user, per client address on
    /// `/auth`, failed logins per account, bundle fetches per (requester, target user)
    /// and per requester.
    public var requestsPerMinute = 600
    public var authRequestsPerMinute = 60
    public var failedLoginsPerAccountPerMinute = 10
    public var bundleFetchesPerTargetPerMinute = 10
    public var bundleFetchesPerMinute = 300
    /// Whether a group may be created on the legacy plaintext protocol (`"legacy_plaintext":
    /// true` when creating it). Off: every channel is ciphertext only.
    public var allowLegacyPlaintext = false
    public var maxContentBytes = 65_536
    public var domain = "localhost"
    public var baseURL = "http://127.0.0.1:7720"

    public init() {}
}

/// A frame for a connection, or a close.
public enum ChatOutput: Sendable, Equatable {
    case send(connection: Int, JSONValue)
    case close(connection: Int, code: UInt16, reason: String)
}

public struct ChatReply: Sendable {
    public var response: HTTPResponseMessage
    /// Frames and closes for the sockets.
    public var outputs: [ChatOutput]
    /// The rows the request wrote (and deleted), for the driver to commit before it
    /// answers: persistence as an effect, as the sync server's `changes`.
    public var changes: [ChatStoreChange] = []
}

/// The first phase of a request (`begin`): done, or waiting for password work.
public enum ChatStep: Sendable {
    case reply(ChatReply)
    /// Run the job, outside any lock, and hand its result to `finish`.
    case password(PasswordJob)
}

/// Argon2id work a register or login needs: slow on purpose, so a driver runs it without
/// holding the lock that serialises the core. `run()` is a pure function of the job.
public struct PasswordJob: Sendable {
    public enum Work: Sendable {
        case hash(password: String, salt: [UInt8], cost: PasswordHash.Cost)
        case verify(password: String, encoded: String)
    }

    public enum Result: Sendable, Equatable {
        /// The encoded hash, nil if libsodium refused the parameters.
        case hashed(String?)
        case verified(Bool)
    }

    public let id: Int
    public let work: Work

    public func run() -> Result {
        switch work {
        case .hash(let password, let salt, let cost): return .hashed(try? PasswordHash.hash(password, salt: salt, cost: cost))
        case .verify(let password, let encoded): return .verified(PasswordHash.verify(password, encoded: encoded))
        }
    }
}

/// An error answer: `{"detail": …}` with its status (and `Retry-After` for 429).
typealias ChatAPIError = DetailError

extension DetailError {
    static func field(_ error: JSONFieldError) -> DetailError {
        validation(["body"] + error.path.split(separator: ".").map(String.init), error.message,
                   type: error.tooLarge ? "too_long" : error.message == "is required" ? "missing" : "type_error")
    }
}
