public import LabKernel

/// Everything the runtime keeps. Chats, their transcripts, tool calls and uploads are
/// durable (each change is an `AgentStoreChange` the driver commits); connections and the
/// backend runs in flight live only in the process.
public struct AgentServerState: Sendable {
    public var chats: [String: AgentChat] = [:]
    /// Chat id → its transcript: each event's frame text (index = position).
    public var transcripts: [String: [String]] = [:]
    public var toolCalls: [String: ToolCallRecord] = [:]
    public var uploads: [String: UploadRecord] = [:]
    /// `app|user|workflow|client_request_id` → chat id: an idempotent start's answer.
    public var chatByRequest: [String: String] = [:]
    /// `app|user` → that user's chats, oldest first (listings; Mozaiks' 15 s reuse).
    public var chatsOfUser: [String: [String]] = [:]
    public var connections: [Int: Connection] = [:]
    /// Chat id → its open connections, in the order they opened.
    public var connectionsOfChat: [String: [Int]] = [:]
    public var nextConnection = 1
    /// Command-backend runs in flight: run id → chat id.
    public var backendRuns: [Int: String] = [:]
    public var nextBackendRun = 1

    public init() {}

    /// A socket, bound to the chat of its path.
    public struct Connection: Sendable, Equatable {
        public var chatID: String
        public var appID: String
        public var userID: String
        /// The client sends `client.resume` itself (`?resume=client`): no replay on connect.
        public var resumesItself: Bool
    }

    /// Adds a loaded or created chat with its indexes.
    package mutating func insert(_ chat: AgentChat) {
        if chats[chat.id] == nil { chatsOfUser[chat.appID + "|" + chat.userID, default: []].append(chat.id) }
        chats[chat.id] = chat
        if let request = chat.clientRequestID { chatByRequest[Self.requestKey(chat, request)] = chat.id }
    }

    static func requestKey(_ chat: AgentChat, _ request: String) -> String {
        requestKey(app: chat.appID, user: chat.userID, workflow: chat.workflow, request: request)
    }

    static func requestKey(app: String, user: String, workflow: String, request: String) -> String {
        [app, user, workflow, request].map { part in part.split(separator: "|", omittingEmptySubsequences: false).joined(separator: "||") }
            .joined(separator: "|")
    }
}

/// One chat: whose, on which workflow, and where its run stands.
public struct AgentChat: Sendable, Equatable, Codable {
    public var id: String
    public var appID: String
    public var userID: String
    public var workflow: String
    public var createdAt: Instant
    public var completed: Bool
    public var cacheSeed: Int
    public var clientRequestID: String?
    /// The latest artifact a tool call showed (`display: artifact`), for restore.
    public var lastArtifact: JSONValue?
    /// Inputs consumed so far: the next input plays this turn.
    public var turnsPlayed: Int
    /// The turn being played, if any.
    public var run: RunState?
    /// Inputs that arrived while a turn played, in order (at most `maxPendingInputs`).
    public var pendingInputs: [String]
    /// `client_message_id`s seen, newest last (at most `seenLimit`): a re-sent input is
    /// acknowledged again and not played twice.
    public var seenClientMessageIDs: [String]
    /// The agent asked for the user's input and waits (`chat.input_request` outstanding).
    public var awaitingInput: Bool
    /// The id of that input request.
    public var inputRequestID: String?
    public var lastInput: String
    public var lastResponse: String
    public var promptTokens: Int
    public var completionTokens: Int
    /// Set once an AgentDriven workflow has played its opening turn.
    public var opened: Bool

    public static let seenLimit = 256
    public static let maxPendingInputs = 32

    public var status: String { completed ? "completed" : "in_progress" }
}

/// Where a turn stands: the step it plays, the chunk of a `say`, and when it goes on.
public struct RunState: Sendable, Equatable, Codable {
    public var turn: Int
    public var step: Int
    public var chunk: Int
    /// When the next step plays; nil while the turn waits (a tool call, the backend).
    public var nextAt: Instant?
    public var waitingToolCall: String?
    public var startedAt: Instant
    /// The id of the message a `say` (or the command backend) is streaming.
    public var messageID: String?
    /// The command-backend run streaming this turn's answer.
    public var backendRun: Int?
}

public struct ToolCallRecord: Sendable, Equatable, Codable {
    public var id: String
    public var chatID: String
    public var name: String
    public var component: String
    public var display: String
    public var awaitsResponse: Bool
    public var response: JSONValue?
    public var createdAt: Instant
}

public struct UploadRecord: Sendable, Equatable, Codable {
    public var id: String
    public var chatID: String
    public var appID: String
    public var userID: String
    /// As the client named it, reduced to a safe display name (never a path).
    public var filename: String
    public var contentType: String
    public var size: Int
    public var sha256: String
    public var intent: String?
    public var bundlePath: String?
    public var createdAt: Instant
}

/// A durable change a reply carries, for the driver to commit before it answers.
public enum AgentStoreChange: Sendable, Equatable {
    case chat(AgentChat)
    /// A transcript event: chat id, index, frame text.
    case event(chatID: String, index: Int, text: String)
    case toolCall(ToolCallRecord)
    /// An upload's record and its bytes (written as a file of its own, by id).
    case upload(UploadRecord, bytes: [UInt8])
}
