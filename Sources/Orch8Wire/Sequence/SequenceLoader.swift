public import LabKernel

/// One thing wrong with a sequence: which block, where in the document, which rule.
public struct SequenceProblem: Sendable, Equatable, CustomStringConvertible {
    /// The block the problem is in; nil for the sequence itself.
    public var blockID: String?
    /// Where in the JSON, e.g. `blocks[3].routes[0].condition`.
    public var path: String
    public var rule: String

    public var description: String {
        (blockID.map { "block '\($0)'" } ?? "sequence") + " (\(path)): \(rule)"
    }
}

/// A sequence that cannot be loaded, with every problem found.
public struct SequenceValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problems: [SequenceProblem]
    public var description: String { problems.map(\.description).joined(separator: "\n") }
}

/// Parses and validates orch8 sequence JSON.
///
/// Accepts the real engine's snake_case block tags and the seed's camelCase ones
/// (`for_each`/`forEach`, `try_catch`/`tryCatch`, `sub_sequence`/`subSequence`,
/// `a_b_split`/`ab_split`/`abSplit`, `cancellation_scope`/`cancellationScope`), and
/// camelCase spellings of multi-word fields. Durations are integer milliseconds (a
/// fractional number is read as seconds, the real engine's legacy form). Fields of the
/// real engine that the device does not implement (`delay`, `rate_limit_key`, …) are
/// accepted and listed as warnings.
public struct SequenceLoader: Sendable {
    /// Handlers the engine can run; nil skips the check (validation without an engine).
    public var registeredHandlers: Set<String>?
    public var maxSizeBytes: Int

    public init(registeredHandlers: Set<String>?, maxSizeBytes: Int = 1_048_576) {
        self.registeredHandlers = registeredHandlers
        self.maxSizeBytes = maxSizeBytes
    }

    public struct Loaded: Sendable {
        public var sequence: SequenceDefinition
        public var warnings: [String]
    }

    public func load(_ text: String) throws(SequenceValidationError) -> Loaded {
        let size = text.utf8.count
        guard size <= maxSizeBytes else {
            throw SequenceValidationError(problems: [SequenceProblem(
                blockID: nil, path: "(document)", rule: "the sequence is \(size) bytes; maxSequenceSizeBytes is \(maxSizeBytes)")])
        }
        let json: JSONValue
        do {
            json = try JSONValue.parse(text)
        } catch {
            throw SequenceValidationError(problems: [SequenceProblem(blockID: nil, path: "(document)", rule: "not valid JSON: \(error)")])
        }
        return try load(json, sizeBytes: size)
    }

    public func load(_ json: JSONValue, sizeBytes: Int) throws(SequenceValidationError) -> Loaded {
        var context = DecodingContext(registeredHandlers: registeredHandlers)
        let sequence = context.sequence(json, sizeBytes: sizeBytes)
        if let sequence, context.problems.isEmpty {
            return Loaded(sequence: sequence, warnings: context.warnings)
        }
        throw SequenceValidationError(problems: context.problems)
    }
}

/// Walks the JSON, collecting every problem rather than stopping at the first.
struct DecodingContext {
    let registeredHandlers: Set<String>?
    var problems: [SequenceProblem] = []
    var warnings: [String] = []
    var seenIDs: [String: String] = [:]

    static let tags: [String: BlockKind] = [
        "step": .step, "router": .router, "parallel": .parallel, "race": .race, "loop": .loop,
        "for_each": .forEach, "forEach": .forEach, "try_catch": .tryCatch, "tryCatch": .tryCatch,
        "sub_sequence": .subSequence, "subSequence": .subSequence, "a_b_split": .abSplit, "ab_split": .abSplit,
        "abSplit": .abSplit, "cancellation_scope": .cancellationScope, "cancellationScope": .cancellationScope,
    ]

    /// Engine fields the device accepts but does not act on.
    static let ignoredStepFields = ["delay", "rate_limit_key", "send_window", "context_access", "queue_name", "deadline",
                                    "on_deadline_breach", "fallback_handler", "cache_key", "output_schema", "compensation"]

    mutating func problem(_ block: String?, _ path: String, _ rule: String) {
        problems.append(SequenceProblem(blockID: block, path: path, rule: rule))
    }

    mutating func sequence(_ json: JSONValue, sizeBytes: Int) -> SequenceDefinition? {
        guard case .object(let top) = json else {
            problem(nil, "(document)", "a sequence is a JSON object")
            return nil
        }
        let fields = Fields(top)
        guard let name = fields.string("name"), !name.isEmpty else {
            problem(nil, "name", "a sequence needs a non-empty name")
            return nil
        }
        var version = 1
        if let v = fields.value("version") {
            if let n = v.numberValue, n == n.rounded(), n >= 0, n <= Double(Int32.max) { version = Int(n) } else {
                problem(nil, "version", "version is a whole number")
            }
        }
        guard let blocksJSON = fields.value("blocks") else {
            problem(nil, "blocks", "a sequence needs a blocks list")
            return nil
        }
        let blocks = blockList(blocksJSON, path: "blocks", owner: nil, field: "blocks")
        for extra in ["on_failure", "on_cancel", "interceptors", "sla", "input_schema"] where top[extra] != nil {
            warnings.append("'\(extra)' is accepted but not run on the device")
        }
        return SequenceDefinition(
            id: fields.string("id") ?? "", tenantID: fields.string("tenant_id", "tenantId") ?? "mobile",
            namespace: fields.string("namespace") ?? "default", name: name, version: version,
            deprecated: fields.value("deprecated")?.boolValue ?? false, blocks: blocks,
            createdAt: fields.string("created_at", "createdAt"), sizeBytes: sizeBytes)
    }

    mutating func blockList(_ json: JSONValue, path: String, owner: String?, field: String) -> [Block] {
        guard case .array(let items) = json else {
            problem(owner, path, "\(field) must be a list of blocks")
            return []
        }
        if items.isEmpty { problem(owner, path, "\(field) must not be empty") }
        return items.enumerated().compactMap { block($0.element, path: "\(path)[\($0.offset)]") }
    }

    mutating func block(_ json: JSONValue, path: String) -> Block? {
        guard case .object(let object) = json else {
            problem(nil, path, "a block is a JSON object")
            return nil
        }
        let f = Fields(object)
        guard let id = f.string("id"), !id.isEmpty else {
            problem(nil, path, "every block needs a non-empty id")
            return nil
        }
        if let first = seenIDs[id] {
            problem(id, path, "duplicate block id (also at \(first))")
        } else {
            seenIDs[id] = path
        }
        guard let tag = f.string("type") else {
            problem(id, path, "a block needs a type")
            return nil
        }
        guard let kind = Self.tags[tag] else {
            problem(id, path + ".type", "unknown block type '\(tag)'; expected one of: "
                + BlockKind.allCases.map { $0 == .abSplit ? "a_b_split" : $0.rawValue }.joined(separator: ", "))
            return nil
        }
        switch kind {
        case .step: return step(id, f, path).map(Block.step)
        case .router: return router(id, f, path)
        case .parallel:
            return .parallel(ParallelBlock(id: id, branches: branches(id, f, path)))
        case .race:
            var semantics = RaceSemantics.firstToResolve
            if let text = f.string("semantics") {
                if let s = RaceSemantics(rawValue: text) { semantics = s } else {
                    problem(id, path + ".semantics", "expected first_to_resolve or first_to_succeed, found '\(text)'")
                }
            }
            return .race(RaceBlock(id: id, branches: branches(id, f, path), semantics: semantics))
        case .loop: return loop(id, f, path)
        case .forEach: return forEach(id, f, path)
        case .tryCatch: return tryCatch(id, f, path)
        case .subSequence:
            guard let name = f.string("sequence_name", "sequenceName", "sequence"), !name.isEmpty else {
                problem(id, path, "a sub_sequence needs sequence_name")
                return nil
            }
            var version: Int?
            if let v = f.value("version") {
                if let n = v.numberValue, n == n.rounded(), n >= 0, n <= Double(Int32.max) { version = Int(n) } else {
                    problem(id, path + ".version", "version is a whole number from 0 to \(Int32.max)")
                }
            }
            return .subSequence(SubSequenceBlock(id: id, sequenceName: name, version: version, input: f.value("input")?.objectValue ?? [:]))
        case .abSplit: return abSplit(id, f, path)
        case .cancellationScope:
            let blocks = blockList(f.value("blocks") ?? .null, path: path + ".blocks", owner: id, field: "blocks")
            let cleanup = f.value("cleanup", "on_cancel", "onCancel").map { blockList($0, path: path + ".cleanup", owner: id, field: "cleanup") }
            return .cancellationScope(CancellationScopeBlock(id: id, blocks: blocks, cleanup: cleanup))
        }
    }

    mutating func step(_ id: String, _ f: Fields, _ path: String) -> StepBlock? {
        guard let handler = f.string("handler"), !handler.isEmpty else {
            problem(id, path, "a step needs a handler")
            return nil
        }
        if let registered = registeredHandlers, !registered.contains(handler) {
            problem(id, path + ".handler", "handler '\(handler)' is not registered")
        }
        var params: [String: JSONValue] = [:]
        if let p = f.value("params") {
            if let object = p.objectValue { params = object } else { problem(id, path + ".params", "params must be an object") }
        }
        for field in Self.ignoredStepFields where f.value(field) != nil {
            warnings.append("block '\(id)': '\(field)' is accepted but not enforced on the device")
        }
        return StepBlock(
            id: id, handler: handler, params: params, retry: retry(id, f.value("retry"), path + ".retry"),
            timeout: duration(id, f.value("timeout"), path + ".timeout"),
            cancellable: f.value("cancellable")?.boolValue ?? true,
            waitForInput: waitForInput(id, f.value("wait_for_input", "waitForInput"), path + ".wait_for_input"),
            when: condition(id, f.value("when"), path + ".when", required: false))
    }

    mutating func waitForInput(_ id: String, _ json: JSONValue?, _ path: String) -> WaitForInput? {
        guard let json, json != .null else { return nil }
        guard case .object(let object) = json else {
            problem(id, path, "wait_for_input must be an object")
            return nil
        }
        let f = Fields(object)
        var choices: [Choice]?
        if let list = f.value("choices"), list != .null {
            guard case .array(let items) = list else {
                problem(id, path + ".choices", "choices must be a list of {label, value}")
                return nil
            }
            if items.isEmpty { problem(id, path + ".choices", "choices must not be empty") }
            var values: Set<String> = []
            choices = items.enumerated().compactMap { index, item in
                let c = Fields(item.objectValue ?? [:])
                guard let value = c.string("value"), !value.isEmpty else {
                    problem(id, "\(path).choices[\(index)]", "a choice needs a non-empty value")
                    return nil
                }
                if !values.insert(value).inserted { problem(id, "\(path).choices[\(index)]", "duplicate choice value '\(value)'") }
                return Choice(label: c.string("label") ?? value, value: value)
            }
        }
        let storeAs = f.string("store_as", "storeAs")
        if let storeAs, storeAs.isEmpty { problem(id, path + ".store_as", "store_as must not be empty") }
        // The seed's table marks the prompt required: the approval UI has nothing to show without it.
        let prompt = f.string("prompt") ?? ""
        if prompt.allSatisfy(\.isWhitespace) { problem(id, path + ".prompt", "wait_for_input needs a prompt (the text the approval UI shows)") }
        return WaitForInput(prompt: prompt, timeout: duration(id, f.value("timeout"), path + ".timeout"),
                            choices: choices, storeAs: storeAs)
    }

    mutating func retry(_ id: String, _ json: JSONValue?, _ path: String) -> RetryPolicy? {
        guard let json, json != .null else { return nil }
        let f = Fields(json.objectValue ?? [:])
        var attempts = f.value("max_attempts", "maxAttempts")?.numberValue ?? 1
        if attempts < 1 || attempts != attempts.rounded() || attempts > 1_000 {
            problem(id, path + ".max_attempts", "max_attempts is a whole number from 1 to 1000")
            attempts = 1
        }
        let initial = duration(id, f.value("initial_backoff", "initialBackoff"), path + ".initial_backoff") ?? .seconds(1)
        let maximum = duration(id, f.value("max_backoff", "maxBackoff"), path + ".max_backoff") ?? .seconds(60)
        let multiplier = f.value("backoff_multiplier", "multiplier", "backoffMultiplier")?.numberValue ?? 2
        if multiplier < 1 || multiplier > 100 { problem(id, path + ".backoff_multiplier", "backoff_multiplier is between 1 and 100") }
        if maximum < initial { problem(id, path + ".max_backoff", "max_backoff must not be less than initial_backoff") }
        return RetryPolicy(maxAttempts: Int(attempts), initialBackoff: initial, maxBackoff: maximum, multiplier: multiplier)
    }

    mutating func router(_ id: String, _ f: Fields, _ path: String) -> Block? {
        guard case .array(let items)? = f.value("routes") else {
            problem(id, path + ".routes", "a router needs a routes list")
            return nil
        }
        var routes: [Route] = []
        for (index, item) in items.enumerated() {
            let r = Fields(item.objectValue ?? [:])
            let routePath = "\(path).routes[\(index)]"
            let blocks = blockList(r.value("blocks") ?? .null, path: routePath + ".blocks", owner: id, field: "blocks")
            if let condition = condition(id, r.value("condition"), routePath + ".condition", required: true) {
                routes.append(Route(condition: condition, blocks: blocks))
            }
        }
        let fallback = f.value("default").map { blockList($0, path: path + ".default", owner: id, field: "default") }
        if items.isEmpty && fallback == nil { problem(id, path + ".routes", "a router needs at least one route or a default") }
        return .router(RouterBlock(id: id, routes: routes, defaultBlocks: fallback))
    }

    mutating func branches(_ id: String, _ f: Fields, _ path: String) -> [[Block]] {
        guard case .array(let items)? = f.value("branches"), !items.isEmpty else {
            problem(id, path + ".branches", "branches must be a non-empty list of block lists")
            return []
        }
        return items.enumerated().map { blockList($0.element, path: "\(path).branches[\($0.offset)]", owner: id, field: "a branch") }
    }

    mutating func loop(_ id: String, _ f: Fields, _ path: String) -> Block? {
        let body = blockList(f.value("body", "blocks") ?? .null, path: path + ".body", owner: id, field: "body")
        let maxIterations = iterations(id, f, path)
        guard let condition = condition(id, f.value("condition"), path + ".condition", required: true) else { return nil }
        return .loop(LoopBlock(id: id, condition: condition, body: body, maxIterations: maxIterations,
                               breakOn: self.condition(id, f.value("break_on", "breakOn"), path + ".break_on", required: false),
                               continueOnError: f.value("continue_on_error", "continueOnError")?.boolValue ?? false))
    }

    mutating func forEach(_ id: String, _ f: Fields, _ path: String) -> Block? {
        let body = blockList(f.value("body", "blocks") ?? .null, path: path + ".body", owner: id, field: "body")
        let maxIterations = iterations(id, f, path)
        guard let collection = condition(id, f.value("collection"), path + ".collection", required: true) else { return nil }
        let itemVar = f.string("item_var", "itemVar") ?? "item"
        if itemVar.isEmpty { problem(id, path + ".item_var", "item_var must not be empty") }
        return .forEach(ForEachBlock(id: id, collection: collection, itemVar: itemVar, body: body, maxIterations: maxIterations))
    }

    mutating func iterations(_ id: String, _ f: Fields, _ path: String) -> Int {
        guard let value = f.value("max_iterations", "maxIterations") else { return 1_000 }
        guard let n = value.numberValue, n >= 1, n <= 1_000_000, n == n.rounded() else {
            problem(id, path + ".max_iterations", "max_iterations is a whole number from 1 to 1000000")
            return 1_000
        }
        return Int(n)
    }

    mutating func tryCatch(_ id: String, _ f: Fields, _ path: String) -> Block? {
        let tryBlocks = blockList(f.value("try_block", "tryBlock", "try") ?? .null, path: path + ".try_block", owner: id, field: "try_block")
        let catchBlocks = blockList(f.value("catch_block", "catchBlock", "catch") ?? .null, path: path + ".catch_block", owner: id,
                                    field: "catch_block")
        let finallyJSON = f.value("finally_block", "finallyBlock", "finally")
        let finallyBlocks = finallyJSON.map { blockList($0, path: path + ".finally_block", owner: id, field: "finally_block") }
        return .tryCatch(TryCatchBlock(id: id, tryBlocks: tryBlocks, catchBlocks: catchBlocks, finallyBlocks: finallyBlocks))
    }

    mutating func abSplit(_ id: String, _ f: Fields, _ path: String) -> Block? {
        guard case .array(let items)? = f.value("variants"), !items.isEmpty else {
            problem(id, path + ".variants", "an a_b_split needs a non-empty variants list")
            return nil
        }
        var names: Set<String> = []
        var variants: [Variant] = []
        for (index, item) in items.enumerated() {
            let v = Fields(item.objectValue ?? [:])
            let variantPath = "\(path).variants[\(index)]"
            let name = v.string("name") ?? "variant-\(index)"
            if !names.insert(name).inserted { problem(id, variantPath + ".name", "duplicate variant name '\(name)'") }
            let weight = v.value("weight")?.numberValue ?? -1
            if weight < 0 || weight != weight.rounded() || weight > Double(UInt32.max) {
                problem(id, variantPath + ".weight", "weight is a whole number >= 0")
            }
            let blocks = blockList(v.value("blocks") ?? .null, path: variantPath + ".blocks", owner: id, field: "blocks")
            variants.append(Variant(name: name, weight: UInt32(max(0, min(weight, Double(UInt32.max)))), blocks: blocks))
        }
        if variants.allSatisfy({ $0.weight == 0 }) { problem(id, path + ".variants", "at least one variant needs a positive weight") }
        return .abSplit(ABSplitBlock(id: id, variants: variants))
    }

    mutating func condition(_ id: String, _ json: JSONValue?, _ path: String, required: Bool) -> Expression? {
        guard let json, json != .null else {
            if required { problem(id, path, "a condition is required") }
            return nil
        }
        let text: String
        switch json {
        case .string(let s): text = s
        case .bool(let b): text = b ? "true" : "false"
        case .number, .array, .object, .null:
            problem(id, path, "a condition is an expression string")
            return nil
        }
        do {
            return try Expression(parsing: text)
        } catch {
            problem(id, path, "bad condition '\(text)': \(error)")
            return nil
        }
    }

    /// The longest duration a sequence may name: ten years, in milliseconds. Longer ones
    /// are refused by name rather than wrapped or saturated into "never".
    static let maxDurationMs: Double = 315_360_000_000

    /// Integer milliseconds, or a fractional number of seconds (the engine's legacy form).
    mutating func duration(_ id: String, _ json: JSONValue?, _ path: String) -> TimeSpan? {
        guard let json, json != .null else { return nil }
        guard let n = json.numberValue, n >= 0 else {
            problem(id, path, "a duration is a non-negative number of milliseconds")
            return nil
        }
        let whole = n == n.rounded()
        guard whole ? n <= Self.maxDurationMs : n * 1_000 <= Self.maxDurationMs else {
            problem(id, path, "a duration is at most ten years (\(Int64(Self.maxDurationMs)) ms)")
            return nil
        }
        return whole ? .milliseconds(Int64(n)) : .approximately(seconds: n)
    }
}

/// Field lookup that accepts several spellings of one field.
struct Fields {
    let object: [String: JSONValue]
    init(_ object: [String: JSONValue]) { self.object = object }

    func value(_ names: String...) -> JSONValue? {
        for name in names { if let v = object[name] { return v } }
        return nil
    }

    func string(_ names: String...) -> String? {
        for name in names { if let v = object[name] { return v.stringValue } }
        return nil
    }
}
