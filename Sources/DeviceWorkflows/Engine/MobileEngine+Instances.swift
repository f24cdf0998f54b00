public import LabKernel
import Orch8Wire

extension MobileEngine {
    /// Starts an instance of the newest loaded version of `sequenceName`. With a
    /// `dedupKey` that an active instance already holds, returns that instance's id and
    /// starts nothing (the real engine's behaviour: a push delivered twice starts once).
    @discardableResult
    public mutating func start(
        _ sequenceName: String, input: JSONValue = [:], dedupKey: String? = nil, version: Int? = nil,
        now: Instant, into effects: inout [EngineEffect]
    ) throws(MobileEngineError) -> String {
        guard !isShutdown else { throw .shutdown }
        lastNow = now
        if let dedupKey, let existing = instances.first(where: { $0.dedupKey == dedupKey && !$0.state.isTerminal }) {
            return existing.id
        }
        guard let program = program(named: sequenceName, version: version) else {
            let loaded = Set(programOrder.map(\.name)).sorted()
            throw .notFound("sequence '\(sequenceName)'" + (version.map { " version \($0)" } ?? "")
                + (loaded.isEmpty ? "; no sequence is loaded" : "; loaded: \(loaded.joined(separator: ", "))"))
        }
        let data: [String: JSONValue]
        switch input {
        case .object(let fields): data = fields
        case .null: data = [:]
        case .bool, .number, .string, .array:
            throw .invalidInput("the input of a workflow is a JSON object, not \(input.canonicalText)")
        }
        guard activeCount < Int(config.maxConcurrentInstances) else {
            throw .resourceLimit("\(activeCount) instances are active (maxConcurrentInstances is \(config.maxConcurrentInstances))")
        }
        if config.memoryBudgetBytes > 0 {
            guard UInt64(estimatedTotal) < config.memoryBudgetBytes else {
                throw .resourceLimit("instances use about \(estimatedTotal) bytes (memoryBudgetBytes is \(config.memoryBudgetBytes))")
            }
        }
        let index = createInstance(program, data: data, dedupKey: dedupKey, parent: nil, now: now)
        flush(now: now, into: &effects)
        return instances[index].id
    }

    /// Creates and registers an instance; it runs on the next tick. Returns its index.
    mutating func createInstance(
        _ program: Program, data: [String: JSONValue], dedupKey: String?, parent: WorkflowInstance.ParentLink?,
        now: Instant
    ) -> Int {
        let id = InstanceID.random(using: &generator)
        let instance = WorkflowInstance(
            id: id, sequenceName: program.sequence.name, sequenceVersion: program.sequence.version, state: .scheduled,
            data: ContextData(data), nodes: [ExecNode(kind: .list(owner: -1, list: 0), parent: -1, state: .pending)], dedupKey: dedupKey,
            createdAt: now, updatedAt: now, finishedAt: nil, sequenceNumber: nextSequenceNumber, stepsExecuted: 0, error: nil,
            parent: parent, generator: SeededGenerator(seed: generator.next()))
        nextSequenceNumber += 1
        let index = append(instance, program: program)
        activeCount += 1
        markDirty(index)
        markChanged(index)
        telemetry(.instanceStateChanged, index: index, block: nil, detail: InstanceState.scheduled.rawValue, now: now)
        return index
    }

    mutating func append(_ instance: WorkflowInstance, program: Program) -> Int {
        let index = instances.count
        indexByID[instance.instanceID] = index
        indexByNumber[instance.sequenceNumber] = index
        instances.append(instance)
        programOf.append(program)
        flags.append(0)
        timers.append(summarizeTimers(index))
        estimatedSizes.append(0)
        if instance.state.isTerminal, let finished = instance.finishedAt { collectionDue(finished) }
        return index
    }

    /// Resumes a step waiting for input. `output` is `{"value": "<choice>"}` (other fields
    /// of the object are merged into context.data) or a bare choice string; the value
    /// must be one of the step's choices (yes/no when it names none). Anything else is an
    /// error: the step never silently keeps waiting on a malformed answer.
    public mutating func completeStep(
        _ instanceID: String, stepName: String, output: JSONValue, now: Instant, into effects: inout [EngineEffect]
    ) throws(MobileEngineError) {
        guard !isShutdown else { throw .shutdown }
        guard let index = index(of: instanceID) else { throw .notFound("instance \(instanceID)") }
        try acceptInput(at: index, stepName: stepName, output: output, now: now)
        flush(now: now, into: &effects)
    }

    /// `completeStep` for the instance at `index`, without the flush: for a driver that
    /// looked up a tick's answers together and ticks right after (the tick persists the
    /// instance once, with everything else that changed).
    package mutating func acceptInput(at index: Int, stepName: String, output: JSONValue, now: Instant) throws(MobileEngineError) {
        guard !isShutdown else { throw .shutdown }
        lastNow = now
        let instanceID = instances[index].instanceID
        guard instances[index].state == .waiting else {
            throw .invalidInput("instance \(instanceID) is \(instances[index].state.rawValue), not Waiting")
        }
        guard let (node, step) = waitingStep(named: stepName, at: index) else {
            let waiting = waitingStepNames(at: index)
            throw .invalidInput("step '\(stepName)' of instance \(instanceID) is not waiting for input"
                + (waiting.isEmpty ? "" : "; waiting: \(waiting.joined(separator: ", "))"))
        }
        let allowed = step.choiceValues
        let value: String
        var extra: [String: JSONValue] = [:]
        switch output {
        case .string(let s): value = s
        case .object(var fields):
            guard case .string(let v)? = fields.removeValue(forKey: "value") else {
                throw .invalidInput("output must be {\"value\": <choice>} with one of: \(allowed.joined(separator: ", "))")
            }
            value = v
            extra = fields
        case .null, .bool, .number, .array:
            throw .invalidInput("output must be {\"value\": <choice>} with one of: \(allowed.joined(separator: ", "))")
        }
        guard let choice = allowed.firstIndex(of: value) else {
            throw .invalidInput("'\(value)' is not a choice of step '\(stepName)'; expected one of: \(allowed.joined(separator: ", "))")
        }
        instances[index].data[step.answerKey] = .string(value)
        for (key, field) in extra { instances[index].data[key] = field }
        instances[index].nodes[Int(node)].deadline = nil
        if config.inputGate == .beforeHandler && !instances[index].nodes[Int(node)].gatePassed {
            instances[index].nodes[Int(node)].gatePassed = true
            instances[index].nodes[Int(node)].state = .running
        } else {
            instances[index].nodes[Int(node)].state = .completed
            instances[index].nodes[Int(node)].completedAt = now
            telemetry(.stepCompleted, index: index, block: step.id, detail: step.choiceDetails[choice], now: now)
        }
        setState(index, .running, now: now)
        markDirty(index)
        markChanged(index)
    }

    func waitingStep(named name: String, at index: Int) -> (Int32, StepSpec)? {
        var n = instances[index].nodes.count - 1
        while n >= 0 {
            if instances[index].nodes[n].state == .waiting, let step = programOf[index].step(instances[index].nodes[n].kind),
               step.waits, step.id == name {
                return (Int32(n), step)
            }
            n -= 1
        }
        return nil
    }

    /// Every step waiting for input, as (instance, step), in creation order: what an app
    /// shows after a relaunch, when no `stepPending` callback will come again.
    public func waitingSteps() -> [(instanceID: InstanceID, step: String)] {
        instances.indices.filter { instances[$0].state == .waiting }.flatMap { index in
            waitingStepNames(at: index).map { (instances[index].instanceID, $0) }
        }
    }

    func waitingStepNames(at index: Int) -> [String] {
        instances[index].nodes.compactMap { node in
            node.state == .waiting ? programOf[index].step(node.kind)?.id : nil
        }
    }

    /// Cancels an instance. Work inside a `cancellation_scope`, and steps marked
    /// `cancellable: false`, run to their end first; everything else stops now.
    public mutating func cancelInstance(_ instanceID: String, now: Instant, into effects: inout [EngineEffect]) throws(MobileEngineError) {
        guard !isShutdown else { throw .shutdown }
        lastNow = now
        guard let index = index(of: instanceID) else { throw .notFound("instance \(instanceID)") }
        guard !instances[index].state.isTerminal else {
            throw .invalidInput("instance \(instanceID) is already \(instances[index].state.rawValue)")
        }
        requestCancel(index, now: now)
        drive(index, now: now)
        flush(now: now, into: &effects)
    }

    /// Marks the instance cancelled-as-requested and stops every unshielded node.
    mutating func requestCancel(_ index: Int, now: Instant) {
        let program = programOf[index]
        instances[index].cancelRequested = true
        if instances[index].state == .paused { instances[index].state = .running }
        for n in instances[index].nodes.indices where !instances[index].nodes[n].state.isFinished {
            if Interpreter.isShielded(Int32(n), in: instances[index], program: program) { continue }
            guard case .block = instances[index].nodes[n].kind else { continue }
            if let child = instances[index].nodes[n].childInstance, let childIndex = indexByNumber[child],
               !instances[childIndex].state.isTerminal {
                requestCancel(childIndex, now: now)
                markDirty(childIndex)
            }
            dropInvocation(index, Int32(n))
            instances[index].nodes[n].state = .cancelled
            instances[index].nodes[n].completedAt = now
            instances[index].nodes[n].deadline = nil
        }
        markDirty(index)
        markChanged(index)
    }

    /// Holds an instance: no step starts until `resumeInstance` (handlers in flight finish).
    public mutating func pauseInstance(_ instanceID: String, now: Instant, into effects: inout [EngineEffect]) throws(MobileEngineError) {
        guard let index = index(of: instanceID) else { throw .notFound("instance \(instanceID)") }
        guard !instances[index].state.isTerminal else { throw .invalidInput("instance \(instanceID) is already \(instances[index].state.rawValue)") }
        setState(index, .paused, now: now)
        flush(now: now, into: &effects)
    }

    public mutating func resumeInstance(_ instanceID: String, now: Instant, into effects: inout [EngineEffect]) throws(MobileEngineError) {
        guard let index = index(of: instanceID) else { throw .notFound("instance \(instanceID)") }
        guard instances[index].state == .paused else { throw .invalidInput("instance \(instanceID) is not Paused") }
        setState(index, .running, now: now)
        markDirty(index)
        flush(now: now, into: &effects)
    }

    /// Brings instance `index`'s share of `estimatedTotal` up to date (when a budget is set).
    mutating func updateEstimatedSize(_ index: Int) {
        guard config.memoryBudgetBytes > 0 else { return }
        let size = Self.estimatedBytes(of: instances[index])
        estimatedTotal += size - estimatedSizes[index]
        estimatedSizes[index] = size
    }

    /// A rough size of an instance in memory, for `memoryBudgetBytes` (0 once finished).
    static func estimatedBytes(of instance: WorkflowInstance) -> Int {
        guard !instance.state.isTerminal else { return 0 }
        func size(_ value: JSONValue) -> Int {
            switch value {
            case .null, .bool, .number: return 16
            case .string(let s): return 16 + s.utf8.count
            case .array(let a): return 32 + a.reduce(0) { $0 + size($1) }
            case .object(let o): return 48 + o.reduce(0) { $0 + 16 + $1.key.utf8.count + size($1.value) }
            }
        }
        return 512 + instance.nodes.count * MemoryLayout<ExecNode>.stride + size(instance.data.json)
    }
}
