import AgentRuntimeWire
public import LabKernel

/// Turns: how inputs and tool responses start and resume them, and how their steps play.
extension AgentServer {
    /// A wake-up the driver was asked for: the chat's run plays what is due.
    public mutating func runDue(_ chatID: String, now: Instant) -> AgentReply {
        var reply = AgentReply()
        guard let at = state.chats[chatID]?.run?.nextAt, at <= now else { return reply }
        advance(chatID, now: now, &reply)
        return reply
    }

    /// A user input (socket or HTTP): stored in the transcript, acknowledged, and played
    /// as a turn (or queued behind the one playing). An input while a composer tool call
    /// waits is that call's response. Returns `accepted` or `duplicate`.
    mutating func submit(_ chatID: String, text: String, clientMessageID: String?, now: Instant,
                         _ reply: inout AgentReply) throws -> String {
        guard var chat = state.chats[chatID] else { throw RuntimeAPIError(404, "Chat not found") }
        if let id = clientMessageID, chat.seenClientMessageIDs.contains(id) { return "duplicate" }
        guard !chat.completed else { throw RuntimeAPIError(409, "The chat is completed; start a new one") }
        let waiting = chat.run?.waitingToolCall.flatMap { state.toolCalls[$0] }
        if waiting?.display != "composer" && chat.run != nil && chat.pendingInputs.count >= AgentChat.maxPendingInputs {
            throw RuntimeAPIError(429, "Too many inputs wait for the agent")
        }
        if let id = clientMessageID {
            chat.seenClientMessageIDs.append(id)
            if chat.seenClientMessageIDs.count > AgentChat.seenLimit { chat.seenClientMessageIDs.removeFirst() }
        }
        state.chats[chatID] = chat
        var data: [String: JSONValue] = ["agent": "user", "role": "user", "content": .string(text), "source": "user", "final": true]
        if let id = clientMessageID { data["client_message_id"] = .string(id) }
        emit(chatID, .text, data, now: now, &reply)
        if let call = waiting, call.display == "composer" {
            _ = try answer(call.id, response: ["text": .string(text)], now: now, &reply)
        } else if state.chats[chatID]!.run != nil {
            state.chats[chatID]!.pendingInputs.append(text)
        } else {
            beginTurn(chatID, input: text, now: now, &reply)
        }
        save(chatID, &reply)
        return "accepted"
    }

    /// A tool call's response: stored, in the transcript, and the turn waiting for it goes
    /// on. The same response again is `duplicate`; a different one for an answered call
    /// is refused.
    mutating func answer(_ id: String, response: JSONValue, now: Instant, _ reply: inout AgentReply) throws -> String {
        guard var call = state.toolCalls[id] else { throw RuntimeAPIError(404, "Tool call not found") }
        if let earlier = call.response {
            guard earlier == response else { throw RuntimeAPIError(409, "The tool call was already answered") }
            return "duplicate"
        }
        guard call.awaitsResponse else { throw RuntimeAPIError(409, "The tool call does not await a response") }
        call.response = response
        state.toolCalls[id] = call
        reply.changes.append(.toolCall(call))
        emit(call.chatID, .toolResponse, ["tool_call_id": .string(id), "name": .string(call.name), "status": "ok", "result": response,
                                          "component_type": .string(call.component)], now: now, &reply)
        guard var chat = state.chats[call.chatID] else { return "accepted" }
        chat.lastResponse = response["text"]?.stringValue ?? response.canonicalText
        if chat.run?.waitingToolCall == id {
            chat.run!.waitingToolCall = nil
            chat.run!.nextAt = now
            state.chats[call.chatID] = chat
            advance(call.chatID, now: now, &reply)
        } else {
            state.chats[call.chatID] = chat
        }
        save(call.chatID, &reply)
        return "accepted"
    }

    /// A turn starts: the next of the script (or a run of the command backend).
    mutating func beginTurn(_ chatID: String, input: String?, now: Instant, _ reply: inout AgentReply) {
        guard var chat = state.chats[chatID], let workflow = workflowsByName[chat.workflow] else { return }
        chat.awaitingInput = false
        chat.inputRequestID = nil
        if let input { chat.lastInput = input }
        chat.run = RunState(turn: chat.turnsPlayed, step: 0, chunk: 0, nextAt: now, waitingToolCall: nil, startedAt: now, messageID: nil, backendRun: nil)
        chat.turnsPlayed += 1
        if case .command(let argv, let timeout) = workflow.backend {
            let run = state.nextBackendRun
            state.nextBackendRun += 1
            state.backendRuns[run] = chatID
            chat.run!.nextAt = nil
            chat.run!.backendRun = run
            state.chats[chatID] = chat
            reply.commands.append(BackendCommand(run: run, argv: argv, input: input ?? "", timeout: timeout))
            return
        }
        state.chats[chatID] = chat
        advance(chatID, now: now, &reply)
    }

    /// Plays every step due by `now`, then asks for a wake-up at the next one.
    mutating func advance(_ chatID: String, now: Instant, _ reply: inout AgentReply) {
        guard let workflow = state.chats[chatID].flatMap({ workflowsByName[$0.workflow] }) else { return }
        while let run = state.chats[chatID]?.run, let at = run.nextAt, at <= now {
            let steps = workflow.steps(forTurn: run.turn)
            guard run.step < steps.count else {
                endTurn(chatID, now: now, &reply)
                continue
            }
            play(steps[run.step], chatID: chatID, now: now, &reply)
            if (state.transcripts[chatID]?.count ?? 0) >= config.maxTranscript, state.chats[chatID]?.completed == false {
                complete(chatID, summary: "The chat reached its length limit", now: now, &reply)
            }
        }
        if let at = state.chats[chatID]?.run?.nextAt { reply.wakeups.append(AgentWakeup(chatID: chatID, at: at)) }
        save(chatID, &reply)
    }

    /// One step (or one chunk of a `say`).
    mutating func play(_ step: AgentStep, chatID: String, now: Instant, _ reply: inout AgentReply) {
        var run = state.chats[chatID]!.run!
        func next(after delay: TimeSpan = .zero) {
            run.step += 1
            run.chunk = 0
            run.messageID = nil
            run.nextAt = now + delay
        }
        switch step {
        case .think(let span):
            next(after: span)
        case .say(let agent, let template, let words, let every):
            let chunks = AgentStep.chunks(of: substitute(template, chatID), wordsPerChunk: words)
            if run.messageID == nil { run.messageID = newID() }
            let last = run.chunk >= chunks.count - 1
            emit(chatID, .text, ["agent": .string(agent), "role": "assistant", "content": .string(chunks.isEmpty ? "" : chunks[run.chunk]),
                                 "message_id": .string(run.messageID!), "chunk": .number(Double(run.chunk)), "final": .bool(last),
                                 "source": "agent"], now: now, &reply)
            if last {
                next()
            } else {
                run.chunk += 1
                run.nextAt = now + every
            }
        case .print(let agent, let text):
            emit(chatID, .print, ["agent": .string(agent), "content": .string(substitute(text, chatID))], now: now, &reply)
            next()
        case .toolCall(let call):
            let id = newID()
            let record = ToolCallRecord(id: id, chatID: chatID, name: call.name, component: call.component, display: call.display,
                                        awaitsResponse: call.awaitsResponse, response: nil, createdAt: now)
            state.toolCalls[id] = record
            reply.changes.append(.toolCall(record))
            var data: [String: JSONValue] = [
                "tool_call_id": .string(id), "corr": .string(id), "event_id": .string(id), "tool_name": .string(call.name), "name": .string(call.name),
                "component_type": .string(call.component), "awaiting_response": .bool(call.awaitsResponse), "display": .string(call.display),
                "display_type": .string(call.display), "payload": call.payload, "agent": .string(call.agent),
            ]
            if call.awaitsResponse { data["interaction_type"] = "input_request" }
            emit(chatID, .toolCall, data, now: now, &reply)
            if call.display == "artifact" {
                state.chats[chatID]!.lastArtifact = ["tool_call_id": .string(id), "component_type": .string(call.component), "payload": call.payload]
            }
            next()
            if call.awaitsResponse {
                run.waitingToolCall = id
                run.nextAt = nil
            }
        case .usage(let prompt, let completion):
            state.chats[chatID]!.promptTokens += prompt
            state.chats[chatID]!.completionTokens += completion
            emit(chatID, .usageDelta, ["prompt_tokens": .number(Double(prompt)), "completion_tokens": .number(Double(completion)),
                                       "total_tokens": .number(Double(prompt + completion))], now: now, &reply)
            next()
        case .custom(let kind, let payload):
            emit(chatID, .customEvent, ["event_kind": .string(kind), "payload": payload], now: now, &reply)
            next()
        case .complete(let summary):
            state.chats[chatID]!.run = run
            complete(chatID, summary: summary, now: now, &reply)
            return
        }
        state.chats[chatID]!.run = run
    }

    /// The run ends: usage summary, `chat.run_complete`, and the chat is completed.
    mutating func complete(_ chatID: String, summary: String, now: Instant, _ reply: inout AgentReply) {
        guard let chat = state.chats[chatID] else { return }
        let total = chat.promptTokens + chat.completionTokens
        emit(chatID, .usageSummary, ["usage": ["prompt_tokens": .number(Double(chat.promptTokens)),
                                               "completion_tokens": .number(Double(chat.completionTokens)), "total_tokens": .number(Double(total))]],
             now: now, &reply)
        emit(chatID, .runComplete, ["status": 1, "summary": .string(summary), "total_tokens": .number(Double(total))], now: now, &reply)
        state.chats[chatID]!.completed = true
        state.chats[chatID]!.run = nil
        state.chats[chatID]!.pendingInputs = []
        state.chats[chatID]!.awaitingInput = false
    }

    /// The turn's steps are done: the agent asks for the next input, or plays the next
    /// queued one.
    mutating func endTurn(_ chatID: String, now: Instant, _ reply: inout AgentReply) {
        state.chats[chatID]!.run = nil
        if !state.chats[chatID]!.pendingInputs.isEmpty {
            let input = state.chats[chatID]!.pendingInputs.removeFirst()
            beginTurn(chatID, input: input, now: now, &reply)
        } else {
            requestInput(chatID, now: now, &reply)
        }
    }

    mutating func requestInput(_ chatID: String, now: Instant, _ reply: inout AgentReply) {
        let id = newID()
        state.chats[chatID]!.awaitingInput = true
        state.chats[chatID]!.inputRequestID = id
        let agent = workflowsByName[state.chats[chatID]!.workflow]?.agents.first ?? "Assistant"
        emit(chatID, .inputRequest, ["request_id": .string(id), "input_request_id": .string(id), "agent": .string(agent), "prompt": "",
                                     "password": false], now: now, &reply)
    }

    func substitute(_ template: String, _ chatID: String) -> String {
        guard template.contains("{") else { return template }
        let chat = state.chats[chatID]!
        return template.replacing("{input}", with: chat.lastInput).replacing("{response}", with: chat.lastResponse)
    }

    // MARK: The command backend

    /// Output of a command-backend run: streamed as chunks of one message.
    public mutating func backendOutput(run: Int, text: String, now: Instant) -> AgentReply {
        var reply = AgentReply()
        guard let chatID = state.backendRuns[run], var turn = state.chats[chatID]?.run, turn.backendRun == run, !text.isEmpty else { return reply }
        if turn.messageID == nil { turn.messageID = newID() }
        emit(chatID, .text, ["agent": "Assistant", "role": "assistant", "content": .string(text), "message_id": .string(turn.messageID!),
                             "chunk": .number(Double(turn.chunk)), "final": false, "source": "command"], now: now, &reply)
        turn.chunk += 1
        state.chats[chatID]!.run = turn
        save(chatID, &reply)
        return reply
    }

    /// A command-backend run ended (`status` 0: success). Its message gets a final chunk;
    /// a failure is reported on the socket; the turn ends either way.
    public mutating func backendFinished(run: Int, status: Int32, reason: String? = nil, now: Instant) -> AgentReply {
        var reply = AgentReply()
        guard let chatID = state.backendRuns.removeValue(forKey: run), let turn = state.chats[chatID]?.run, turn.backendRun == run else { return reply }
        emit(chatID, .text, ["agent": "Assistant", "role": "assistant", "content": "", "message_id": .string(turn.messageID ?? newID()),
                             "chunk": .number(Double(turn.chunk)), "final": true, "source": "command", "exit_status": .number(Double(status))],
             now: now, &reply)
        if status != 0 {
            let message = "The agent program failed" + (reason.map { " (\($0))" } ?? " (exit status \(status))")
            for connection in state.connectionsOfChat[chatID] ?? [] {
                reply.outputs.append(.send(connection: connection, text: errorFrame(.backendFailed, message, now: now)))
            }
        }
        endTurn(chatID, now: now, &reply)
        save(chatID, &reply)
        return reply
    }

    // MARK: Events

    /// Sends an event to every socket of the chat; a transcript event is indexed and stored.
    mutating func emit(_ chatID: String, _ type: RuntimeEventType, _ fields: [String: JSONValue], now: Instant, _ reply: inout AgentReply) {
        var data = fields
        data["kind"] = .string(type.kind)
        data["chat_id"] = .string(chatID)
        if type.isTranscript {
            let index = state.transcripts[chatID, default: []].count
            data["index"] = .number(Double(index))
            data["sequence"] = .number(Double(index))
        }
        let text = RuntimeEnvelope(type, data, timestamp: timestamp(now)).text
        if type.isTranscript {
            reply.changes.append(.event(chatID: chatID, index: state.transcripts[chatID]!.count, text: text))
            state.transcripts[chatID]!.append(text)
        }
        for connection in state.connectionsOfChat[chatID] ?? [] { reply.outputs.append(.send(connection: connection, text: text)) }
    }

    /// Stores the chat's record with the reply (once per reply).
    mutating func save(_ chatID: String, _ reply: inout AgentReply) {
        guard let chat = state.chats[chatID] else { return }
        reply.changes.removeAll { if case .chat(let c) = $0 { return c.id == chatID }; return false }
        reply.changes.append(.chat(chat))
    }

    func errorFrame(_ code: RuntimeErrorCode, _ message: String, now: Instant) -> String {
        RuntimeEnvelope(.error, ["kind": "error", "message": .string(message), "error_code": .string(code.rawValue)], timestamp: timestamp(now)).text
    }
}

extension AgentServer {
    /// After a start over stored state: the wake-ups every playing turn needs, and turns
    /// that waited on a command-backend program (which died with the old process) end with
    /// a failure. Connections never survive a restart.
    public mutating func recover(now: Instant) -> AgentReply {
        var reply = AgentReply()
        state.connections = [:]
        state.connectionsOfChat = [:]
        state.backendRuns = [:]
        for id in state.chats.keys.sorted() {
            guard let run = state.chats[id]?.run else { continue }
            if let backend = run.backendRun {
                state.backendRuns[backend] = id
                let ended = backendFinished(run: backend, status: -1, reason: "interrupted by a restart", now: now)
                reply.changes += ended.changes
                reply.wakeups += ended.wakeups
                reply.commands += ended.commands
            } else if let at = run.nextAt {
                reply.wakeups.append(AgentWakeup(chatID: id, at: at))
            }
        }
        state.nextBackendRun = max(state.nextBackendRun, (state.chats.values.compactMap { $0.run?.backendRun }.max() ?? 0) + 1)
        return reply
    }
}
