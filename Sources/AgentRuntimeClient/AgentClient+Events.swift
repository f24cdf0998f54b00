import AgentRuntimeWire
import LabKernel

extension AgentClient {
    /// A frame from the runtime.
    mutating func frame(_ text: String, now: Instant, _ out: inout [AgentClientEffect]) {
        guard socket == .resuming || socket == .open, let envelope = RuntimeEnvelope(text: text), let key = snapshot.activeChat,
              snapshot.chats[key] != nil else { return }
        if let chatID = envelope.data["chat_id"]?.stringValue, chatID != snapshot.chats[key]!.chatID { return }
        if envelope.type.isTranscript {
            apply(envelope, text: text, key: key, now: now, &out)
            return
        }
        switch envelope.type {
        case .resumeBoundary:
            boundary(envelope, key: key, now: now, &out)
        case .inputAck:
            settle(envelope.data["client_message_id"]?.stringValue, key: key)
        case .ackToolCallResponse:
            settle(envelope.data["tool_call_id"]?.stringValue, key: key)
        case .error:
            // The reply to the oldest action awaiting one: it was refused, so it leaves the
            // queue (sending it again would be refused again).
            if let refused = awaitingReply.first {
                awaitingReply.removeFirst()
                snapshot.chats[key]!.pending.removeAll { $0.id == refused }
            }
            out.append(.surfaced(.runtime(envelope.data["error_code"]?.stringValue ?? "UNKNOWN")))
        case .chatMeta:
            if envelope.data["status"]?.stringValue == "completed" { snapshot.chats[key]!.completed = true }
        case .text, .print, .inputRequest, .toolCall, .toolCallComplete, .toolCallDismiss, .toolResponse, .usageDelta, .usageSummary,
             .runComplete, .customEvent, .attachmentUploaded, .ackInput, .modeChanged, .contextSwitched, .workflowStarted,
             .generalSessionCreated, .workflowBatchStarted, .ping:
            break
        }
    }

    /// An indexed event: applied if it is the next one, ignored if already applied, and a
    /// gap makes the client ask for a resume instead of applying out of order.
    mutating func apply(_ envelope: RuntimeEnvelope, text: String, key: String, now: Instant, _ out: inout [AgentClientEffect]) {
        guard let index = envelope.index else { return }
        let last = snapshot.chats[key]!.lastIndex
        if index <= last {
            stats.duplicatesIgnored += 1
            return
        }
        guard index == last + 1 else {
            stats.gaps += 1
            if socket == .open && !resumeAsked { askResume(snapshot.chats[key]!, now: now, &out) }
            return
        }
        let replayed = envelope.data["replay"]?.boolValue == true
        if replayed { stats.replayed += 1 }
        var event = envelope
        event.data["replay"] = nil
        snapshot.chats[key]!.timeline.append(RuntimeEnvelope.canonicalText(of: text, envelope))
        snapshot.chats[key]!.lastIndex = index
        stats.applied += 1
        out.append(.applied(event, replayed: replayed))
        let data = event.data
        switch event.type {
        case .toolCall:
            guard let id = data["tool_call_id"]?.stringValue else { break }
            let component = data["component_type"]?.stringValue ?? ""
            let awaits = data["awaiting_response"]?.boolValue == true
            if awaits { snapshot.chats[key]!.awaitingToolCall = id }
            out.append(.toolCall(ToolCallPrompt(id: id, name: data["tool_name"]?.stringValue ?? "",
                                                renderer: config.renderers.contains(component) ? .native(component) : .fallback(component: component),
                                                display: data["display"]?.stringValue ?? "inline", awaitsResponse: awaits,
                                                payload: data["payload"] ?? .null)))
        case .toolResponse:
            guard let id = data["tool_call_id"]?.stringValue else { break }
            if snapshot.chats[key]!.awaitingToolCall == id { snapshot.chats[key]!.awaitingToolCall = nil }
            out.append(.toolCallResolved(id: id))
        case .inputRequest:
            snapshot.chats[key]!.inputRequested = true
            out.append(.inputRequested)
        case .text:
            if data["role"]?.stringValue == "user" { snapshot.chats[key]!.inputRequested = false }
        case .runComplete:
            snapshot.chats[key]!.completed = true
            snapshot.chats[key]!.inputRequested = false
            out.append(.runCompleted(summary: data["summary"]?.stringValue ?? ""))
        case .chatMeta, .print, .inputAck, .toolCallComplete, .toolCallDismiss, .usageDelta, .usageSummary, .resumeBoundary, .customEvent,
             .error, .attachmentUploaded, .ackInput, .ackToolCallResponse, .modeChanged, .contextSwitched, .workflowStarted,
             .generalSessionCreated, .workflowBatchStarted, .ping:
            break
        }
    }

    /// The end of a replay: the client is in step, or it diverged and starts over.
    mutating func boundary(_ envelope: RuntimeEnvelope, key: String, now: Instant, _ out: inout [AgentClientEffect]) {
        guard resumeAsked else { return }
        resumeAsked = false
        timers.cancel(.resume)
        if envelope.data["resume_state"]?.stringValue == "diverged" {
            // The runtime never sent what this device thinks it applied: its replay is the truth.
            stats.divergences += 1
            var chat = snapshot.chats[key]!
            chat.timeline = []
            chat.lastIndex = -1
            chat.awaitingToolCall = nil
            chat.inputRequested = false
            snapshot.chats[key] = chat
            askResume(chat, now: now, &out)
            return
        }
        let wasResuming = socket == .resuming
        socket = .open
        reconnectAttempts = 0
        let chat = snapshot.chats[key]!
        out.append(.resumed(replayed: Int(envelope.data["replayed_messages"]?.numberValue ?? 0), lastIndex: chat.lastIndex))
        if wasResuming { flush(key: key, now: now, &out) }
    }

    /// An ack: the action is done.
    mutating func settle(_ id: String?, key: String) {
        guard let id else {
            if !awaitingReply.isEmpty { awaitingReply.removeFirst() }
            return
        }
        awaitingReply.removeAll { $0 == id }
        snapshot.chats[key]!.pending.removeAll { $0.id == id }
    }

    // MARK: Actions

    /// An input or tool response: queued (stored), and sent now if the socket is open.
    mutating func enqueue(_ action: PendingAction, now: Instant, _ out: inout [AgentClientEffect]) {
        guard let key = snapshot.activeChat, snapshot.chats[key] != nil else {
            out.append(.surfaced(AgentClientError(message: "Start a conversation first.", code: "NO_CHAT")))
            return
        }
        guard !snapshot.chats[key]!.completed else {
            out.append(.surfaced(.runtime(RuntimeErrorCode.chatCompleted.rawValue)))
            return
        }
        guard snapshot.chats[key]!.pending.count < config.pendingLimit else {
            out.append(.surfaced(AgentClientError(message: "Too many messages are waiting to be sent.", code: "QUEUE_FULL")))
            return
        }
        if action.response != nil, snapshot.chats[key]!.pending.contains(where: { $0.id == action.id }) { return }
        snapshot.chats[key]!.pending.append(action)
        if action.text != nil { snapshot.chats[key]!.inputRequested = false }
        if socket == .open { send(action, key: key, &out) }
    }

    /// Every queued action, in order (after a resume).
    mutating func flush(key: String, now: Instant, _ out: inout [AgentClientEffect]) {
        for action in snapshot.chats[key]!.pending where !awaitingReply.contains(action.id) {
            stats.actionsResent += 1
            send(action, key: key, &out)
        }
    }

    mutating func send(_ action: PendingAction, key: String, _ out: inout [AgentClientEffect]) {
        let chatID = snapshot.chats[key]!.chatID
        let message: ClientMessage
        if let text = action.text {
            message = .userInput(chatID: chatID, text: text, context: nil, clientMessageID: action.id)
        } else {
            message = .toolCallResponse(toolCallID: action.id, response: (try? JSONValue.parse(action.response ?? "{}")) ?? [:])
        }
        awaitingReply.append(action.id)
        out.append(.socketSend(message.text))
    }

    /// `POST /api/chat/upload` to the active chat.
    mutating func upload(filename: String, contentType: String, bytes: [UInt8], intent: String?, now: Instant, _ out: inout [AgentClientEffect]) {
        guard let chat = activeChat else {
            out.append(.surfaced(AgentClientError(message: "Start a conversation first.", code: "NO_CHAT")))
            return
        }
        var parts = [Multipart.Part(name: "appId", data: Array(snapshot.appID.utf8)), Multipart.Part(name: "userId", data: Array(snapshot.userID.utf8)),
                     Multipart.Part(name: "chatId", data: Array(chat.chatID.utf8))]
        if let intent { parts.append(Multipart.Part(name: "intent", data: Array(intent.utf8))) }
        parts.append(Multipart.Part(name: "file", filename: filename, contentType: contentType, data: bytes))
        let (body, type) = Multipart.encode(parts, boundary: "fleetlab-" + snapshot.generator.token(12))
        request(.upload, HTTPRequestMessage(method: "POST", path: RuntimePaths.upload, headers: ["content-type": type], body: body), now: now, &out)
    }

    /// The active chat's messages as a person reads them: chunks joined by message id.
    public func messages() -> [(agent: String, text: String)] {
        var order: [String] = []
        var byID: [String: (agent: String, text: String)] = [:]
        for text in activeChat?.timeline ?? [] {
            guard let event = RuntimeEnvelope(text: text), event.type == .text else { continue }
            let id = event.data["message_id"]?.stringValue ?? "i\(event.index ?? 0)"
            if byID[id] == nil {
                order.append(id)
                byID[id] = (event.data["agent"]?.stringValue ?? "", "")
            }
            byID[id]!.text += event.data["content"]?.stringValue ?? ""
        }
        return order.map { byID[$0]! }
    }
}
