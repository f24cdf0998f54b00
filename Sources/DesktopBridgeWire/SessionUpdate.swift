public import LabKernel

/// What a session says as a turn goes on, in neither dialect: the server keeps history in
/// this form and writes each update in the dialect of the phone it goes to.
public enum SessionUpdate: Hashable, Sendable {
    case userMessageChunk(String)
    case agentMessageChunk(String)
    case agentThoughtChunk(String)
    case plan([PlanEntry])
    case toolCall(id: String, title: String, kind: String, input: JSONValue)
    case toolCallUpdate(id: String, status: ToolCallStatus, output: String?)
    case currentModeUpdate(String)

    /// The `sessionUpdate` discriminator both dialects use.
    public var kind: String {
        switch self {
        case .userMessageChunk: return "user_message_chunk"
        case .agentMessageChunk: return "agent_message_chunk"
        case .agentThoughtChunk: return "agent_thought_chunk"
        case .plan: return "plan"
        case .toolCall: return "tool_call"
        case .toolCallUpdate: return "tool_call_update"
        case .currentModeUpdate: return "current_mode_update"
        }
    }

    /// The `update` object in `dialect`.
    public func json(_ dialect: ACPDialect) -> JSONValue {
        var object: [String: JSONValue] = ["sessionUpdate": .string(kind)]
        switch (self, dialect) {
        case (.userMessageChunk(let text), .current), (.agentMessageChunk(let text), .current), (.agentThoughtChunk(let text), .current):
            object["content"] = ["type": "text", "text": .string(text)]
        case (.userMessageChunk(let text), .legacy), (.agentMessageChunk(let text), .legacy), (.agentThoughtChunk(let text), .legacy):
            // The original's ContentChunk wraps the block once more.
            object["content"] = ["content": ["type": "text", "text": .string(text)]]
        case (.plan(let entries), .current): object["entries"] = .array(entries.map(\.json))
        case (.plan(let entries), .legacy): object["plan"] = ["entries": .array(entries.map(\.json))]
        case (.toolCall(let id, let title, let kind, let input), .current):
            object["toolCallId"] = .string(id)
            object["title"] = .string(title)
            object["kind"] = .string(kind)
            object["status"] = "pending"
            object["rawInput"] = input
        case (.toolCall(let id, let title, _, let input), .legacy):
            object["tool_call"] = ["call_id": .string(id), "name": .string(title), "arguments": input]
        case (.toolCallUpdate(let id, let status, let output), .current):
            object["toolCallId"] = .string(id)
            object["status"] = .string(status.rawValue)
            if let output { object["content"] = [["type": "content", "content": ["type": "text", "text": .string(output)]]] }
        case (.toolCallUpdate(let id, let status, let output), .legacy):
            var update: [String: JSONValue] = ["call_id": .string(id), "status": .string(status.legacyName)]
            if let output { update[status == .failed ? "error" : "output"] = .string(output) }
            object["tool_call_update"] = .object(update)
        case (.currentModeUpdate(let mode), _): object[dialect.key("currentModeId")] = .string(mode)
        }
        return .object(object)
    }

    /// Reads an `update` object in `dialect`; nil for one this bridge does not write
    /// (a phone ignores what it does not know).
    public init?(json: JSONValue, dialect: ACPDialect) {
        guard let kind = json["sessionUpdate"]?.stringValue else { return nil }
        func text() -> String? {
            switch dialect {
            case .current: return json["content"]?["text"]?.stringValue
            case .legacy: return json["content"]?["content"]?["text"]?.stringValue
            }
        }
        switch kind {
        case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk":
            guard let text = text() else { return nil }
            self = kind == "user_message_chunk" ? .userMessageChunk(text) : kind == "agent_message_chunk" ? .agentMessageChunk(text) : .agentThoughtChunk(text)
        case "plan":
            let entries = (dialect == .current ? json["entries"] : json["plan"]?["entries"])?.arrayValue ?? []
            self = .plan(entries.compactMap(PlanEntry.init(json:)))
        case "tool_call":
            switch dialect {
            case .current:
                guard let id = json["toolCallId"]?.stringValue else { return nil }
                self = .toolCall(id: id, title: json["title"]?.stringValue ?? "", kind: json["kind"]?.stringValue ?? "other", input: json["rawInput"] ?? .null)
            case .legacy:
                guard let call = json["tool_call"], let id = call["call_id"]?.stringValue else { return nil }
                self = .toolCall(id: id, title: call["name"]?.stringValue ?? "", kind: "other", input: call["arguments"] ?? .null)
            }
        case "tool_call_update":
            switch dialect {
            case .current:
                guard let id = json["toolCallId"]?.stringValue, let status = json["status"]?.stringValue.flatMap(ToolCallStatus.init(rawValue:)) else { return nil }
                self = .toolCallUpdate(id: id, status: status, output: json["content"]?.arrayValue?.first?["content"]?["text"]?.stringValue)
            case .legacy:
                guard let update = json["tool_call_update"], let id = update["call_id"]?.stringValue,
                      let status = update["status"]?.stringValue.flatMap(ToolCallStatus.init(legacyName:)) else { return nil }
                self = .toolCallUpdate(id: id, status: status, output: (update["output"] ?? update["error"])?.stringValue)
            }
        case "current_mode_update":
            guard let mode = json[dialect.key("currentModeId")]?.stringValue else { return nil }
            self = .currentModeUpdate(mode)
        default:
            return nil
        }
    }
}

/// A tool call's state: ACP's names, and the legacy dialect's.
public enum ToolCallStatus: String, Hashable, Sendable {
    case inProgress = "in_progress"
    case completed
    case failed

    var legacyName: String {
        switch self {
        case .inProgress: return "started"
        case .completed: return "completed"
        case .failed: return "error"
        }
    }

    init?(legacyName: String) {
        switch legacyName {
        case "started": self = .inProgress
        case "completed": self = .completed
        case "error": self = .failed
        default: return nil
        }
    }
}

/// One entry of an agent's plan (the same in both dialects).
public struct PlanEntry: Hashable, Sendable {
    public var content: String
    public var priority: String
    public var status: String

    public init(content: String, priority: String = "medium", status: String = "pending") {
        self.content = content
        self.priority = priority
        self.status = status
    }

    public var json: JSONValue { ["content": .string(content), "priority": .string(priority), "status": .string(status)] }

    init?(json: JSONValue) {
        guard let content = json["content"]?.stringValue else { return nil }
        self.init(content: content, priority: json["priority"]?.stringValue ?? "medium", status: json["status"]?.stringValue ?? "pending")
    }
}

/// A `session/update` notification as it goes to a phone: the session, the update, and
/// `_meta.seq`, the update's place in the session's history (1, 2, …), by which a phone
/// that rebuilt its timeline from history skips what it already has.
public struct SessionNotification: Hashable, Sendable {
    public var sessionID: String
    public var seq: Int
    public var update: SessionUpdate

    public init(sessionID: String, seq: Int, update: SessionUpdate) {
        self.sessionID = sessionID
        self.seq = seq
        self.update = update
    }

    public func params(_ dialect: ACPDialect) -> JSONValue {
        [dialect.key("sessionId"): .string(sessionID), "update": update.json(dialect), "_meta": ["seq": .number(Double(seq))]]
    }

    public func message(_ dialect: ACPDialect) -> RPCMessage { .notification(method: "session/update", params: params(dialect)) }

    public init?(params: JSONValue, dialect: ACPDialect) {
        guard let session = params[dialect.key("sessionId")]?.stringValue, let update = params["update"].flatMap({ SessionUpdate(json: $0, dialect: dialect) }) else { return nil }
        self.init(sessionID: session, seq: params["_meta"]?["seq"]?.numberValue.flatMap { $0.rounded() == $0 && abs($0) < 1e15 ? Int($0) : nil } ?? 0, update: update)
    }
}
