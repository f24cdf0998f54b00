import AgentRuntimeWire
public import LabKernel

/// The result of a socket's upgrade request.
public enum AgentConnectResult: Sendable {
    /// Accepted: the connection's id, and its first frames (`chat_meta`, a replay).
    case accepted(connection: Int, AgentReply)
    /// Close at once with this code (1008 for a bad token or a chat that is not the caller's).
    case refused(code: UInt16, reason: String)
}

extension AgentServer {
    /// `/ws/{workflow}/{app}/{chat}/{user}?access_token=…[&resume=client]`.
    ///
    /// `chat_meta` comes first. Mozaiks then replays the transcript of an in-progress chat
    /// by itself (`resume_mode: auto`); a client that sends `client.resume` on its own says
    /// `resume=client` and gets only what it asks for. The first socket of an AgentDriven
    /// chat starts its opening turn.
    public mutating func connect(path: String, query: [String: String], now: Instant) -> AgentConnectResult {
        let segments = HTTPRequestMessage(method: "GET", path: path).segments
        guard segments.count == 5, segments[0] == "ws" else { return .refused(code: 1008, reason: "Unknown socket path") }
        let (workflow, app, chatID, user) = (segments[1], segments[2], segments[3], segments[4])
        if config.authRequired {
            guard let token = query["access_token"], !token.isEmpty else { return .refused(code: 1008, reason: "Missing access_token") }
            guard let principal = try? verify(token, now: now), principal.appID == app, principal.userID == user else {
                return .refused(code: 1008, reason: "Access denied")
            }
        }
        guard let chat = try? ownedChat(chatID, app: app, user: user, workflow: workflow) else { return .refused(code: 1008, reason: "Chat not found") }
        let id = state.nextConnection
        state.nextConnection += 1
        let resumesItself = query["resume"] == "client"
        state.connections[id] = AgentServerState.Connection(chatID: chat.id, appID: app, userID: user, resumesItself: resumesItself)
        state.connectionsOfChat[chat.id, default: []].append(id)
        var reply = AgentReply()
        var meta = metaFields(chat)
        meta["kind"] = "chat_meta"
        reply.outputs.append(.send(connection: id, text: RuntimeEnvelope(.chatMeta, meta, timestamp: timestamp(now)).text))
        if !resumesItself && !(state.transcripts[chat.id] ?? []).isEmpty {
            replay(id, after: -1, mode: "auto", reason: "on_connect", now: now, &reply)
        }
        if !chat.opened, let definition = workflowsByName[chat.workflow], definition.startupMode == .agentDriven, !chat.completed {
            state.chats[chat.id]!.opened = true
            beginTurn(chat.id, input: nil, now: now, &reply)
            save(chat.id, &reply)
        }
        return .accepted(connection: id, reply)
    }

    public mutating func disconnect(_ connection: Int) {
        guard let gone = state.connections.removeValue(forKey: connection) else { return }
        state.connectionsOfChat[gone.chatID]?.removeAll { $0 == connection }
        if state.connectionsOfChat[gone.chatID]?.isEmpty == true { state.connectionsOfChat[gone.chatID] = nil }
    }

    /// A text frame from a client. Anything malformed gets `chat.error` on that socket and
    /// changes nothing.
    public mutating func receive(_ connection: Int, text: String, now: Instant) -> AgentReply {
        var reply = AgentReply()
        guard let conn = state.connections[connection] else { return reply }
        func refuse(_ code: RuntimeErrorCode, _ message: String) {
            reply.outputs.append(.send(connection: connection, text: errorFrame(code, message, now: now)))
        }
        let message: ClientMessage
        do { message = try ClientMessage(text: text) } catch {
            refuse(error.code, error.message)
            return reply
        }
        do {
            try handle(message, on: connection, conn, now: now, &reply)
        } catch let failure as SocketFailure {
            reply = AgentReply()
            refuse(failure.code, failure.message)
        } catch let failure as RuntimeAPIError {
            reply = AgentReply()
            refuse(Self.code(for: failure), failure.detail.stringValue ?? "Request failed")
        } catch {
            reply = AgentReply()
            refuse(.schemaValidationFailed, "Request failed")
        }
        return reply
    }

    mutating func handle(_ message: ClientMessage, on id: Int, _ conn: AgentServerState.Connection, now: Instant,
                         _ reply: inout AgentReply) throws {
        func send(_ type: RuntimeEventType, _ data: [String: JSONValue]) {
            var fields = data
            fields["kind"] = .string(type.kind)
            reply.outputs.append(.send(connection: id, text: RuntimeEnvelope(type, fields, timestamp: timestamp(now)).text))
        }
        func requireSameChat(_ chatID: String?) throws {
            if let chatID, chatID != conn.chatID {
                throw SocketFailure(.chatMismatch, "This socket belongs to chat \(conn.chatID), not \(chatID.prefix(64))")
            }
        }
        switch message {
        case .userInput(let chatID, let text, _, let clientMessageID):
            try requireSameChat(chatID)
            let status = try submit(conn.chatID, text: text, clientMessageID: clientMessageID, now: now, &reply)
            var ack: [String: JSONValue] = ["chat_id": .string(conn.chatID), "status": .string(status)]
            if let clientMessageID { ack["client_message_id"] = .string(clientMessageID) }
            send(.inputAck, ack)
        case .toolCallResponse(let toolCallID, let response):
            guard let call = state.toolCalls[toolCallID], call.chatID == conn.chatID else {
                throw SocketFailure(.toolCallNotFound, "No tool call \(toolCallID.prefix(64)) in this chat")
            }
            let status: String
            do { status = try answer(call.id, response: response, now: now, &reply) } catch let failure as RuntimeAPIError {
                throw SocketFailure(.toolCallNotAwaiting, failure.detail.stringValue ?? "The tool call does not await a response")
            }
            send(.ackToolCallResponse, ["tool_call_id": .string(toolCallID), "status": .string(status)])
        case .resume(let chatID, let last):
            try requireSameChat(chatID)
            replay(id, after: last, mode: "client", reason: "client_resume", now: now, &reply)
        case .switchWorkflow(let chatID, let workflow):
            let target = try chatID.map { try ownedChat($0, app: conn.appID, user: conn.userID) } ?? state.chats[conn.chatID]!
            if let workflow, workflowsByName[workflow] == nil { throw SocketFailure(.switchWorkflowFailed, "Unknown workflow '\(workflow.prefix(64))'") }
            send(.contextSwitched, ["chat_id": .string(target.id), "workflow_name": .string(workflow ?? target.workflow),
                                    "websocket_url": .string(RuntimePaths.socket(workflow: target.workflow, app: target.appID, chat: target.id, user: target.userID))])
        case .enterGeneralMode:
            send(.modeChanged, ["mode": "general", "chat_id": .string(conn.chatID)])
        case .startGeneralChat:
            let chat = try openChat(workflow: "general", initialMessage: nil, conn, now: now, &reply)
            send(.generalSessionCreated, ["chat_id": .string(chat.id), "workflow_name": "general",
                                          "websocket_url": .string(RuntimePaths.socket(workflow: "general", app: chat.appID, chat: chat.id, user: chat.userID))])
        case .startWorkflow(let workflow, let initialMessage):
            guard workflowsByName[workflow] != nil else { throw SocketFailure(.startWorkflowFailed, "Unknown workflow '\(workflow.prefix(64))'") }
            let chat = try openChat(workflow: workflow, initialMessage: initialMessage, conn, now: now, &reply)
            send(.workflowStarted, ["chat_id": .string(chat.id), "workflow_name": .string(workflow), "app_id": .string(chat.appID),
                                    "user_id": .string(chat.userID),
                                    "websocket_url": .string(RuntimePaths.socket(workflow: workflow, app: chat.appID, chat: chat.id, user: chat.userID))])
        case .startWorkflowBatch(let runs):
            let blocked = runs.filter { workflowsByName[$0.workflow] == nil }.map(\.workflow)
            var started: [JSONValue] = []
            for run in runs where workflowsByName[run.workflow] != nil {
                let chat = try openChat(workflow: run.workflow, initialMessage: run.initialMessage, conn, now: now, &reply)
                started.append(["chat_id": .string(chat.id), "workflow_name": .string(run.workflow), "label": run.label.map { .string($0) } ?? .null])
            }
            send(.workflowBatchStarted, ["count": .number(Double(started.count)), "workflows": .array(started),
                                         "blocked": .array(blocked.map { .string($0) })])
        }
    }

    /// A chat the socket's user starts from a control message, with its first input.
    mutating func openChat(workflow name: String, initialMessage: String?, _ conn: AgentServerState.Connection, now: Instant,
                           _ reply: inout AgentReply) throws -> AgentChat {
        guard (state.chatsOfUser[conn.appID + "|" + conn.userID]?.count ?? 0) < config.maxChatsPerUser else {
            throw SocketFailure(.startWorkflowFailed, "Too many chats for this user")
        }
        let chat = createChat(app: conn.appID, user: conn.userID, workflow: try workflow(name), requestID: nil, now: now, &reply)
        if let initialMessage, !initialMessage.trimmingWhitespace().isEmpty, initialMessage.utf8.count <= ClientMessage.maxTextBytes {
            _ = try submit(chat.id, text: initialMessage, clientMessageID: nil, now: now, &reply)
        }
        return chat
    }

    /// The events after `last` as replays, then `chat.resume_boundary`. A client that
    /// claims events the server never sent is told its timeline diverged, and replays all.
    mutating func replay(_ connection: Int, after last: Int, mode: String, reason: String, now: Instant, _ reply: inout AgentReply) {
        guard let conn = state.connections[connection], let chat = state.chats[conn.chatID] else { return }
        let transcript = state.transcripts[chat.id] ?? []
        let diverged = last >= transcript.count
        let from = diverged ? transcript.count : max(0, last + 1)
        for text in transcript[from...] { reply.outputs.append(.send(connection: connection, text: RuntimeEnvelope.replayText(of: text))) }
        var data: [String: JSONValue] = [
            "kind": "resume_boundary", "chat_id": .string(chat.id), "replayed_messages": .number(Double(transcript.count - from)),
            "last_message_index": .number(Double(transcript.count - 1)), "total_messages": .number(Double(transcript.count)),
            "message_count": .number(Double(transcript.count)), "chat_status": .string(chat.status), "resume_mode": .string(mode),
            "resume_state": .string(diverged ? "diverged" : "in_sync"),
            "resume_context": ["reason": .string(reason), "last_client_index": .number(Double(last))],
        ]
        for (key, value) in restoreState(chat) { data[key] = value }
        reply.outputs.append(.send(connection: connection, text: RuntimeEnvelope(.resumeBoundary, data, timestamp: timestamp(now)).text))
    }

    static func code(for failure: RuntimeAPIError) -> RuntimeErrorCode {
        switch failure.status {
        case 404: return .toolCallNotFound
        case 409: return .chatCompleted
        case 429: return .tooManyPending
        default: return .schemaValidationFailed
        }
    }
}

/// A socket message that cannot be carried out: `chat.error` with this code.
struct SocketFailure: Error {
    var code: RuntimeErrorCode
    var message: String
    init(_ code: RuntimeErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
}
