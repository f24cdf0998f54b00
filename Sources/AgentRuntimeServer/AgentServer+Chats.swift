import AgentRuntimeWire
import LabKernel

/// The HTTP routes about workflows and chats.
extension AgentServer {
    /// `GET /api/workflows`: an object keyed by workflow name (Mozaiks), not a list.
    func discovery() -> HTTPResponseMessage {
        var object: [String: JSONValue] = [:]
        for workflow in config.workflows { object[workflow.name] = workflow.discoveryJSON }
        return .json(200, .object(object))
    }

    /// `GET /api/workflows/{name}/transport`: the route patterns a client fills in.
    func transport(_ name: String) throws -> HTTPResponseMessage {
        let workflow = try workflow(name)
        return .json(200, [
            "workflow_name": .string(workflow.name),
            "transport": "websocket",
            "websocket_path": .string("/ws/\(workflow.name)/{app_id}/{chat_id}/{user_id}"),
            "websocket_auth": "access_token query parameter",
            "input_path": "/chat/{app_id}/{chat_id}/{user_id}/input",
            "start_path": .string("/api/chats/{app_id}/\(workflow.name)/start"),
            "tool_response_path": .string(RuntimePaths.toolCallRespond),
            "upload_path": .string(RuntimePaths.upload),
            "meta_path": .string("/api/chats/meta/{app_id}/\(workflow.name)/{chat_id}"),
            "resume": ["message": "client.resume", "index_field": "lastClientIndex", "boundary": "chat.resume_boundary"],
        ])
    }

    /// `POST /api/chats/{app}/{workflow}/start {user_id, client_request_id?, force_new?}`.
    mutating func start(_ request: HTTPRequestMessage, app: String, workflow name: String, now: Instant,
                        _ reply: inout AgentReply) throws -> HTTPResponseMessage {
        let principal = try principal(request, now: now)
        try requireApp(principal, app)
        let workflow = try workflow(name)
        let body = try fields(request)
        let user: String, requestID: String?, forceNew: Bool
        do {
            user = try body.name("user_id")
            requestID = try body.optionalString("client_request_id")
            forceNew = try body.optionalBool("force_new") ?? false
        } catch { throw RuntimeAPIError.field(error) }
        try requireUser(principal, user)
        if let requestID { guard !requestID.isEmpty, requestID.utf8.count <= 128 else {
            throw RuntimeAPIError.validation(["body", "client_request_id"], "client_request_id is 1 to 128 characters")
        } }
        if !forceNew, let existing = reusable(app: app, user: user, workflow: workflow.name, requestID: requestID, now: now) {
            return .json(200, startJSON(existing, reused: true))
        }
        guard (state.chatsOfUser[app + "|" + user]?.count ?? 0) < config.maxChatsPerUser else {
            throw RuntimeAPIError(429, "Too many chats for this user")
        }
        let chat = createChat(app: app, user: user, workflow: workflow, requestID: requestID, now: now, &reply)
        return .json(200, startJSON(chat, reused: false))
    }

    /// The chat a start should return instead of a new one: the same `client_request_id`
    /// within its window, or (without one) an in-progress chat of the last few seconds.
    func reusable(app: String, user: String, workflow: String, requestID: String?, now: Instant) -> AgentChat? {
        if let requestID {
            let key = AgentServerState.requestKey(app: app, user: user, workflow: workflow, request: requestID)
            guard let id = state.chatByRequest[key], let chat = state.chats[id], now - chat.createdAt <= config.requestReuseWindow else { return nil }
            return chat
        }
        for id in (state.chatsOfUser[app + "|" + user] ?? []).reversed() {
            guard let chat = state.chats[id] else { continue }
            if now - chat.createdAt > config.recentReuseWindow { break }
            if chat.workflow == workflow && !chat.completed { return chat }
        }
        return nil
    }

    /// A new chat, stored, with the workflow's greeting in its transcript.
    mutating func createChat(app: String, user: String, workflow: AgentWorkflow, requestID: String?, now: Instant,
                             _ reply: inout AgentReply) -> AgentChat {
        let chat = AgentChat(id: newID(), appID: app, userID: user, workflow: workflow.name, createdAt: now, completed: false,
                             cacheSeed: Int(generator.next(below: 1 << 31)), clientRequestID: requestID, lastArtifact: nil, turnsPlayed: 0,
                             run: nil, pendingInputs: [], seenClientMessageIDs: [], awaitingInput: false, inputRequestID: nil,
                             lastInput: "", lastResponse: "", promptTokens: 0, completionTokens: 0, opened: false)
        state.insert(chat)
        state.transcripts[chat.id] = []
        if let greeting = workflow.initialMessageToUser, workflow.startupMode == .userDriven {
            emit(chat.id, .text, ["agent": .string(workflow.agents.first ?? "Assistant"), "role": "assistant", "content": .string(greeting),
                                  "message_id": .string("greeting"), "chunk": 0, "final": true, "source": "initial_message"], now: now, &reply)
            requestInput(chat.id, now: now, &reply)
        }
        save(chat.id, &reply)
        return state.chats[chat.id]!
    }

    func startJSON(_ chat: AgentChat, reused: Bool) -> JSONValue {
        ["success": true, "chat_id": .string(chat.id), "workflow_name": .string(chat.workflow), "app_id": .string(chat.appID),
         "user_id": .string(chat.userID), "websocket_url": .string(RuntimePaths.socket(workflow: chat.workflow, app: chat.appID, chat: chat.id, user: chat.userID)),
         "message": .string(reused ? "Reusing the chat started for this request" : "Chat started"), "reused": .bool(reused),
         "cache_seed": .number(Double(chat.cacheSeed))]
    }

    /// `GET /api/chats/{app}/{workflow}`: the caller's chats of that workflow.
    func listChats(_ request: HTTPRequestMessage, app: String, workflow: String, now: Instant) throws -> HTTPResponseMessage {
        let principal = try principal(request, now: now)
        try requireApp(principal, app)
        let ids = state.chatsOfUser.keys.sorted().filter { $0.hasPrefix(app + "|") && (principal == nil || $0 == app + "|" + principal!.userID) }
            .flatMap { state.chatsOfUser[$0] ?? [] }.filter { state.chats[$0]?.workflow == workflow }
        return .json(200, ["chat_ids": .array(ids.map { .string($0) })])
    }

    func exists(_ request: HTTPRequestMessage, app: String, workflow: String, chat: String, now: Instant) throws -> HTTPResponseMessage {
        let principal = try principal(request, now: now)
        try requireApp(principal, app)
        let found = (try? ownedChat(chat, app: app, user: principal?.userID, workflow: workflow)) != nil
        return .json(200, ["exists": .bool(found)])
    }

    /// `GET /api/chats/meta/{app}/{workflow}/{chat}`: what an app needs to restore a chat.
    func meta(_ request: HTTPRequestMessage, app: String, workflow: String, chat id: String, now: Instant) throws -> HTTPResponseMessage {
        let principal = try principal(request, now: now)
        try requireApp(principal, app)
        let chat = try ownedChat(id, app: app, user: principal?.userID, workflow: workflow)
        return .json(200, .object(metaFields(chat)))
    }

    /// The fields of `chat_meta` and of the meta route.
    func metaFields(_ chat: AgentChat) -> [String: JSONValue] {
        let count = state.transcripts[chat.id]?.count ?? 0
        return [
            "chat_id": .string(chat.id), "workflow_name": .string(chat.workflow), "app_id": .string(chat.appID), "user_id": .string(chat.userID),
            "cache_seed": .number(Double(chat.cacheSeed)), "last_artifact": chat.lastArtifact ?? .null, "status": .string(chat.status),
            "chat_exists": true, "has_children": false, "created_at": .string(timestamp(chat.createdAt)),
            "total_messages": .number(Double(count)), "last_message_index": .number(Double(count - 1)), "last_sequence": .number(Double(count - 1)),
            "restore": .object(restoreState(chat)),
        ]
    }

    /// Where a chat stands, as a boundary and the meta route report it.
    func restoreState(_ chat: AgentChat) -> [String: JSONValue] {
        let awaiting = chat.run?.waitingToolCall
        return ["run_active": .bool(chat.run != nil && awaiting == nil), "awaiting_tool_call": awaiting.map { .string($0) } ?? .null,
                "awaiting_input": .bool(chat.awaitingInput), "input_request_id": chat.inputRequestID.map { .string($0) } ?? .null,
                "pending_inputs": .number(Double(chat.pendingInputs.count)), "resumable": true]
    }

    /// `POST /chat/{app}/{chat}/{user}/input {message, workflow_name, client_message_id?}`:
    /// the HTTP fallback for a user message; the agent's answer streams on the socket.
    mutating func inputRoute(_ request: HTTPRequestMessage, app: String, chat id: String, user: String, now: Instant,
                             _ reply: inout AgentReply) throws -> HTTPResponseMessage {
        let principal = try principal(request, now: now)
        try requireApp(principal, app)
        try requireUser(principal, user)
        let body = try fields(request)
        let message: String, workflow: String?, clientMessageID: String?
        do {
            message = try body.string("message")
            workflow = try body.optionalString("workflow_name")
            clientMessageID = try body.optionalString("client_message_id")
        } catch { throw RuntimeAPIError.field(error) }
        let chat = try ownedChat(id, app: app, user: user, workflow: workflow)
        guard !message.trimmingWhitespace().isEmpty else { throw RuntimeAPIError.validation(["body", "message"], "message must not be empty") }
        guard message.utf8.count <= ClientMessage.maxTextBytes else { throw RuntimeAPIError(413, "message is over \(ClientMessage.maxTextBytes) bytes") }
        let outcome = try submit(chat.id, text: message, clientMessageID: clientMessageID, now: now, &reply)
        let transport = (state.connectionsOfChat[chat.id] ?? []).isEmpty ? "http" : "websocket"
        return .json(200, ["status": .string(outcome), "transport": .string(transport), "chat_id": .string(chat.id)])
    }

    /// `POST /api/tool-call/respond {event_id, response_data}`.
    mutating func respondRoute(_ request: HTTPRequestMessage, now: Instant, _ reply: inout AgentReply) throws -> HTTPResponseMessage {
        let principal = try principal(request, now: now)
        let body = try fields(request)
        let id: String
        do { id = try body.name("event_id") } catch { throw RuntimeAPIError.field(error) }
        guard let response = body.optionalValue("response_data"), response.objectValue != nil else {
            throw RuntimeAPIError.validation(["body", "response_data"], "response_data must be an object", type: "dict_type")
        }
        guard let call = state.toolCalls[id], let chat = state.chats[call.chatID],
              principal == nil || (chat.appID == principal!.appID && chat.userID == principal!.userID) else {
            throw RuntimeAPIError(404, "Tool call not found")
        }
        let status = try answer(call.id, response: response, now: now, &reply)
        return .json(200, ["status": .string(status), "event_id": .string(id)])
    }
}
