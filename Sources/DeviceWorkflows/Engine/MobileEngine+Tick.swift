public import LabKernel

extension MobileEngine {
    /// One engine tick (the seed's `tickOnce`): fire due timers, collect garbage, advance
    /// every dirty instance, grant dispatches up to `maxConcurrentSteps`, then persist.
    ///
    /// `shouldYield` is asked between instances; a driver returns true once the tick has
    /// used `maxTickDurationMs` (of wall time live, of modelled time in simulation), and
    /// the instances not reached stay dirty for the next tick.
    public mutating func tick(now: Instant, into effects: inout [EngineEffect], shouldYield: () -> Bool = { false }) {
        guard !isShutdown else { return }
        lastNow = now
        fireTimers(now: now, into: &effects)
        collectGarbage(now: now, into: &effects)
        let order = dirty.compactMap { indexByID[$0] }.sorted()
        for index in order {
            if shouldYield() { break }
            drive(instances[index].id, now: now, into: &effects)
        }
        grantDispatches(now: now, into: &effects)
        flush(now: now, into: &effects)
    }

    /// Runs the interpreter on one instance and acts on what it asks for.
    mutating func drive(_ id: String, now: Instant, into effects: inout [EngineEffect]) {
        guard let index = indexByID[id] else { return }
        dirty.remove(id)
        guard !instances[index].state.isTerminal, instances[index].state != .paused,
              let program = program(of: instances[index]) else { return }
        var interpreter = Interpreter(instance: takeInstance(index), program: program, now: now, config: config, wallClock: wallClock)
        let progress = interpreter.run()
        instances[index] = interpreter.instance
        changed.insert(id)
        effects.append(contentsOf: interpreter.effects.filter { if case .telemetry = $0 { return true }; return false })
        pendingCallbacks.append(contentsOf: interpreter.effects.filter { if case .telemetry = $0 { return false }; return true })
        for n in interpreter.dispatch {
            let key = InvocationKey(instanceID: id, node: n, attempt: instances[index].nodes[Int(n)].attempt + 1)
            if queued.insert(key).inserted { dispatchQueue.append((id, n)) }
        }
        for start in interpreter.childStarts { startChild(of: index, start, now: now, into: &effects) }
        switch progress {
        case .done: finishInstance(index, .completed, error: nil, now: now, into: &effects)
        case .failed(let error): finishInstance(index, .failed, error: error, now: now, into: &effects)
        case .cancelled: finishInstance(index, .cancelled, error: nil, now: now, into: &effects)
        case .blocked:
            let waiting = instances[index].nodes.contains { $0.state == .waiting }
            let state: InstanceState = waiting ? .waiting : .running
            if instances[index].cancelRequested && !instances[index].nodes.contains(where: { isActive($0, program) }) {
                finishInstance(index, .cancelled, error: nil, now: now, into: &effects)
            } else if instances[index].state != state {
                setState(index, state, now: now, into: &effects)
            }
        }
    }

    /// An unfinished step or sub-sequence: work of its own, queued, in flight or waiting
    /// (containers only wait on such nodes).
    func isActive(_ node: ExecNode, _ program: Program) -> Bool {
        guard !node.state.isFinished, case .block(let b) = node.kind else { return false }
        switch program.blocks[Int(b)] {
        case .step, .subSequence: return true
        case .router, .parallel, .race, .loop, .forEach, .tryCatch, .abSplit, .cancellationScope: return false
        }
    }

    /// Moves an instance out of the array without copying its arrays (a swap).
    mutating func takeInstance(_ index: Int) -> WorkflowInstance {
        var taken = Self.placeholder
        swap(&taken, &instances[index])
        return taken
    }

    static let placeholder = WorkflowInstance(
        id: "", sequenceName: "", sequenceVersion: 0, state: .scheduled, data: [:], nodes: [], dedupKey: nil, createdAt: .zero,
        updatedAt: .zero, finishedAt: nil, sequenceNumber: 0, stepsExecuted: 0, error: nil, parent: nil,
        generator: SeededGenerator(seed: 0))

    /// Grants queued dispatches, oldest first, while handler slots are free.
    mutating func grantDispatches(now: Instant, into effects: inout [EngineEffect]) {
        var kept: [(String, Int32)] = []
        for (id, n) in dispatchQueue {
            guard let index = indexByID[id], Int(n) < instances[index].nodes.count else { continue }
            let node = instances[index].nodes[Int(n)]
            let key = InvocationKey(instanceID: id, node: n, attempt: node.attempt + 1)
            guard node.state == .running, !node.inFlight, !instances[index].state.isTerminal else {
                queued.remove(key)
                continue
            }
            guard inFlight.count < Int(config.maxConcurrentSteps), instances[index].state != .paused else {
                kept.append((id, n))
                continue
            }
            queued.remove(key)
            guard instances[index].stepsExecuted < Int(config.maxStepsPerInstance) else {
                abort(index, "step limit exceeded: the instance ran \(instances[index].stepsExecuted) steps (maxStepsPerInstance)",
                      now: now, into: &effects)
                continue
            }
            dispatch(index, n, now: now)
        }
        dispatchQueue = kept
    }

    mutating func dispatch(_ index: Int, _ n: Int32, now: Instant) {
        guard let program = program(of: instances[index]), case .block(let b) = instances[index].nodes[Int(n)].kind,
              case .step(let step) = program.blocks[Int(b)] else { return }
        instances[index].nodes[Int(n)].attempt += 1
        instances[index].nodes[Int(n)].inFlight = true
        instances[index].nodes[Int(n)].retryAt = nil
        let timeout = step.timeout.map { min($0, config.handlerTimeout) } ?? config.handlerTimeout
        instances[index].nodes[Int(n)].deadline = now + timeout
        instances[index].stepsExecuted += 1
        let key = InvocationKey(instanceID: instances[index].id, node: n, attempt: instances[index].nodes[Int(n)].attempt)
        inFlight.insert(key)
        var input = instances[index].data
        for (name, value) in step.params { input[name] = value }
        pendingCallbacks.append(.invoke(HandlerInvocation(
            key: key, sequenceName: instances[index].sequenceName, blockID: step.id, handler: step.handler, params: step.params,
            input: .object(input))))
        changed.insert(instances[index].id)
    }

    // MARK: Timers and garbage

    /// Handler timeouts, input timeouts and due retries.
    mutating func fireTimers(now: Instant, into effects: inout [EngineEffect]) {
        for index in instances.indices where !instances[index].state.isTerminal {
            guard let due = Self.nextTimer(of: instances[index], lifetime: config.instanceLifetime), due <= now else { continue }
            if instances[index].createdAt + config.instanceLifetime <= now {
                abort(index, "instance lifetime exceeded (maxInstanceLifetimeSecs is \(config.maxInstanceLifetimeSecs))", now: now, into: &effects)
                continue
            }
            for n in instances[index].nodes.indices {
                let node = instances[index].nodes[n]
                if let retryAt = node.retryAt, retryAt <= now, !node.inFlight {
                    dirty.insert(instances[index].id)
                } else if let deadline = node.deadline, deadline <= now {
                    if node.inFlight {
                        let key = InvocationKey(instanceID: instances[index].id, node: Int32(n), attempt: node.attempt)
                        inFlight.remove(key)
                        instances[index].nodes[n].inFlight = false
                        stepFailed(index, Int32(n), .retryable("the handler did not answer in time (handlerTimeoutMs or the step's timeout)"),
                                   now: now, into: &effects)
                    } else if node.state == .waiting {
                        instances[index].nodes[n].state = .failed
                        instances[index].nodes[n].error = "no input within the wait timeout"
                        instances[index].nodes[n].completedAt = now
                        instances[index].nodes[n].deadline = nil
                        dirty.insert(instances[index].id)
                        changed.insert(instances[index].id)
                    }
                }
            }
        }
    }

    /// The earliest timer of an instance: a retry, a handler or input deadline, or the
    /// end of its lifetime.
    static func nextTimer(of instance: WorkflowInstance, lifetime: TimeSpan, kinds: TimerKinds = .all) -> Instant? {
        if instance.state.isTerminal { return instance.finishedAt.map { $0 + lifetime } }
        var earliest: Instant? = kinds.contains(.lifetime) ? instance.createdAt + lifetime : nil
        func consider(_ t: Instant?) {
            if let t, earliest.map({ t < $0 }) ?? true { earliest = t }
        }
        for node in instance.nodes {
            if kinds.contains(.retries) { consider(node.retryAt) }
            if node.inFlight ? kinds.contains(.handlerTimeouts) : kinds.contains(.inputTimeouts) { consider(node.deadline) }
        }
        return earliest
    }

    /// Deletes terminal instances older than `maxInstanceLifetimeSecs`.
    mutating func collectGarbage(now: Instant, into effects: inout [EngineEffect]) {
        let expired = instances.filter { $0.state.isTerminal && ($0.finishedAt.map { $0 + config.instanceLifetime <= now } ?? false) }
        guard !expired.isEmpty else { return }
        let ids = Set(expired.map(\.id))
        instances.removeAll { ids.contains($0.id) }
        indexByID = Dictionary(uniqueKeysWithValues: instances.enumerated().map { ($1.id, $0) })
        for id in expired.map(\.id) {
            changed.remove(id)
            dirty.remove(id)
            effects.append(.delete(instanceID: id))
        }
    }

    // MARK: Flushing

    /// Persists every changed instance, then releases invocations and callbacks, so what
    /// the driver acts on is always already stored.
    mutating func flush(now: Instant, into effects: inout [EngineEffect]) {
        if !changed.isEmpty {
            for index in changed.compactMap({ indexByID[$0] }).sorted() {
                instances[index].updatedAt = now
                effects.append(.persist(instances[index]))
            }
            changed.removeAll(keepingCapacity: true)
        }
        if !pendingCallbacks.isEmpty {
            effects.append(contentsOf: pendingCallbacks)
            pendingCallbacks.removeAll(keepingCapacity: true)
        }
    }
}
