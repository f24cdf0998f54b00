public import LabKernel
import Orch8Wire

extension MobileEngine {
    /// A handler answered. Results for invocations the engine no longer waits for (timed
    /// out, cancelled, from before a restart) are ignored.
    ///
    /// What the result causes (the snapshot, telemetry, callbacks) comes out at the next
    /// flush, normally the `tick` that follows; `effects` is taken so every call of the
    /// engine's API has the same shape.
    public mutating func handlerFinished(_ key: InvocationKey, _ outcome: HandlerOutcome, now: Instant, into effects: inout [EngineEffect]) {
        lastNow = now
        guard let index = indexByNumber[key.instance], Int(key.node) < instances[index].nodes.count else { return }
        let n = Int(key.node)
        let node = instances[index].nodes[n]
        guard node.inFlight, node.attempt == key.attempt, let step = programOf[index].step(node.kind) else { return }
        inFlightCount -= 1
        instances[index].nodes[n].inFlight = false
        instances[index].nodes[n].deadline = nil
        switch outcome {
        case .success(let output):
            instances[index].data[step.id] = output
            if config.inputGate == .afterHandler, step.waits {
                instances[index].nodes[n].state = .waiting
                if let timeout = step.waitTimeout {
                    let deadline = now + timeout
                    instances[index].nodes[n].deadline = deadline
                    timers[index].include(inputTimeout: deadline)
                }
                pendingCallbacks.append(.stepPending(instanceID: instances[index].instanceID, stepName: step.id, handler: step.handler))
                setState(index, .waiting, now: now)
            } else {
                instances[index].nodes[n].state = .completed
                instances[index].nodes[n].completedAt = now
                telemetry(.stepCompleted, index: index, block: step.id, detail: step.handler, now: now)
            }
        case .retryable, .permanent:
            stepFailed(index, key.node, outcome, now: now)
        }
        markDirty(index)
        markChanged(index)
    }

    /// A step attempt failed: retry after the backoff if the policy allows, else fail it.
    mutating func stepFailed(_ index: Int, _ n: Int32, _ outcome: HandlerOutcome, now: Instant) {
        guard let step = programOf[index].step(instances[index].nodes[Int(n)].kind) else { return }
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
            let retryAt = now + retry.backoff(after: attempt)
            instances[index].nodes[Int(n)].retryAt = retryAt
            timers[index].include(retry: retryAt)
            telemetry(.stepFailed, index: index, block: step.id, detail: "attempt \(attempt) of \(retry.maxAttempts): \(message); retrying",
                      now: now)
        } else {
            let attempts = step.retry.map { " after \(attempt) of \($0.maxAttempts) attempts" } ?? ""
            instances[index].nodes[Int(n)].state = .failed
            instances[index].nodeErrors[n] = "step '\(step.id)' failed\(attempts): \(message)"
            instances[index].nodes[Int(n)].completedAt = now
            telemetry(.stepFailed, index: index, block: step.id, detail: message, now: now)
        }
        markDirty(index)
        markChanged(index)
    }

    /// Ends an instance: listeners, telemetry, and the parent waiting on it.
    mutating func finishInstance(_ index: Int, _ state: InstanceState, error: String?, now: Instant) {
        guard !instances[index].state.isTerminal else { return }
        for n in instances[index].nodes.indices where instances[index].nodes[n].inFlight { dropInvocation(index, Int32(n)) }
        instances[index].error = error
        instances[index].finishedAt = now
        collectionDue(now)
        setState(index, state, now: now)
        let id = instances[index].instanceID
        switch state {
        case .completed: pendingCallbacks.append(.instanceCompleted(instanceID: id, output: instances[index].data))
        case .failed: pendingCallbacks.append(.instanceFailed(instanceID: id, error: error ?? "failed"))
        case .cancelled, .scheduled, .running, .waiting, .paused: break
        }
        markChanged(index)
        guard let link = instances[index].parent, let parent = indexByNumber[link.instance],
              Int(link.node) < instances[parent].nodes.count, !instances[parent].nodes[Int(link.node)].state.isFinished else { return }
        let n = Int(link.node)
        instances[parent].nodes[n].childInstance = nil
        instances[parent].nodes[n].completedAt = now
        switch state {
        case .completed:
            if case .block(let b) = instances[parent].nodes[n].kind {
                instances[parent].data[programOf[parent].blocks[Int(b)].id] = instances[index].data.json
            }
            instances[parent].nodes[n].state = .completed
        case .failed, .cancelled, .scheduled, .running, .waiting, .paused:
            instances[parent].nodes[n].state = .failed
            instances[parent].nodeErrors[link.node] = "sub-sequence \(instances[index].sequenceName) \(state.rawValue.lowercased())"
                + (error.map { ": \($0)" } ?? "")
        }
        markDirty(parent)
        markChanged(parent)
    }

    /// Fails an instance from outside its tree (step limit, lifetime).
    mutating func abort(_ index: Int, _ reason: String, now: Instant) {
        for n in instances[index].nodes.indices where !instances[index].nodes[n].state.isFinished {
            dropInvocation(index, Int32(n))
            instances[index].nodes[n].state = .cancelled
            instances[index].nodes[n].completedAt = now
            instances[index].nodes[n].deadline = nil
        }
        finishInstance(index, .failed, error: reason, now: now)
    }

    /// Forgets an invocation in flight; its result will be ignored.
    mutating func dropInvocation(_ index: Int, _ n: Int32) {
        let node = instances[index].nodes[Int(n)]
        guard node.inFlight else { return }
        inFlightCount -= 1
        instances[index].nodes[Int(n)].inFlight = false
    }

    /// Starts the child instance of a sub_sequence block, or fails the block.
    mutating func startChild(of parent: Int, _ start: Interpreter.ChildStart, now: Instant) {
        let n = Int(start.node)
        guard let program = program(named: start.block.sequenceName, version: start.block.version) else {
            instances[parent].nodes[n].state = .failed
            instances[parent].nodeErrors[start.node] = "sub-sequence '\(start.block.sequenceName)' is not loaded"
            instances[parent].nodes[n].completedAt = now
            markDirty(parent)
            return
        }
        let link = WorkflowInstance.ParentLink(instance: instances[parent].sequenceNumber, node: start.node)
        let child = createInstance(program, data: start.block.input, dedupKey: nil, parent: link, now: now)
        instances[parent].nodes[n].childInstance = instances[child].sequenceNumber
    }

    mutating func setState(_ index: Int, _ state: InstanceState, now: Instant) {
        guard instances[index].state != state else { return }
        if state.isTerminal && !instances[index].state.isTerminal { activeCount -= 1 }
        instances[index].state = state
        instances[index].updatedAt = now
        markChanged(index)
        telemetry(.instanceStateChanged, index: index, block: nil, detail: state.rawValue, now: now)
    }

    /// Records a telemetry event; `flush` emits what was recorded.
    mutating func telemetry(_ kind: TelemetryEvent.Kind, index: Int, block: String?, detail: @autoclosure () -> String, now: Instant) {
        guard config.telemetryEnabled else { return }
        recordedTelemetry.append(TelemetryEvent(kind: kind, instanceID: instances[index].instanceID, blockID: block, detail: detail(),
                                                timestamp: stamp(now)))
    }
}
