public import AgentRuntimeWire
public import LabKernel

/// The Mozaiks runtime (seed 000, wire-notes §b) as a sans-I/O core: workflow discovery,
/// idempotent chat start, the socket's envelopes, scripted agents that stream, tool calls
/// that wait for the user, resume with replay, uploads and chat meta.
///
/// Theory of operation. A driver hands in HTTP requests (`handle`), socket events
/// (`connect`, `receive`, `disconnect`), wake-ups it was asked for (`runDue`) and the
/// output of command-backend runs (`backendOutput`, `backendFinished`), each with `now`.
/// Every call returns an `AgentReply`: the HTTP response (for a request), frames for
/// connections, the durable changes to commit before answering, the wake-ups to arm
/// (chat id and instant; a stale one is harmless) and the backend programs to start.
///
/// A chat's transcript is the list of its transcript events (`RuntimeEventType.isTranscript`)
/// in the order they were emitted, each with `data.index` = its position. Everything a
/// client must see again after a disconnect is in it: user inputs, streamed chunks, tool
/// calls and their responses, usage, completion, uploads. A resume replays the events
/// after the client's last index, then `chat.resume_boundary`; both are one reply, so no
/// live event slips between them on that socket. A chat's run goes on whether or not any
/// socket is open: what happens while a phone is away waits in the transcript.
///
/// Turns are played by `AgentServer+Runs`: a turn starts on an input (or on the first
/// connect of an AgentDriven chat), its steps play at the times the script sets, a tool
/// call that awaits a response stops it until `tool_call_response`, and it ends with
/// `chat.input_request` (or `chat.run_complete`). Inputs that arrive mid-turn queue.
///
/// Errors are FastAPI's `{"detail": …}` (422 for a body that does not validate); socket
/// frames that do not parse get `chat.error {message, error_code}` and the socket stays
/// open. Every route validates before its first change. Ids and cache seeds come from the
/// core's seeded stream.
public struct AgentServer: Sendable {
    public var state: AgentServerState
    public var config: AgentServerConfig
    public let wallClock: WallClockOrigin
    var generator: SeededGenerator
    /// Workflows by name, from `config.workflows`.
    let workflowsByName: [String: AgentWorkflow]

    public init(state: AgentServerState = AgentServerState(), config: AgentServerConfig, seed: StreamSeed, wallClock: WallClockOrigin) {
        self.state = state
        self.config = config
        self.wallClock = wallClock
        generator = seed.generator()
        var byName: [String: AgentWorkflow] = [:]
        for workflow in config.workflows + [Self.generalWorkflow] where byName[workflow.name] == nil { byName[workflow.name] = workflow }
        workflowsByName = byName
    }

    /// The workflow `chat.start_general_chat` opens when the configuration has none named
    /// `general`: it answers each input by echoing it.
    static let generalWorkflow = AgentWorkflow(name: "general", description: "General chat outside any workflow",
                                               agents: ["Assistant"], turns: [[.say(agent: "Assistant", text: "You said: {input}",
                                                                                    wordsPerChunk: 3, every: .milliseconds(20))]])

    /// One HTTP request.
    public mutating func handle(_ request: HTTPRequestMessage, now: Instant) -> AgentReply {
        var reply = AgentReply()
        do {
            reply.response = try route(request, now: now, &reply)
        } catch let error as RuntimeAPIError {
            reply = AgentReply(response: error.response)
        } catch {
            reply = AgentReply(response: .json(500, ["detail": "Internal server error"]))
        }
        return reply
    }

    mutating func route(_ request: HTTPRequestMessage, now: Instant, _ reply: inout AgentReply) throws -> HTTPResponseMessage {
        let path = request.segments
        switch (request.method, path) {
        case ("GET", ["api", "workflows"]), ("GET", ["api", "workflows", "config"]): return discovery()
        case ("GET", ["api", "health"]): return .json(200, ["status": "ok"])
        case ("POST", ["api", "tool-call", "respond"]): return try respondRoute(request, now: now, &reply)
        case ("POST", ["api", "chat", "upload"]): return try upload(request, now: now, &reply)
        default: break
        }
        switch (request.method, path.count) {
        case ("GET", 4) where path[0] == "api" && path[1] == "workflows" && path[3] == "transport": return try transport(path[2])
        case ("POST", 5) where path[0] == "api" && path[1] == "chats" && path[4] == "start":
            return try start(request, app: path[2], workflow: path[3], now: now, &reply)
        case ("GET", 4) where path[0] == "api" && path[1] == "chats": return try listChats(request, app: path[2], workflow: path[3], now: now)
        case ("GET", 6) where path[0] == "api" && path[1] == "chats" && path[2] == "exists":
            return try exists(request, app: path[3], workflow: path[4], chat: path[5], now: now)
        case ("GET", 6) where path[0] == "api" && path[1] == "chats" && path[2] == "meta":
            return try meta(request, app: path[3], workflow: path[4], chat: path[5], now: now)
        case ("POST", 5) where path[0] == "chat" && path[4] == "input":
            return try inputRoute(request, app: path[1], chat: path[2], user: path[3], now: now, &reply)
        default:
            let known = ["/api/workflows", "/api/chats/", "/chat/", "/api/tool-call/respond", "/api/chat/upload"]
            if known.contains(where: { request.path.hasPrefix($0) }) && !["GET", "POST"].contains(request.method) {
                throw RuntimeAPIError(405, "Method Not Allowed")
            }
            throw RuntimeAPIError(404, "Not Found")
        }
    }

    // MARK: Authentication

    /// Who a request's bearer token says the caller is; with auth off, nobody in particular
    /// (every identifier in the request is taken as given).
    func principal(_ request: HTTPRequestMessage, now: Instant) throws -> Principal? {
        guard config.authRequired else { return nil }
        guard let header = request.header("authorization"), header.lowercased().hasPrefix("bearer ") else {
            throw RuntimeAPIError(401, "Not authenticated", headers: [HTTPHeader("WWW-Authenticate", "Bearer")])
        }
        return try verify(String(header.dropFirst(7)).trimmingWhitespace(), now: now)
    }

    func verify(_ token: String, now: Instant) throws -> Principal {
        do {
            let claims = try RuntimeToken.verify(token, key: config.tokenKey, unixSeconds: wallClock.unixMilliseconds(at: now) / 1_000)
            return Principal(appID: claims.appID, userID: claims.userID)
        } catch {
            throw RuntimeAPIError(401, error.description, headers: [HTTPHeader("WWW-Authenticate", "Bearer")])
        }
    }

    /// The caller may act for `app` (403 `app_id mismatch` otherwise, as Mozaiks).
    func requireApp(_ principal: Principal?, _ app: String) throws {
        try requireIdentifier(app, "app_id")
        if let principal, principal.appID != app { throw RuntimeAPIError(403, "app_id mismatch") }
    }

    /// The caller is `user` (403 `user_id mismatch` otherwise).
    func requireUser(_ principal: Principal?, _ user: String) throws {
        try requireIdentifier(user, "user_id")
        if let principal, principal.userID != user { throw RuntimeAPIError(403, "user_id mismatch") }
    }

    func requireIdentifier(_ value: String, _ name: String) throws {
        guard !value.isEmpty, value.utf8.count <= 128, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == "|" || $0 == "/" }) else {
            throw RuntimeAPIError.validation([name], "\(name) is 1 to 128 characters without '/', '|' or control characters")
        }
    }

    /// A chat the caller owns: 404 `Chat not found` for one that does not exist or is
    /// someone else's (another tenant learns nothing about it).
    func ownedChat(_ id: String, app: String, user: String?, workflow: String? = nil) throws -> AgentChat {
        guard let chat = state.chats[id], chat.appID == app, user == nil || chat.userID == user,
              workflow == nil || chat.workflow == workflow else {
            throw RuntimeAPIError(404, "Chat not found")
        }
        return chat
    }

    // MARK: Helpers

    func fields(_ request: HTTPRequestMessage) throws -> JSONFields {
        guard !request.body.isEmpty else { throw RuntimeAPIError.validation(["body"], "Field required", type: "missing") }
        let value: JSONValue
        do { value = try JSONValue.parse(bytes: request.body) } catch {
            throw RuntimeAPIError.validation(["body"], "JSON decode error", type: "json_invalid")
        }
        do { return try JSONFields(value) } catch { throw RuntimeAPIError.validation(["body"], "Input should be a valid dictionary", type: "dict_type") }
    }

    mutating func newID() -> String { UUIDText.random(using: &generator) }

    func timestamp(_ instant: Instant) -> String { wallClock.rfc3339(at: instant) }

    func workflow(_ name: String) throws -> AgentWorkflow {
        guard let workflow = workflowsByName[name] else { throw RuntimeAPIError(404, "Workflow '\(name.prefix(64))' not found") }
        return workflow
    }
}

/// Who a token names.
struct Principal: Equatable {
    var appID: String
    var userID: String
}

public struct AgentServerConfig: Sendable {
    /// Off: `--no-auth` (Mozaiks' AUTH_ENABLED=false), every identifier taken as given.
    public var authRequired = true
    /// The HS256 key tokens are signed with.
    public var tokenKey: [UInt8] = []
    /// The workflows discovery lists, in order.
    public var workflows: [AgentWorkflow] = []
    public var maxUploadBytes = 10 << 20
    /// A start with the same `client_request_id` within this window returns the same chat.
    public var requestReuseWindow: TimeSpan = .hours(24)
    /// A start without one reuses the user's in-progress chat of that workflow created
    /// this recently (Mozaiks' CHAT_START_IDEMPOTENCY_SEC), unless `force_new`.
    public var recentReuseWindow: TimeSpan = .seconds(15)
    /// Chats one user may hold, and events one transcript may hold (a chat at the limit
    /// completes): the state stays bounded whatever a client does.
    public var maxChatsPerUser = 10_000
    public var maxTranscript = 100_000

    public init() {}
}

/// What one call produced.
public struct AgentReply: Sendable {
    /// The HTTP answer (requests only).
    public var response: HTTPResponseMessage = .empty(204)
    public var outputs: [AgentOutput] = []
    public var changes: [AgentStoreChange] = []
    public var wakeups: [AgentWakeup] = []
    public var commands: [BackendCommand] = []

    public init(response: HTTPResponseMessage = .empty(204)) { self.response = response }
}

/// A frame for a connection, or a close.
public enum AgentOutput: Sendable, Equatable {
    case send(connection: Int, text: String)
    case close(connection: Int, code: UInt16, reason: String)
}

/// Call `runDue(chat)` at `at` (a chat's next scripted step).
public struct AgentWakeup: Sendable, Equatable {
    public var chatID: String
    public var at: Instant
}

/// A command-backend program to start: its output goes to `backendOutput(run:)`, its end
/// to `backendFinished(run:)`; a driver that cannot run programs answers `backendFinished`
/// with a failure at once.
public struct BackendCommand: Sendable, Equatable {
    public var run: Int
    public var argv: [String]
    /// What the program reads on stdin: the user's input.
    public var input: String
    public var timeout: TimeSpan

    public init(run: Int, argv: [String], input: String, timeout: TimeSpan) {
        self.run = run
        self.argv = argv
        self.input = input
        self.timeout = timeout
    }
}

/// An error answer: `{"detail": …}` with its status.
typealias RuntimeAPIError = DetailError

extension DetailError {
    static func field(_ error: JSONFieldError) -> DetailError {
        validation(["body"] + error.path.split(separator: ".").map(String.init), error.description,
                   type: error.message == "is required" ? "missing" : "type_error")
    }
}
