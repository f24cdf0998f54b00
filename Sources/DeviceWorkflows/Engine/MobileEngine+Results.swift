public import LabKernel

extension MobileEngine {
    /// A handler answered. Results for invocations the engine no longer waits for (timed
    /// out, cancelled, from before a restart) are ignored.
    public mutating func handlerFinished(_ key: InvocationKey, _ outcome: HandlerOutcome, now: Instant, into effects: inout [EngineEffect]) {
        lastNow = now
        guard inFlight.remove(key) != nil, let index = indexByID[key.instanceID], Int(key.node) < instances[index].nodes.count else { return }
        let node = instances[index].nodes[Int(key.node)]
        guard node.inFlight, node.attempt == key.attempt, let program = program(of: instances[index]),
              case .block(let b) = node.kind, case .step(let step) = program.blocks[Int(b)] else { return }
        instances[index].nodes[Int(key.node)].inFlight = false
        instances[index].nodes[Int(key.node)].deadline = nil
        switch outcome {
        case .success(let output):
            instances[index].data[step.id] = output
            if config.inputGate == .afterHandler, let wait = step.waitForInput {
                instances[index].nodes[Int(key.node)].state = .waiting
                instances[index].nodes[Int(key.node)].deadline = wait.timeout.map { now + $0 }
                pendingCallbacks.append(.stepPending(instanceID: key.instanceID, stepName: step.id, handler: step.handler))
                setState(index, .waiting, now: now, into: &effects)
            } else {
                instances[index].nodes[Int(key.node)].state = .completed
                instances[index].nodes[Int(key.node)].completedAt = now
                telemetry(.stepCompleted, instanceID: key.instanceID, block: step.id, detail: step.handler, now: now, into: &effects)
            }
        case .retryable, .permanent:
            stepFailed(index, key.node, outcome, now: now, into: &effects)
        }
        dirty.insert(key.instanceID)
        changed.insert(key.instanceID)
    }

    /// A step attempt failed: retry after the backoff if the policy allows, else fail it.
    mutating func stepFailed(_ index: Int, _ n: Int32, _ outcome: HandlerOutcome, now: Instant, into effects: inout [EngineEffect]) {
        guard let program = program(of: instances[index]), case .block(let b) = instances[index].nodes[Int(n)].kind,
              case .step(let step) = program.blocks[Int(b)] else { return }
        let message: String
        let retryable: Bool
        switch outcome {
        case .retryable(let m): (message, retryable) = (m, true)
        case .permanent(let m): (message, retryable) = (m, false)
        case .success: return
        }
        let attempt = Int(instances[index].nodes[Int(n)].attempt)
        instances[index].nodes[Int(n)].deadline = nil
        if retryable, let retry = step.retry, attempt < retry.maxAttempts {
            instances[index].nodes[Int(n)].retryAt = now + retry.backoff(after: attempt)
            telemetry(.stepFailed, instanceID: instances[index].id, block: step.id,
                      detail: "attempt \(attempt) of \(retry.maxAttempts): \(message); retrying", now: now, into: &effects)
        } else {
            let attempts = step.retry.map { " after \(attempt) of \($0.maxAttempts) attempts" } ?? ""
            instances[index].nodes[Int(n)].state = .failed
            instances[index].nodes[Int(n)].error = "step '\(step.id)' failed\(attempts): \(message)"
            instances[index].nodes[Int(n)].completedAt = now
            telemetry(.stepFailed, instanceID: instances[index].id, block: step.id, detail: message, now: now, into: &effects)
        }
        dirty.insert(instances[index].id)
        changed.insert(instances[index].id)
    }

    /// Ends an instance: listeners, telemetry, and the parent waiting on it.
    mutating func finishInstance(_ index: Int, _ state: InstanceState, error: String?, now: Instant, into effects: inout [EngineEffect]) {
        guard !instances[index].state.isTerminal else { return }
        for n in instances[index].nodes.indices where instances[index].nodes[n].inFlight { dropInvocation(index, Int32(n)) }
        instances[index].error = error
        instances[index].finishedAt = now
        setState(index, state, now: now, into: &effects)
        let id = instances[index].id
        switch state {
        case .completed: pendingCallbacks.append(.instanceCompleted(instanceID: id, output: .object(instances[index].data)))
        case .failed: pendingCallbacks.append(.instanceFailed(instanceID: id, error: error ?? "failed"))
        case .cancelled, .scheduled, .running, .waiting, .paused: break
        }
        changed.insert(id)
        guard let link = instances[index].parent, let parent = indexByID[link.instanceID],
              Int(link.node) < instances[parent].nodes.count, !instances[parent].nodes[Int(link.node)].state.isFinished else { return }
        let n = Int(link.node)
        instances[parent].nodes[n].childInstance = nil
        instances[parent].nodes[n].completedAt = now
        switch state {
        case .completed:
            if let program = program(of: instances[parent]), case .block(let b) = instances[parent].nodes[n].kind {
                instances[parent].data[program.blocks[Int(b)].id] = .object(instances[index].data)
            }
            instances[parent].nodes[n].state = .completed
        case .failed, .cancelled, .scheduled, .running, .waiting, .paused:
            instances[parent].nodes[n].state = .failed
            instances[parent].nodes[n].error = "sub-sequence \(instances[index].sequenceName) \(state.rawValue.lowercased())"
                + (error.map { ": \($0)" } ?? "")
        }
        dirty.insert(link.instanceID)
        changed.insert(link.instanceID)
    }

    /// Fails an instance from outside its tree (step limit, lifetime).
    mutating func abort(_ index: Int, _ reason: String, now: Instant, into effects: inout [EngineEffect]) {
        for n in instances[index].nodes.indices where !instances[index].nodes[n].state.isFinished {
            dropInvocation(index, Int32(n))
            instances[index].nodes[n].state = .cancelled
            instances[index].nodes[n].completedAt = now
            instances[index].nodes[n].deadline = nil
        }
        finishInstance(index, .failed, error: reason, now: now, into: &effects)
    }

    /// Forgets an invocation in flight; its result will be ignored.
    mutating func dropInvocation(_ index: Int, _ n: Int32) {
        let node = instances[index].nodes[Int(n)]
        guard node.inFlight else { return }
        inFlight.remove(InvocationKey(instanceID: instances[index].id, node: n, attempt: node.attempt))
        instances[index].nodes[Int(n)].inFlight = false
    }

    /// Starts the child instance of a sub_sequence block, or fails the block.
    mutating func startChild(of parent: Int, _ start: Interpreter.ChildStart, now: Instant, into effects: inout [EngineEffect]) {
        let n = Int(start.node)
        guard let program = program(named: start.block.sequenceName, version: start.block.version) else {
            instances[parent].nodes[n].state = .failed
            instances[parent].nodes[n].error = "sub-sequence '\(start.block.sequenceName)' is not loaded"
            instances[parent].nodes[n].completedAt = now
            dirty.insert(instances[parent].id)
            return
        }
        let link = WorkflowInstance.ParentLink(instanceID: instances[parent].id, node: start.node)
        let child = createInstance(program, data: start.block.input, dedupKey: nil, parent: link, now: now, into: &effects)
        instances[parent].nodes[n].childInstance = child
    }

    mutating func setState(_ index: Int, _ state: InstanceState, now: Instant, into effects: inout [EngineEffect]) {
        guard instances[index].state != state else { return }
        if state.isTerminal && !instances[index].state.isTerminal { activeCount -= 1 }
        instances[index].state = state
        instances[index].updatedAt = now
        changed.insert(instances[index].id)
        stateTelemetry(instances[index].id, state, now: now, into: &effects)
    }

    func stateTelemetry(_ id: String, _ state: InstanceState, now: Instant, into effects: inout [EngineEffect]) {
        telemetry(.instanceStateChanged, instanceID: id, block: nil, detail: state.rawValue, now: now, into: &effects)
    }

    func telemetry(_ kind: TelemetryEvent.Kind, instanceID: String, block: String?, detail: String, now: Instant,
                   into effects: inout [EngineEffect]) {
        guard config.telemetryEnabled else { return }
        effects.append(.telemetry(TelemetryEvent(kind: kind, instanceID: instanceID, blockID: block, detail: detail,
                                                 timestamp: wallClock.rfc3339(at: now))))
    }
}
