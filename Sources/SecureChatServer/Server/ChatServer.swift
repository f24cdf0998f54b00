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

    /// Handles one HTTP request.
    public mutating func handle(_ request: HTTPRequestMessage, now: Instant) -> ChatReply {
        var outputs: [ChatOutput] = []
        var response: HTTPResponseMessage
        do {
            response = try route(request, now: now, outputs: &outputs)
        } catch let error as ChatAPIError {
            response = error.response
        } catch {
            response = .json(500, ["detail": "Internal server error"])
        }
        return ChatReply(response: response, outputs: outputs)
    }

    mutating func route(_ request: HTTPRequestMessage, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        var path = request.segments
        if path == [".well-known", "d3chat-server"] {
            return .json(200, ["domain": .string(config.domain), "signing_key_public": .null, "api_base_url": .string(config.baseURL + "/api/v1"),
                               "protocol_version": 2])
        }
        guard path.count >= 2, path[0] == "api", path[1] == "v1" else { throw ChatAPIError(404, "Not Found") }
        path.removeFirst(2)
        let method = request.method
        if path.first == "auth" {
            try rateLimit("auth:" + (request.header("x-fleetlab-peer") ?? "local"), capacity: config.authRequestsPerMinute, now: now)
            switch (method, Array(path.dropFirst())) {
            case ("POST", ["register"]): return try register(request, now: now)
            case ("POST", ["login"]): return try login(request, now: now)
            case ("POST", ["refresh"]): return try refresh(request, now: now)
            case ("POST", ["logout"]): return try logout(request, now: now, outputs: &outputs)
            default: break
            }
        }
        let caller = try authenticate(request, now: now)
        try rateLimit("user:" + caller.userID, capacity: config.requestsPerMinute, now: now)
        state.devices[caller.deviceID]?.lastSeenAt = now
        switch (method, path) {
        case ("POST", ["auth", "logout-all"]): return logoutAll(caller, outputs: &outputs)
        case ("POST", ["auth", "ws-ticket"]): return wsTicket(caller, now: now)
        case ("GET", ["users", "me"]): return .json(200, userJSON(state.users[caller.userID]!))
        case ("POST", ["devices"]): return try createDevice(request, caller: caller, now: now)
        case ("GET", ["devices"]): return listDevices(caller)
        case ("POST", ["keys", "upload"]): return try uploadKeys(request, caller: caller)
        case ("POST", ["keys", "one-time"]): return try addOneTimeKeys(request, caller: caller)
        case ("POST", ["channels"]): return try createChannel(request, caller: caller, now: now, outputs: &outputs)
        case ("GET", ["channels"]): return listChannels(caller)
        case ("POST", ["channels", "dm"]): return try openDM(request, caller: caller, now: now, outputs: &outputs)
        default: break
        }
        switch (method, path.count, path.first) {
        case ("DELETE", 2, "devices"): return try deleteDevice(path[1], caller: caller)
        case ("GET", 3, "keys") where path[2] == "bundles": return try userBundles(path[1], caller: caller, outputs: &outputs)
        case ("GET", 3, "keys") where path[2] == "bundle": return try deviceBundle(path[1], caller: caller, outputs: &outputs)
        case (_, 4, "keys") where path[1] == "channels" && path[3] == "x3dh-setup":
            return try x3dhSetup(method, channelID: path[2], request, caller: caller)
        case (_, 4, "keys") where path[1] == "channels" && path[3] == "sender-keys":
            return try senderKeys(method, channelID: path[2], request, caller: caller, outputs: &outputs)
        case (_, 3, "channels") where path[1] == "messages": return try editOrDelete(method, messageID: path[2], request, caller: caller, now: now, outputs: &outputs)
        case (_, 2, "channels"): return try channel(method, path[1], request, caller: caller, now: now, outputs: &outputs)
        case (_, 3, "channels"): return try channelAction(method, path[1], path[2], request, caller: caller, now: now, outputs: &outputs)
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

    /// The channel, if the caller may see it: 404 when it does not exist, 403 for a non-member.
    func memberChannel(_ id: String, _ caller: Caller) throws -> ChatChannel {
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
    public var ticketLifetime: TimeSpan = .seconds(30)
    public var lowOneTimeKeyThreshold = 10
    /// Token-bucket capacities, refilled over a minute.
    public var requestsPerMinute = 600
    public var authRequestsPerMinute = 60
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
    public var outputs: [ChatOutput]
}

/// An error answer: `{"detail": …}` with its status (and `Retry-After` for 429).
struct ChatAPIError: Error {
    var status: Int
    var detail: JSONValue
    var headers: [HTTPHeader] = []

    init(_ status: Int, _ detail: String, headers: [HTTPHeader] = []) {
        self.status = status
        self.detail = .string(detail)
        self.headers = headers
    }

    /// FastAPI's 422: `[{loc, msg, type}]`.
    static func validation(_ loc: [String], _ message: String, type: String = "value_error") -> ChatAPIError {
        var error = ChatAPIError(422, message)
        error.detail = [["loc": .array(loc.map { .string($0) }), "msg": .string(message), "type": .string(type)]]
        return error
    }

    static func field(_ error: JSONFieldError) -> ChatAPIError {
        validation(["body"] + error.path.split(separator: ".").map(String.init), error.message,
                   type: error.tooLarge ? "too_long" : error.message == "is required" ? "missing" : "type_error")
    }

    var response: HTTPResponseMessage { .json(status, ["detail": detail], headers: headers) }
}
