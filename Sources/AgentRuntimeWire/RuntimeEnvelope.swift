public import LabKernel

/// The runtime's outbound frame: `{type, data, timestamp}` (Mozaiks' envelope, wire-notes
/// §b). Transcript events carry `data.index`, their 0-based place in the chat's
/// transcript; control replies (acks, errors, the resume boundary, `chat_meta`) carry none.
public struct RuntimeEnvelope: Sendable, Equatable {
    public var type: RuntimeEventType
    public var data: [String: JSONValue]
    public var timestamp: String

    public init(_ type: RuntimeEventType, _ data: [String: JSONValue], timestamp: String) {
        self.type = type
        self.data = data
        self.timestamp = timestamp
    }

    /// The transcript index, when this is a transcript event.
    public var index: Int? { data["index"]?.numberValue.map { Int($0) } }

    public var json: JSONValue { ["type": .string(type.rawValue), "data": .object(data), "timestamp": .string(timestamp)] }

    /// The frame's text (keys sorted, so the same event is the same bytes).
    public var text: String { json.canonicalText }

    /// Reads a frame; nil when it is not an envelope of a known type.
    public init?(text: String) {
        guard let value = try? JSONValue.parse(text), let typeName = value["type"]?.stringValue,
              let type = RuntimeEventType(rawValue: typeName), let data = value["data"]?.objectValue else { return nil }
        self.init(type, data, timestamp: value["timestamp"]?.stringValue ?? "")
    }

    /// The same event as a replay sends it (`replay: true`).
    public var replayed: RuntimeEnvelope {
        var copy = self
        copy.data["replay"] = true
        return copy
    }

    /// The event without replay marks: what a client's timeline and the server's
    /// transcript compare.
    public var canonical: RuntimeEnvelope {
        var copy = self
        copy.data["replay"] = nil
        return copy
    }

    /// A stored frame's text as a replay sends it. The runtime's frames are canonical
    /// (`text`), so the mark goes in front of their data without reading them again.
    public static func replayText(of text: String) -> String {
        if text.hasPrefix(dataPrefix) { return replayPrefix + text.dropFirst(dataPrefix.utf8.count) }
        return RuntimeEnvelope(text: text)?.replayed.text ?? text
    }

    /// A received frame's canonical text (without the replay mark): the runtime's own
    /// frames as they came, others rewritten.
    public static func canonicalText(of text: String, _ envelope: RuntimeEnvelope) -> String {
        if text.hasPrefix(replayPrefix) { return dataPrefix + text.dropFirst(replayPrefix.utf8.count) }
        if text.hasPrefix(dataPrefix) && envelope.data["replay"] == nil { return text }
        return envelope.canonical.text
    }

    static let dataPrefix = #"{"data":{"#
    static let replayPrefix = #"{"data":{"replay":true,"#
}

/// Every `type` the runtime sends (wire-notes §b; `chat_meta` is not namespaced, as in Mozaiks).
public enum RuntimeEventType: String, Sendable, CaseIterable {
    case chatMeta = "chat_meta"
    case text = "chat.text"
    case print = "chat.print"
    case inputAck = "chat.input_ack"
    case inputRequest = "chat.input_request"
    case toolCall = "chat.tool_call"
    case toolCallComplete = "chat.tool_call_complete"
    case toolCallDismiss = "chat.tool_call_dismiss"
    case toolResponse = "chat.tool_response"
    case usageDelta = "chat.usage_delta"
    case usageSummary = "chat.usage_summary"
    case runComplete = "chat.run_complete"
    case resumeBoundary = "chat.resume_boundary"
    case customEvent = "chat.custom_event"
    case error = "chat.error"
    case attachmentUploaded = "chat.attachment_uploaded"
    case ackInput = "ack.input"
    case ackToolCallResponse = "ack.tool_call_response"
    case modeChanged = "chat.mode_changed"
    case contextSwitched = "chat.context_switched"
    case workflowStarted = "chat.workflow_started"
    case generalSessionCreated = "chat.general_session_created"
    case workflowBatchStarted = "chat.workflow_batch_started"
    case ping

    /// Whether events of this type are part of a chat's transcript (indexed, stored,
    /// replayed on resume).
    public var isTranscript: Bool {
        switch self {
        case .text, .print, .inputRequest, .toolCall, .toolCallComplete, .toolCallDismiss, .toolResponse, .usageDelta, .usageSummary,
             .runComplete, .customEvent, .attachmentUploaded:
            return true
        case .chatMeta, .inputAck, .resumeBoundary, .error, .ackInput, .ackToolCallResponse, .modeChanged, .contextSwitched,
             .workflowStarted, .generalSessionCreated, .workflowBatchStarted, .ping:
            return false
        }
    }

    /// The `data.kind` Mozaiks puts in each payload.
    public var kind: String {
        switch self {
        case .chatMeta: return "chat_meta"
        case .ping: return "ping"
        default:
            let name = rawValue
            guard let dot = name.firstIndex(of: ".") else { return name }
            return String(name[name.index(after: dot)...])
        }
    }
}

/// The error codes the runtime sends in `chat.error` (and the client maps to messages).
public enum RuntimeErrorCode: String, Sendable, CaseIterable {
    case schemaValidationFailed = "SCHEMA_VALIDATION_FAILED"
    case unknownMessageType = "UNKNOWN_MESSAGE_TYPE"
    case chatMismatch = "CHAT_MISMATCH"
    case emptyMessage = "EMPTY_MESSAGE"
    case messageTooLarge = "MESSAGE_TOO_LARGE"
    case chatCompleted = "CHAT_COMPLETED"
    case toolCallNotFound = "TOOL_CALL_NOT_FOUND"
    case toolCallNotAwaiting = "TOOL_CALL_NOT_AWAITING"
    case resumeFailed = "RESUME_FAILED"
    case workflowNotFound = "WORKFLOW_NOT_FOUND"
    case switchWorkflowFailed = "SWITCH_WORKFLOW_FAILED"
    case startWorkflowFailed = "START_WORKFLOW_FAILED"
    case startWorkflowBatchFailed = "START_WORKFLOW_BATCH_FAILED"
    case backendFailed = "BACKEND_FAILED"
    case tooManyPending = "TOO_MANY_PENDING_INPUTS"
}

/// The runtime's routes, as `GET /api/workflows/{name}/transport` reports them.
public enum RuntimePaths {
    public static func socket(workflow: String, app: String, chat: String, user: String) -> String {
        "/ws/\(PercentEncoding.encode(workflow))/\(PercentEncoding.encode(app))/\(PercentEncoding.encode(chat))/\(PercentEncoding.encode(user))"
    }

    public static func start(app: String, workflow: String) -> String {
        "/api/chats/\(PercentEncoding.encode(app))/\(PercentEncoding.encode(workflow))/start"
    }

    public static func input(app: String, chat: String, user: String) -> String {
        "/chat/\(PercentEncoding.encode(app))/\(PercentEncoding.encode(chat))/\(PercentEncoding.encode(user))/input"
    }

    public static func meta(app: String, workflow: String, chat: String) -> String {
        "/api/chats/meta/\(PercentEncoding.encode(app))/\(PercentEncoding.encode(workflow))/\(PercentEncoding.encode(chat))"
    }

    public static let workflows = "/api/workflows"
    public static let toolCallRespond = "/api/tool-call/respond"
    public static let upload = "/api/chat/upload"
}
