public import LabKernel

/// A scripted agent workflow (`simulations/agent-workflows/*.yaml|json`): what
/// `GET /api/workflows` lists and what the server's scripted backend plays.
///
/// A workflow is a list of turns. The first user input of a chat plays turn 0, the next
/// turn 1, and so on; inputs past the last turn replay the last one. An `AgentDriven`
/// workflow plays turn 0 when its chat's first socket connects, before any input. A
/// turn is a list of steps played in order; a turn that does not end the run ends by
/// asking for the user's next input (`chat.input_request`). Scripts are data, so a run
/// depends only on them, the inputs and the times they arrive: no model, no randomness.
public struct AgentWorkflow: Sendable, Equatable {
    public var name: String
    public var description: String
    public var entryPoint: Bool
    /// `UserDriven` (waits for the first input) or `AgentDriven` (plays turn 0 on connect).
    public var startupMode: StartupMode
    public var initialMessageToUser: String?
    /// The agents the workflow names (listed in discovery).
    public var agents: [String]
    /// Component ids its UI tool calls render (listed in discovery, so an app can check
    /// it has a renderer for each before it starts).
    public var components: [String]
    public var backend: Backend
    public var turns: [[AgentStep]]

    public enum StartupMode: String, Sendable, Equatable {
        case userDriven = "UserDriven"
        case agentDriven = "AgentDriven"
    }

    /// Who produces the agent's answers.
    public enum Backend: Sendable, Equatable {
        /// The turns, played by the server core.
        case scripted
        /// A local program, run once per user input with the input on stdin; its stdout
        /// streams back as `chat.text` (the live driver runs it; the simulator cannot).
        case command(argv: [String], timeout: TimeSpan)
    }

    public init(name: String, description: String = "", entryPoint: Bool = false, startupMode: StartupMode = .userDriven,
                initialMessageToUser: String? = nil, agents: [String] = [], components: [String] = [], backend: Backend = .scripted,
                turns: [[AgentStep]]) {
        self.name = name
        self.description = description
        self.entryPoint = entryPoint
        self.startupMode = startupMode
        self.initialMessageToUser = initialMessageToUser
        self.agents = agents
        self.components = components
        self.backend = backend
        self.turns = turns
    }

    /// The steps of the turn that answers input number `turn` (0-based).
    public func steps(forTurn turn: Int) -> [AgentStep] {
        guard !turns.isEmpty else { return [] }
        return turns[min(turn, turns.count - 1)]
    }

    /// What discovery lists for it: Mozaiks' merged config, keyed by workflow name.
    public var discoveryJSON: JSONValue {
        var object: [String: JSONValue] = [
            "workflow_name": .string(name), "description": .string(description), "entry_point": .bool(entryPoint),
            "startup_mode": .string(startupMode.rawValue), "human_in_the_loop": true,
            "agents": .array(agents.map { ["name": .string($0)] }),
            "visual_agents": .array(agents.map { .string($0) }),
            "ui_components": .array(components.map { .string($0) }),
            "backend": .string(backendName),
            "max_turns": .number(Double(turns.count)),
        ]
        if let initialMessageToUser { object["initial_message_to_user"] = .string(initialMessageToUser) }
        return .object(object)
    }

    public var backendName: String {
        switch backend {
        case .scripted: return "scripted"
        case .command: return "command"
        }
    }
}

/// One step of a scripted turn.
public enum AgentStep: Sendable, Equatable {
    /// Nothing happens for this long (the model "thinking").
    case think(TimeSpan)
    /// A message streamed as `chat.text` chunks of `wordsPerChunk` words, one every
    /// `every`. `{input}` in the text becomes the user's input, `{response}` the last
    /// tool-call response's text.
    case say(agent: String, text: String, wordsPerChunk: Int, every: TimeSpan)
    /// A `chat.print` line (tool output the agent shows).
    case print(agent: String, text: String)
    /// A UI tool call; with `awaitsResponse` the turn waits for `tool_call_response`.
    case toolCall(AgentToolCallStep)
    /// `chat.usage_delta` with these token counts.
    case usage(promptTokens: Int, completionTokens: Int)
    /// `chat.custom_event` with this kind and payload.
    case custom(kind: String, payload: JSONValue)
    /// The run ends: `chat.usage_summary`, then `chat.run_complete`; the chat is completed.
    case complete(summary: String)
}

public struct AgentToolCallStep: Sendable, Equatable {
    public var name: String
    public var agent: String
    /// The UI component id the client renders (`ActionPlan`, `AgentAPIKeyInput`, …).
    public var component: String
    /// `composer` (the chat's text box answers it), `inline` or `artifact`.
    public var display: String
    public var awaitsResponse: Bool
    public var payload: JSONValue

    public init(name: String, agent: String, component: String, display: String, awaitsResponse: Bool, payload: JSONValue) {
        self.name = name
        self.agent = agent
        self.component = component
        self.display = display
        self.awaitsResponse = awaitsResponse
        self.payload = payload
    }
}

/// Why a workflow file was refused, with the path of the offending key.
public struct AgentWorkflowError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var message: String
    public var description: String { "\(path): \(message)" }
}

extension AgentWorkflow {
    /// Bounds that keep one chat's transcript and timers finite.
    public static let maxTurns = 100
    public static let maxStepsPerTurn = 200
    public static let maxTextBytes = 64 * 1024
    public static let maxThink: TimeSpan = .minutes(10)

    /// Reads a definition (the JSON form of the YAML or JSON file), checking every rule.
    public init(parsing value: JSONValue) throws(AgentWorkflowError) {
        func fail(_ path: String, _ message: String) -> AgentWorkflowError { AgentWorkflowError(path: path, message: message) }
        guard case .object(let object) = value else { throw fail("", "a workflow is an object") }
        let known: Set<String> = ["name", "description", "entry_point", "startup_mode", "initial_message_to_user", "agents", "backend", "turns"]
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw fail(unknown, "unknown key; expected one of: \(known.sorted().joined(separator: ", "))")
        }
        guard let name = object["name"]?.stringValue, Self.isValidName(name) else {
            throw fail("name", "required: 1-64 characters of a-z, A-Z, 0-9, '-' and '_'")
        }
        self.name = name
        description = try Self.optionalString(object, "description") ?? ""
        guard object["entry_point"].map({ $0.boolValue != nil }) ?? true else { throw fail("entry_point", "true or false") }
        entryPoint = object["entry_point"]?.boolValue ?? false
        let mode = try Self.optionalString(object, "startup_mode") ?? StartupMode.userDriven.rawValue
        guard let startupMode = StartupMode(rawValue: mode) else { throw fail("startup_mode", "UserDriven or AgentDriven, found '\(mode)'") }
        self.startupMode = startupMode
        initialMessageToUser = try Self.optionalString(object, "initial_message_to_user")
        agents = try (object["agents"]?.arrayValue ?? []).enumerated().map { (index, item) throws(AgentWorkflowError) in
            guard let agent = item.stringValue, !agent.isEmpty else { throw fail("agents[\(index)]", "an agent's name (a string)") }
            return agent
        }
        backend = try Self.backend(object["backend"])
        guard let turnList = object["turns"]?.arrayValue else {
            if case .command = backend { turns = []; components = []; return }
            throw fail("turns", "required: a list of turns, each a list of steps")
        }
        guard !turnList.isEmpty, turnList.count <= Self.maxTurns else { throw fail("turns", "1 to \(Self.maxTurns) turns") }
        var turns: [[AgentStep]] = []
        for (t, turn) in turnList.enumerated() {
            guard let steps = turn.arrayValue, !steps.isEmpty, steps.count <= Self.maxStepsPerTurn else {
                throw fail("turns[\(t)]", "a list of 1 to \(Self.maxStepsPerTurn) steps")
            }
            turns.append(try steps.enumerated().map { (s, step) throws(AgentWorkflowError) in try Self.step(step, path: "turns[\(t)][\(s)]") })
        }
        self.turns = turns
        var components: [String] = []
        for case .toolCall(let call) in turns.joined() where !components.contains(call.component) { components.append(call.component) }
        self.components = components
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_"
        }
    }

    static func optionalString(_ object: [String: JSONValue], _ key: String) throws(AgentWorkflowError) -> String? {
        guard let value = object[key], value != .null else { return nil }
        guard let text = value.stringValue else { throw AgentWorkflowError(path: key, message: "a string, found \(value.kindName)") }
        return text
    }

    static func backend(_ value: JSONValue?) throws(AgentWorkflowError) -> Backend {
        guard let value, value != .null, value != "scripted" else { return .scripted }
        guard case .object(let object) = value, let argv = object["command"]?.arrayValue else {
            throw AgentWorkflowError(path: "backend", message: "'scripted', or {command: [program, args…], timeout: 60s}")
        }
        let words = argv.compactMap(\.stringValue)
        guard !words.isEmpty, words.count == argv.count, !words[0].isEmpty else {
            throw AgentWorkflowError(path: "backend.command", message: "a non-empty list of strings: the program and its arguments")
        }
        let timeout = try duration(object["timeout"], path: "backend.timeout") ?? .seconds(60)
        return .command(argv: words, timeout: timeout)
    }

    static func duration(_ value: JSONValue?, path: String) throws(AgentWorkflowError) -> TimeSpan? {
        guard let value, value != .null else { return nil }
        let span: TimeSpan?
        switch value {
        case .string(let text): span = TimeSpan(text)
        case .number(let seconds): span = seconds >= 0 && seconds < 1e6 ? .approximately(seconds: seconds) : nil
        default: span = nil
        }
        guard let span, span >= .zero, span <= maxThink else {
            throw AgentWorkflowError(path: path, message: "a duration between 0 and \(maxThink) such as 800ms or 2s")
        }
        return span
    }
}

extension AgentWorkflow {
    /// The workflow `fleetlab serve` offers when it has no workflow folder: a short
    /// scripted assistant with a streamed answer and a tool call.
    public static let demo = AgentWorkflow(
        name: "assistant", description: "A scripted assistant (fleetlab's built-in demo workflow)", entryPoint: true,
        initialMessageToUser: "Hello! What can I do for you?", agents: ["Assistant"], components: ["ConfirmAction"],
        turns: [[
            .think(.milliseconds(400)),
            .say(agent: "Assistant", text: "You asked: {input}. Here is what I would do.", wordsPerChunk: 3, every: .milliseconds(50)),
            .usage(promptTokens: 120, completionTokens: 30),
            .toolCall(AgentToolCallStep(name: "confirm", agent: "Assistant", component: "ConfirmAction", display: "inline", awaitsResponse: true,
                                        payload: ["question": "Go ahead?"])),
            .say(agent: "Assistant", text: "Understood: {response}.", wordsPerChunk: 3, every: .milliseconds(50)),
        ]])
}
