public import AgentRuntimeWire
public import LabKernel

/// The agent runtime's mobile client (seed 000 §7) as a sans-I/O core: discovery, the
/// entry point, an idempotent start, the socket, events applied by index, reconnects with
/// jittered exponential backoff and `client.resume`, a queue of actions taken while
/// offline, tool calls routed to renderers, and errors as messages a person can read.
///
/// Theory of operation. The driver feeds `AgentClientInput`s (what the user does, HTTP
/// responses by request id, socket events, timer expiries) with `now`; the core answers
/// with `AgentClientEffect`s and keeps its timers as data (`nextDeadline`).
///
/// Startup: `GET /api/workflows` → the named workflow, else the one marked
/// `entry_point`, else the first by name → `POST …/start` with a `client_request_id`
/// stored before the request goes out, so a retry after a lost answer (and a relaunch
/// while the start was in flight) gets the same chat → the socket, with `resume=client`
/// → `client.resume` from the last applied index → the replay and
/// `chat.resume_boundary` → the queued actions go out.
///
/// Events are applied strictly in index order: an index at or below the last applied is
/// a duplicate (ignored); one beyond the next is a gap, which asks for a resume instead
/// of applying anything out of order. A boundary that says the client claims events the
/// server never sent (`diverged`) drops the local timeline and replays from the start:
/// the replay is authoritative. Each input and tool response waits in `pending` (stored)
/// until the runtime acknowledges it; the runtime answers every such frame with exactly
/// one ack or `chat.error`, in order, so the first frame awaiting a reply is the one an
/// error refers to. Inputs carry a `client_message_id`, so one re-sent after a reconnect
/// is acknowledged without being played twice.
///
/// Every request has a deadline (`Config.requestTimeout`) and so has a resume
/// (`Config.resumeTimeout`): nothing waits forever. A 401, or a socket closed with 1008,
/// stops the client and asks the app for a new token (`authRequired`). Caches are keyed
/// by app, user and chat (`ChatKey`), so another user or tenant on the same phone never
/// reads them. Everything that must survive a relaunch is in `snapshot`.
public struct AgentClient: Sendable {
    public var snapshot: Snapshot
    public var config: Config
    var socket = SocketState.closed
    var reconnectAttempts = 0
    var startAttempts = 0
    var inFlight: [Int: InFlight] = [:]
    var nextRequest = 1
    var timers = TimerTable<AgentTimer>()
    /// Ids of actions sent on this socket whose ack or error has not come, oldest first.
    var awaitingReply: [String] = []
    /// A resume was asked for on this socket and its boundary has not come.
    var resumeAsked = false
    /// The app asked for a fresh chat rather than the active one.
    var forceNew = false
    public internal(set) var stats = Stats()

    public struct Config: Sendable, Equatable {
        public var requestTimeout: TimeSpan = .seconds(20)
        /// How long a resume may take before the socket is dropped and opened again.
        public var resumeTimeout: TimeSpan = .seconds(15)
        /// Reconnect delays: `reconnectBase` doubling to `reconnectMax`, times 0.5…1.5.
        public var reconnectBase: TimeSpan = .seconds(1)
        public var reconnectMax: TimeSpan = .seconds(30)
        /// Component ids the app has native renderers for; other tool calls get the
        /// fallback card.
        public var renderers: Set<String> = ["ActionPlan", "AgentAPIKeyInput", "ConfirmAction", "TextInput", "FileDownload"]
        /// Actions that may wait for a connection (older ones are refused when full).
        public var pendingLimit = 64

        public init() {}
    }

    public struct Stats: Sendable, Equatable {
        public var applied = 0
        public var duplicatesIgnored = 0
        public var gaps = 0
        public var resumes = 0
        public var replayed = 0
        public var reconnects = 0
        public var divergences = 0
        public var actionsResent = 0
        public var timeouts = 0
        public var startRetries = 0

        public init() {}
    }

    /// What the app keeps across relaunches.
    public struct Snapshot: Sendable, Codable {
        public var appID: String
        public var userID: String
        public var token: String?
        /// The active chat, and every chat this device has, by app, user and chat id.
        public var activeChat: String?
        public var chats: [String: ChatCache] = [:]
        /// A start whose answer has not come: its workflow and `client_request_id`.
        public var pendingStart: PendingStart?
        public var generator: SeededGenerator

        public init(appID: String, userID: String, token: String?, seed: StreamSeed) {
            self.appID = appID
            self.userID = userID
            self.token = token
            generator = seed.generator()
        }
    }

    public struct PendingStart: Sendable, Codable, Equatable {
        public var workflow: String
        public var clientRequestID: String
    }

    /// One chat as this device holds it.
    public struct ChatCache: Sendable, Codable, Equatable {
        public var chatID: String
        public var workflow: String
        public var cacheSeed: Int
        /// The index of the last applied event (-1: none).
        public var lastIndex = -1
        /// Applied events, as the runtime sent them (without replay marks): index = position.
        public var timeline: [String] = []
        /// Actions waiting for the runtime's acknowledgement, in order.
        public var pending: [PendingAction] = []
        public var completed = false
        /// The tool call that waits for this user's response, if any.
        public var awaitingToolCall: String?
        /// The agent asked for input and the user has not answered.
        public var inputRequested = false

        public init(chatID: String, workflow: String, cacheSeed: Int) {
            self.chatID = chatID
            self.workflow = workflow
            self.cacheSeed = cacheSeed
        }
    }

    /// An input or a tool response the runtime has not acknowledged yet.
    public struct PendingAction: Sendable, Codable, Equatable {
        /// The input's `client_message_id`, or the tool call's id.
        public var id: String
        public var text: String?
        /// The tool response as JSON text (nil for an input).
        public var response: String?

        public init(id: String, text: String?, response: String?) {
            self.id = id
            self.text = text
            self.response = response
        }
    }

    /// The caches' key: app, user and chat together (seed 000 §1).
    public static func key(app: String, user: String, chat: String) -> String { "\(app)|\(user)|\(chat)" }

    enum SocketState: Equatable { case closed, opening, resuming, open, backingOff, stopped }

    enum AgentTimer: Hashable, Sendable {
        case reconnect, requests, resume, startRetry
    }

    struct InFlight: Sendable {
        var purpose: Purpose
        var request: HTTPRequestMessage
        var deadline: Instant
    }

    enum Purpose: Sendable, Equatable {
        case discover(wanted: String?)
        case start(workflow: String)
        case upload
    }

    public init(snapshot: Snapshot, config: Config = Config()) {
        self.snapshot = snapshot
        self.config = config
    }

    public var nextDeadline: Instant? { timers.nextDeadline }
    public var isConnected: Bool { socket == .open }
    /// The active chat's cache, for this app and user only.
    public var activeChat: ChatCache? { snapshot.activeChat.flatMap { snapshot.chats[$0] } }
}

public enum AgentClientInput: Sendable {
    /// Discover, pick the workflow (this one, else the entry point), start, connect.
    case start(workflow: String?)
    /// A fresh chat even when one is active (`force_new`).
    case startNew(workflow: String?)
    /// After a relaunch: reconnect to the active chat (or finish a start in flight).
    case restore
    case submit(text: String)
    case respond(toolCallID: String, response: JSONValue)
    case upload(filename: String, contentType: String, bytes: [UInt8], intent: String?)
    case response(id: Int, HTTPResponseMessage)
    /// The request never got an answer (refused, reset, timed out).
    case transportFailed(id: Int)
    case socketOpened
    case socketText(String)
    case socketClosed(code: UInt16)
    case timerFired
    /// The app stops running code: the socket closes, nothing else is lost.
    case suspend
    /// A new token (after `authRequired`).
    case tokenRefreshed(String)
}

public enum AgentClientEffect: Sendable, Equatable {
    case request(id: Int, HTTPRequestMessage)
    /// Open the socket at this target (path and query).
    case openSocket(target: String)
    case socketSend(String)
    case closeSocket
    case chatReady(chatID: String, reused: Bool)
    /// An event entered the timeline (`replayed`: it came in a resume's replay).
    case applied(RuntimeEnvelope, replayed: Bool)
    /// A tool call to show, with the renderer to show it in.
    case toolCall(ToolCallPrompt)
    case toolCallResolved(id: String)
    case inputRequested
    case runCompleted(summary: String)
    /// A resume finished: how many events it replayed, and the last index now applied.
    case resumed(replayed: Int, lastIndex: Int)
    case uploaded(attachmentID: String)
    case surfaced(AgentClientError)
    /// The token was refused: the app must get a new one (`tokenRefreshed`).
    case authRequired(reason: String)
}

/// A UI tool call as the app renders it.
public struct ToolCallPrompt: Sendable, Equatable {
    public enum Renderer: Sendable, Equatable {
        /// The app's own renderer for this component id.
        case native(String)
        /// No renderer: a fallback card with the prompt (and a text answer if it awaits one).
        case fallback(component: String)
    }

    public var id: String
    public var name: String
    public var renderer: Renderer
    /// `composer`: the chat's text box answers it.
    public var display: String
    public var awaitsResponse: Bool
    public var payload: JSONValue
}

/// What the app shows in a banner: a message safe for a person, and the code to log.
public struct AgentClientError: Sendable, Equatable {
    public var message: String
    public var code: String

    public init(message: String, code: String) {
        self.message = message
        self.code = code
    }

    /// The user-safe message for a runtime error code (the runtime's own text is logged,
    /// never shown: it may name internals).
    public static func runtime(_ code: String) -> AgentClientError {
        let message: String
        switch RuntimeErrorCode(rawValue: code) {
        case .chatCompleted?: message = "This conversation has ended. Start a new one to continue."
        case .emptyMessage?: message = "Type a message first."
        case .messageTooLarge?: message = "That message is too long."
        case .toolCallNotFound?, .toolCallNotAwaiting?: message = "That request is no longer waiting for an answer."
        case .tooManyPending?: message = "The assistant is busy. Try again in a moment."
        case .backendFailed?: message = "The assistant could not finish its answer."
        case .workflowNotFound?, .startWorkflowFailed?, .startWorkflowBatchFailed?, .switchWorkflowFailed?:
            message = "That assistant is not available."
        case .schemaValidationFailed?, .unknownMessageType?, .chatMismatch?, .resumeFailed?, nil:
            message = "Something went wrong. Please try again."
        }
        return AgentClientError(message: message, code: code)
    }
}
