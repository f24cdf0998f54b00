public import LabKernel

/// A frame a client sends on the runtime's socket, read strictly: a malformed one is a
/// `ClientMessageError` the server answers with `chat.error` (the socket stays open).
/// `type` or `kind` names it, and the Mozaiks aliases are accepted (`user_input_submit`,
/// `ui_tool_response` with `eventId`).
public enum ClientMessage: Sendable, Equatable {
    /// `user.input.submit {chat_id, text, context?, client_message_id?, input_request_id?}`.
    /// `client_message_id` (ours) makes a re-send after a reconnect a no-op.
    case userInput(chatID: String?, text: String, context: JSONValue?, clientMessageID: String?)
    /// `tool_call_response {tool_call_id, response}`.
    case toolCallResponse(toolCallID: String, response: JSONValue)
    /// `client.resume {chat_id, lastClientIndex}`: -1 means nothing applied yet.
    case resume(chatID: String?, lastClientIndex: Int)
    case switchWorkflow(chatID: String?, workflow: String?)
    case enterGeneralMode
    case startGeneralChat
    case startWorkflow(workflow: String, initialMessage: String?)
    case startWorkflowBatch([BatchRun])

    public struct BatchRun: Sendable, Equatable {
        public var workflow: String
        public var initialMessage: String?
        public var label: String?

        public init(workflow: String, initialMessage: String? = nil, label: String? = nil) {
            self.workflow = workflow
            self.initialMessage = initialMessage
            self.label = label
        }
    }

    /// Longest user text a frame may carry.
    public static let maxTextBytes = 32 * 1024
    public static let maxBatch = 20

    /// The frame as text (what a client sends).
    public var text: String { json.canonicalText }

    public var json: JSONValue {
        switch self {
        case .userInput(let chatID, let text, let context, let clientMessageID):
            var object: [String: JSONValue] = ["type": "user.input.submit", "text": .string(text)]
            if let chatID { object["chat_id"] = .string(chatID) }
            if let context { object["context"] = context }
            if let clientMessageID { object["client_message_id"] = .string(clientMessageID) }
            return .object(object)
        case .toolCallResponse(let id, let response):
            return ["type": "tool_call_response", "tool_call_id": .string(id), "response": response]
        case .resume(let chatID, let last):
            var object: [String: JSONValue] = ["type": "client.resume", "lastClientIndex": .number(Double(last))]
            if let chatID { object["chat_id"] = .string(chatID) }
            return .object(object)
        case .switchWorkflow(let chatID, let workflow):
            var object: [String: JSONValue] = ["type": "chat.switch_workflow"]
            if let chatID { object["chat_id"] = .string(chatID) }
            if let workflow { object["workflow_name"] = .string(workflow) }
            return .object(object)
        case .enterGeneralMode: return ["type": "chat.enter_general_mode"]
        case .startGeneralChat: return ["type": "chat.start_general_chat"]
        case .startWorkflow(let workflow, let message):
            var object: [String: JSONValue] = ["type": "chat.start_workflow", "workflow_name": .string(workflow)]
            if let message { object["initial_message"] = .string(message) }
            return .object(object)
        case .startWorkflowBatch(let runs):
            return ["type": "chat.start_workflow_batch", "runs": .array(runs.map { run in
                var object: [String: JSONValue] = ["workflow_name": .string(run.workflow)]
                if let message = run.initialMessage { object["initial_message"] = .string(message) }
                if let label = run.label { object["label"] = .string(label) }
                return .object(object)
            })]
        }
    }

    /// Reads a frame.
    public init(text: String) throws(ClientMessageError) {
        guard text.utf8.count <= Self.maxTextBytes * 2 else {
            throw ClientMessageError(.messageTooLarge, "the frame is over \(Self.maxTextBytes * 2) bytes")
        }
        let value: JSONValue
        do { value = try JSONValue.parse(text) } catch { throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: not JSON") }
        guard case .object(let object) = value else { throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: not an object") }
        guard let type = (object["type"] ?? object["kind"])?.stringValue else {
            throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: 'type' is required")
        }
        func string(_ key: String, required: Bool = false) throws(ClientMessageError) -> String? {
            guard let value = object[key], value != .null else {
                if required { throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: '\(key)' is required") }
                return nil
            }
            guard let text = value.stringValue else {
                throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: '\(key)' must be a string")
            }
            return text
        }
        switch type {
        case "user.input.submit", "user_input_submit":
            let text = try string("text", required: true)!
            guard !text.trimmingWhitespace().isEmpty else { throw ClientMessageError(.emptyMessage, "The message is empty") }
            guard text.utf8.count <= Self.maxTextBytes else {
                throw ClientMessageError(.messageTooLarge, "The message is over \(Self.maxTextBytes) bytes")
            }
            if let context = object["context"], context != .null, context.objectValue == nil {
                throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: 'context' must be an object")
            }
            let id = try string("client_message_id")
            if let id, id.isEmpty || id.utf8.count > 128 {
                throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: 'client_message_id' is 1 to 128 characters")
            }
            self = .userInput(chatID: try string("chat_id"), text: text, context: object["context"].flatMap { $0 == .null ? nil : $0 },
                              clientMessageID: id)
        case "tool_call_response", "ui_tool_response":
            var found = try string("tool_call_id")
            if found == nil { found = try string("eventId") }
            if found == nil { found = try string("ui_tool_id") }
            guard let id = found, !id.isEmpty else {
                throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: 'tool_call_id' is required")
            }
            guard let response = object["response"], response.objectValue != nil else {
                throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: 'response' must be an object")
            }
            self = .toolCallResponse(toolCallID: id, response: response)
        case "client.resume":
            guard let last = object["lastClientIndex"] ?? object["last_client_index"] else {
                throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: 'lastClientIndex' is required")
            }
            guard let number = last.numberValue, number.rounded() == number, abs(number) < 1e15 else {
                throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: 'lastClientIndex' must be an integer")
            }
            self = .resume(chatID: try string("chat_id"), lastClientIndex: max(-1, Int(number)))
        case "chat.switch_workflow":
            self = .switchWorkflow(chatID: try string("chat_id"), workflow: try string("workflow_name"))
        case "chat.enter_general_mode": self = .enterGeneralMode
        case "chat.start_general_chat": self = .startGeneralChat
        case "chat.start_workflow":
            let workflow = try string("workflow_name", required: true)!
            self = .startWorkflow(workflow: workflow, initialMessage: try string("initial_message"))
        case "chat.start_workflow_batch":
            guard let runs = object["runs"]?.arrayValue, !runs.isEmpty, runs.count <= Self.maxBatch else {
                throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: 'runs' is a list of 1 to \(Self.maxBatch) runs")
            }
            self = .startWorkflowBatch(try runs.map { (run) throws(ClientMessageError) in
                guard let name = run["workflow_name"]?.stringValue else {
                    throw ClientMessageError(.schemaValidationFailed, "Invalid message schema: each run needs 'workflow_name'")
                }
                return BatchRun(workflow: name, initialMessage: run["initial_message"]?.stringValue, label: run["label"]?.stringValue)
            })
        default:
            throw ClientMessageError(.unknownMessageType, "Unknown message type '\(String(type.prefix(64)))'")
        }
    }
}

/// A frame the runtime refuses: `chat.error {message, error_code}`.
public struct ClientMessageError: Error, Equatable, Sendable {
    public var code: RuntimeErrorCode
    public var message: String

    public init(_ code: RuntimeErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
}
