public import DesktopBridgeWire
public import LabKernel

extension DesktopBridge {
    /// A running turn: who waits for its end (a current-dialect prompt), and what plays it.
    struct Turn: Sendable {
        var promptReply: ReplyTo?
        var steps: [DesktopScript.Step] = []
        var next = 0
        /// The next step's delay has been waited for.
        var waited = false
        var program: Int?
    }

    /// Every method after `initialize`: its result now, or nil when it is answered later.
    mutating func call(_ method: String, params: ACPParams, reply destination: ReplyTo, connection: Int, now: Instant,
                       _ reply: inout DesktopReply) throws(RPCError) -> JSONValue? {
        let d = params.dialect
        switch method {
        case "session/new": return try newSession(params, now: now, &reply)
        case "session/prompt": return try prompt(params, reply: destination, now: now, &reply)
        case "session/cancel":
            let session = try params.sessionID
            guard state.sessions[session] != nil else { throw RPCError.notFound("no session \(session.prefix(64))") }
            return ["status": cancel(session, now: now, &reply) ? "cancelled" : "no_active_session"]
        case "session/set_mode":
            let session = try existing(params)
            let mode = try params.string("modeId", max: 64)
            guard config.modes.contains(where: { $0.id == mode }) else {
                throw RPCError.invalidParams("no mode '\(mode.prefix(64))'; modes: \(config.modes.map(\.id).joined(separator: ", "))", field: d.key("modeId"))
            }
            state.sessions[session.id]?.mode = mode
            if let record = state.sessions[session.id] { reply.changes.append(.session(record)) }
            broadcast(session.id, .currentModeUpdate(mode), now: now, &reply)
            return .object([:])
        case "tinyvex/history.recentSessions", "tinyvex/history.sessionTimeline", "tinyvex/history.deleteSession",
             "tinyvex/history.setSessionTitle", "tinyvex/history.getSessionTitle", "tinyvex/history.clearSessionTitle":
            return try history(method, params, now: now, &reply)
        case "fs/read_text_file", "fs/write_text_file", "terminal/run":
            try workspaceCall(method, params, reply: destination, &reply)
            return nil
        default:
            throw RPCError.methodNotFound(method)
        }
    }

    /// A session named by the params that exists.
    func existing(_ params: ACPParams) throws(RPCError) -> SessionRecord {
        let id = try params.sessionID
        guard let record = state.sessions[id] else { throw RPCError.notFound("no session \(id.prefix(64))") }
        return record
    }

    /// `session/new {cwd?, mcpServers?, modeId?}`: a session in the workspace.
    mutating func newSession(_ params: ACPParams, now: Instant, _ reply: inout DesktopReply) throws(RPCError) -> JSONValue {
        let d = params.dialect
        let cwd: String
        if let asked = try params.optionalString("cwd") {
            guard asked.hasPrefix("/"), let resolved = WorkspacePath.resolve(asked, root: config.workspace, cwd: config.workspace) else {
                throw RPCError.invalidParams("'cwd' must be an absolute path inside the workspace \(config.workspace)", field: "cwd")
            }
            cwd = resolved
        } else if d == .current {
            throw RPCError.invalidParams("'cwd' is required (an absolute path inside the workspace \(config.workspace))", field: "cwd")
        } else {
            cwd = config.workspace
        }
        if let servers = params.value("mcpServers"), servers.arrayValue == nil {
            throw RPCError.invalidParams("'\(d.key("mcpServers"))' must be a list", field: d.key("mcpServers"))
        }
        let mode = try params.optionalString("modeId", max: 64) ?? config.modes[0].id
        guard config.modes.contains(where: { $0.id == mode }) else {
            throw RPCError.invalidParams("no mode '\(mode.prefix(64))'", field: d.key("modeId"))
        }
        let id = "sess_" + generator.token(12)
        let at = wallClock.unixMilliseconds(at: now)
        let record = SessionRecord(id: id, cwd: cwd, mode: mode, createdAt: at, lastAt: at)
        state.apply(.session(record))
        reply.changes.append(.session(record))
        broadcast(id, .currentModeUpdate(mode), now: now, &reply)
        var result: [String: JSONValue] = ["sessionId": .string(id)]
        if d == .current {
            result["modes"] = d.object(["currentModeId": .string(mode),
                                        "availableModes": .array(config.modes.map { d.object(["id": .string($0.id), "name": .string($0.name)]) })])
        }
        return d.object(result)
    }

    /// `session/prompt {sessionId, prompt}`: the user's words go into the history, then
    /// the session's provider plays the turn. Legacy phones get `{status: "started"}` at
    /// once; current ones `{stopReason}` when the turn ends.
    mutating func prompt(_ params: ACPParams, reply destination: ReplyTo, now: Instant, _ reply: inout DesktopReply) throws(RPCError) -> JSONValue? {
        let session = try existing(params)
        let text = try PromptText.read(params.value("prompt"), dialect: params.dialect)
        guard turns[session.id] == nil else {
            throw RPCError(code: RPCError.sessionBusyCode, message: "Session busy: a turn is running; cancel it or wait for its end")
        }
        guard let mode = config.modes.first(where: { $0.id == session.mode }) else { throw RPCError.internalError("the session's mode is gone") }
        var turn = Turn(promptReply: params.dialect == .current ? destination : nil)
        switch mode.provider {
        case .unavailable: throw RPCError(code: RPCError.methodNotFoundCode, message: "\(mode.name) is not available. Please install the required CLI.")
        case .scripted:
            let call = "call_\(nextToolCall)"
            nextToolCall += 1
            turn.steps = config.script.steps(prompt: text, cwd: session.cwd, toolCallID: call)
        case .program(let argv):
            let run = nextRun
            nextRun += 1
            programs[run] = AgentProgram(run: run, sessionID: session.id, prompt: text, cwd: session.cwd)
            turn.program = run
            reply.operations.append(.startProgram(run: run, argv: argv, cwd: session.cwd))
            reply.operations.append(.programInput(run: run, line: AgentProgram.initialize.text))
            timers.arm(.program(run), at: now + config.programTimeout)
        }
        stats.prompts += 1
        turns[session.id] = turn
        broadcast(session.id, .userMessageChunk(text), now: now, &reply)
        if turn.program == nil { play(session.id, now: now, &reply) }
        return params.dialect == .current ? nil : ["status": "started"]
    }

    /// Plays a scripted turn's steps that are due, and arms the timer for the next one
    /// (called when the turn starts and when that timer fires).
    mutating func play(_ session: String, now: Instant, _ reply: inout DesktopReply) {
        while var turn = turns[session], turn.program == nil {
            guard turn.next < turn.steps.count else {
                finish(session, stopReason: "end_turn", now: now, &reply)
                return
            }
            let step = turn.steps[turn.next]
            if step.after > .zero && !turn.waited {
                turn.waited = true
                turns[session] = turn
                timers.arm(.turn(session), at: now + step.after)
                return
            }
            turn.waited = false
            turn.next += 1
            turns[session] = turn
            broadcast(session, step.update, now: now, &reply)
        }
    }

    /// Timers due: scripted steps, program deadlines.
    public mutating func expire(now: Instant) -> DesktopReply {
        var reply = DesktopReply()
        for timer in timers.popExpired(now: now) {
            switch timer {
            case .turn(let session): play(session, now: now, &reply)
            case .program(let run):
                guard let program = programs[run] else { continue }
                failProgram(program, "the agent program did not finish its turn within \(config.programTimeout)", now: now, &reply)
            }
        }
        return reply
    }

    /// Ends a turn: the waiting prompt hears `stopReason`.
    mutating func finish(_ session: String, stopReason: String, now: Instant, _ reply: inout DesktopReply) {
        guard let turn = turns.removeValue(forKey: session) else { return }
        timers.cancel(.turn(session))
        if let run = turn.program {
            programs[run] = nil
            timers.cancel(.program(run))
            reply.operations.append(.stopProgram(run: run))
        }
        if let destination = turn.promptReply {
            answer(destination, .response(id: Self.id(of: destination), result: ["stopReason": .string(stopReason)]), &reply)
        }
    }

    /// Cancels a session's running turn; false when none runs.
    mutating func cancel(_ session: String, now: Instant, _ reply: inout DesktopReply) -> Bool {
        guard turns[session] != nil else { return false }
        stats.cancelled += 1
        finish(session, stopReason: "cancelled", now: now, &reply)
        return true
    }

    /// Appends an update to the session's history, then sends it to every initialized
    /// phone in its dialect.
    mutating func broadcast(_ session: String, _ update: SessionUpdate, now: Instant, _ reply: inout DesktopReply) {
        guard var record = state.sessions[session] else { return }
        let at = wallClock.unixMilliseconds(at: now)
        let entry = HistoryEntry(seq: (state.history[session]?.last?.seq ?? 0) + 1, at: at, update: update)
        record.lastAt = at
        state.apply(.session(record))
        state.apply(.event(sessionID: session, entry))
        reply.changes.append(.event(sessionID: session, entry))
        reply.changes.append(.session(record))
        stats.updates += 1
        let notification = SessionNotification(sessionID: session, seq: entry.seq, update: update)
        var texts: [ACPDialect: String] = [:]
        for id in connections.keys.sorted() {
            guard let dialect = connections[id]?.dialect else { continue }
            if texts[dialect] == nil { texts[dialect] = notification.message(dialect).text }
            reply.outputs.append(.send(connection: id, text: texts[dialect]!))
        }
    }
}

/// The scripted provider: a deterministic turn shaped like a coding agent's (a thought,
/// a plan, a tool call and its result, then the answer streamed in chunks). Its words
/// follow the prompt's length, never its words.
public struct DesktopScript: Sendable, Equatable {
    public var think: TimeSpan = .milliseconds(300)
    public var toolTime: TimeSpan = .milliseconds(200)
    public var every: TimeSpan = .milliseconds(40)
    public var wordsPerChunk = 3

    public init() {}

    public struct Step: Sendable, Equatable {
        public var after: TimeSpan
        public var update: SessionUpdate
    }

    public static func answer(words: Int) -> String {
        "I looked at your \(words)-word request in the workspace. Here is what I found and what I would change next, "
            + "streamed in small pieces so the phone can show it as it comes."
    }

    public func steps(prompt: String, cwd: String, toolCallID: String) -> [Step] {
        let words = prompt.split(whereSeparator: { $0 == " " || $0 == "\n" }).count
        var steps = [
            Step(after: think, update: .agentThoughtChunk("Reading the request and the workspace.")),
            Step(after: .zero, update: .plan([PlanEntry(content: "Look at the workspace", priority: "high", status: "in_progress"),
                                              PlanEntry(content: "Draft the answer"), PlanEntry(content: "Check it", priority: "low")])),
            Step(after: .zero, update: .toolCall(id: toolCallID, title: "List the workspace", kind: "read", input: ["path": .string(cwd)])),
            Step(after: toolTime, update: .toolCallUpdate(id: toolCallID, status: .completed, output: "listed \(cwd)")),
        ]
        let answer = Self.answer(words: words).split(separator: " ", omittingEmptySubsequences: false)
        var index = 0
        while index < answer.count {
            let piece = answer[index..<min(index + wordsPerChunk, answer.count)].joined(separator: " ") + (index + wordsPerChunk < answer.count ? " " : "")
            steps.append(Step(after: index == 0 ? .zero : every, update: .agentMessageChunk(piece)))
            index += wordsPerChunk
        }
        return steps
    }
}
