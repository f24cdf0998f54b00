public import DesktopBridgeWire
public import LabKernel

/// A local agent program playing one turn, spoken to in current ACP over its stdin and
/// stdout (one JSON-RPC message per line), as the desktop app runs Codex or Claude Code
/// through their ACP adapters: `initialize` (id 1), `session/new` (id 2), `session/prompt`
/// (id 3); its `session/update` notifications are relayed to the phones, its prompt
/// result ends the turn. Requests it makes of the desktop (`fs/*`, permissions) are
/// refused with -32601: the program has the desktop's filesystem itself. One program per
/// turn, stopped when the turn ends.
struct AgentProgram: Sendable {
    let run: Int
    let sessionID: String
    let prompt: String
    let cwd: String
    var agentSession: String?

    static let initialize = RPCMessage.request(id: .number(1), method: "initialize", params: [
        "protocolVersion": 1,
        "clientCapabilities": ["fs": ["readTextFile": false, "writeTextFile": false], "terminal": false],
        "clientInfo": ["name": "fleetlab-desktop", "version": "0.1.0"],
    ])
}

extension DesktopBridge {
    /// A line the program wrote.
    public mutating func agentOutput(run: Int, line: String, now: Instant) -> DesktopReply {
        var reply = DesktopReply()
        guard var program = programs[run], !line.allSatisfy({ $0 == " " || $0 == "\r" }) else { return reply }
        guard case .single(.message(let message)) = RPCFrame(text: line) else {
            failProgram(program, "the agent program wrote something that is not a JSON-RPC message", now: now, &reply)
            return reply
        }
        switch message {
        case .response(.number(1), _):
            reply.operations.append(.programInput(run: run, line: RPCMessage.request(id: .number(2), method: "session/new",
                                                                                     params: ["cwd": .string(program.cwd), "mcpServers": []]).text))
        case .response(.number(2), let result):
            guard let session = result["sessionId"]?.stringValue else {
                failProgram(program, "the agent program's session/new result has no sessionId", now: now, &reply)
                return reply
            }
            program.agentSession = session
            programs[run] = program
            let prompt: JSONValue = ["sessionId": .string(session), "prompt": [["type": "text", "text": .string(program.prompt)]]]
            reply.operations.append(.programInput(run: run, line: RPCMessage.request(id: .number(3), method: "session/prompt", params: prompt).text))
        case .response(.number(3), let result):
            let reason = result["stopReason"]?.stringValue ?? "end_turn"
            finish(program.sessionID, stopReason: ["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"].contains(reason) ? reason : "end_turn",
                   now: now, &reply)
        case .response:
            break  // an answer to nothing the desktop asked
        case .failure(_, let error):
            failProgram(program, "the agent program refused: \(error.message.prefix(200))", now: now, &reply)
        case .notification(let method, let params):
            guard method == "session/update", let params, params["sessionId"]?.stringValue == program.agentSession,
                  let update = params["update"].flatMap({ SessionUpdate(json: $0, dialect: .current) }) else { break }
            broadcast(program.sessionID, update, now: now, &reply)
        case .request(let id, let method, _):
            reply.operations.append(.programInput(run: run, line: RPCMessage.failure(id: id, error: .methodNotFound(method)).text))
        }
        return reply
    }

    /// The program ended (on its own, killed, or never started).
    public mutating func agentExited(run: Int, status: Int32, now: Instant) -> DesktopReply {
        var reply = DesktopReply()
        guard let program = programs[run] else { return reply }
        failProgram(program, status == -1 ? "the agent program could not be started" : "the agent program exited (status \(status)) before its turn ended",
                    now: now, &reply)
        return reply
    }

    /// Ends a program's turn with an error: the waiting prompt gets -32603.
    mutating func failProgram(_ program: AgentProgram, _ message: String, now: Instant, _ reply: inout DesktopReply) {
        let destination = turns[program.sessionID]?.promptReply
        turns[program.sessionID]?.promptReply = nil
        finish(program.sessionID, stopReason: "refusal", now: now, &reply)
        if let destination { answer(destination, .failure(id: Self.id(of: destination), error: .internalError(message)), &reply) }
    }
}
