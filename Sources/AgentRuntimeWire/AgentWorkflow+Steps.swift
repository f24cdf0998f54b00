import LabKernel

extension AgentWorkflow {
    /// One step as written: an object with exactly one of `think`, `say`, `print`,
    /// `tool_call`, `usage`, `custom`, `complete`, and that step's options.
    static func step(_ value: JSONValue, path: String) throws(AgentWorkflowError) -> AgentStep {
        func fail(_ key: String, _ message: String) -> AgentWorkflowError {
            AgentWorkflowError(path: key.isEmpty ? path : "\(path).\(key)", message: message)
        }
        guard case .object(let object) = value else { throw fail("", "a step is an object such as {say: \"Hello\"}") }
        let kinds = ["think", "say", "print", "tool_call", "usage", "custom", "complete"]
        let present = kinds.filter { object[$0] != nil }
        guard present.count == 1, let kind = present.first else {
            throw fail("", "exactly one of \(kinds.joined(separator: ", ")) per step, found \(present.isEmpty ? "none" : present.joined(separator: " and "))")
        }
        let options: [String: Set<String>] = [
            "think": [], "say": ["agent", "words_per_chunk", "every"], "print": ["agent"], "tool_call": [], "usage": [], "custom": [], "complete": [],
        ]
        if let extra = object.keys.sorted().first(where: { $0 != kind && !(options[kind] ?? []).contains($0) }) {
            throw fail(extra, "not an option of a \(kind) step")
        }
        let agent = object["agent"]?.stringValue ?? "Assistant"
        switch kind {
        case "think":
            return .think(try duration(object["think"], path: "\(path).think") ?? .zero)
        case "say":
            guard let text = object["say"]?.stringValue, !text.isEmpty, text.utf8.count <= maxTextBytes else {
                throw fail("say", "the text to stream (1 to \(maxTextBytes) bytes)")
            }
            let words = object["words_per_chunk"]?.numberValue ?? 3
            guard words >= 1, words <= 1_000, words.rounded() == words else { throw fail("words_per_chunk", "an integer from 1 to 1000") }
            let every = try duration(object["every"], path: "\(path).every") ?? .milliseconds(40)
            return .say(agent: agent, text: text, wordsPerChunk: Int(words), every: every)
        case "print":
            guard let text = object["print"]?.stringValue, text.utf8.count <= maxTextBytes else { throw fail("print", "a string") }
            return .print(agent: agent, text: text)
        case "tool_call":
            return .toolCall(try toolCall(object["tool_call"]!, path: "\(path).tool_call"))
        case "usage":
            guard case .object(let usage) = object["usage"]!,
                  let prompt = usage["prompt_tokens"]?.numberValue, let completion = usage["completion_tokens"]?.numberValue,
                  prompt >= 0, completion >= 0, prompt < 1e9, completion < 1e9 else {
                throw fail("usage", "{prompt_tokens: N, completion_tokens: N}")
            }
            return .usage(promptTokens: Int(prompt), completionTokens: Int(completion))
        case "custom":
            guard case .object(let custom) = object["custom"]!, let name = custom["kind"]?.stringValue, !name.isEmpty else {
                throw fail("custom", "{kind: NAME, payload: {…}}")
            }
            return .custom(kind: name, payload: custom["payload"] ?? .object([:]))
        default:
            let summary: String?
            switch object["complete"]! {
            case .string(let text): summary = text
            case .bool(true): summary = ""
            case .object(let o): summary = o["summary"]?.stringValue ?? ""
            default: summary = nil
            }
            guard let summary else { throw fail("complete", "a summary string, true, or {summary: …}") }
            return .complete(summary: summary)
        }
    }

    static func toolCall(_ value: JSONValue, path: String) throws(AgentWorkflowError) -> AgentToolCallStep {
        func fail(_ key: String, _ message: String) -> AgentWorkflowError { AgentWorkflowError(path: "\(path).\(key)", message: message) }
        guard case .object(let object) = value else { throw AgentWorkflowError(path: path, message: "{name, component, display, payload}") }
        let known: Set<String> = ["name", "agent", "component", "display", "awaits_response", "payload"]
        if let extra = object.keys.sorted().first(where: { !known.contains($0) }) { throw fail(extra, "unknown key") }
        guard let name = object["name"]?.stringValue, isValidName(name) else { throw fail("name", "the tool's name (a-z, 0-9, '-', '_')") }
        guard let component = object["component"]?.stringValue, isValidName(component) else {
            throw fail("component", "the UI component id the app renders, such as ActionPlan")
        }
        let display = object["display"]?.stringValue ?? "inline"
        guard ["composer", "inline", "artifact"].contains(display) else { throw fail("display", "composer, inline or artifact") }
        guard object["awaits_response"].map({ $0.boolValue != nil }) ?? true else { throw fail("awaits_response", "true or false") }
        return AgentToolCallStep(name: name, agent: object["agent"]?.stringValue ?? "Assistant", component: component, display: display,
                                 awaitsResponse: object["awaits_response"]?.boolValue ?? true, payload: object["payload"] ?? .object([:]))
    }
}

extension AgentStep {
    /// The chunks a `say` streams: `wordsPerChunk` words each, separators kept with the
    /// word before them, so the chunks joined are the text.
    public static func chunks(of text: String, wordsPerChunk: Int) -> [String] {
        var chunks: [String] = []
        var current = ""
        var words = 0
        var inWord = false
        for character in text {
            let space = character == " " || character == "\n" || character == "\t"
            if !space && !inWord {
                if words == wordsPerChunk {
                    chunks.append(current)
                    current = ""
                    words = 0
                }
                words += 1
            }
            inWord = !space
            current.append(character)
        }
        if !current.isEmpty { chunks.append(current) }
        return chunks
    }
}
