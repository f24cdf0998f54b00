import LabKernel
import Orch8Wire

extension MobileEngine {
    // MARK: Granting handler slots

    /// What the grant does with a queued key.
    enum GrantVerdict {
        /// The step no longer waits for this attempt (finished, cancelled, re-queued).
        case drop
        /// No handler slot is free, or the instance is paused: the key stays queued.
        case hold
        /// The instance has used up `maxStepsPerInstance`.
        case overLimit
        case grant
    }

    func verdict(on key: InvocationKey, at index: Int) -> GrantVerdict {
        guard Int(key.node) < instances[index].nodes.count else { return .drop }
        let node = instances[index].nodes[Int(key.node)]
        guard node.state == .running, !node.inFlight, node.attempt + 1 == key.attempt, !instances[index].state.isTerminal else {
            return .drop
        }
        guard inFlightCount < Int(config.maxConcurrentSteps), instances[index].state != .paused else { return .hold }
        return instances[index].stepsExecuted < Int(config.maxStepsPerInstance) ? .grant : .overLimit
    }

    /// Grants queued dispatches, oldest first, while handler slots are free.
    mutating func grantDispatches(now: Instant) {
        guard !dispatchQueue.isEmpty else { return }
        // Compacted in place: the kept keys move to the front, the buffer is reused.
        var kept = 0
        for position in dispatchQueue.indices {
            let key = dispatchQueue[position]
            guard let index = indexByNumber[key.instance] else {
                unqueue(key)
                continue
            }
            switch verdict(on: key, at: index) {
            case .drop:
                unqueue(key)
            case .hold:
                queued.insert(key)
                dispatchQueue[kept] = key
                kept += 1
            case .overLimit:
                unqueue(key)
                abort(index, "step limit exceeded: the instance ran \(instances[index].stepsExecuted) steps (maxStepsPerInstance)",
                      now: now)
            case .grant:
                unqueue(key)
                if let invocation = dispatch(index, key, now: now) { pendingCallbacks.append(.invoke(invocation)) }
            }
        }
        dispatchQueue.removeSubrange(kept...)
    }

    /// Forgets that `key` was kept in the queue (no hashing when nothing was kept).
    mutating func unqueue(_ key: InvocationKey) {
        if !queued.isEmpty { queued.remove(key) }
    }

    /// Marks the step in flight and returns its invocation.
    mutating func dispatch(_ index: Int, _ key: InvocationKey, now: Instant) -> HandlerInvocation? {
        let n = Int(key.node)
        guard let step = programOf[index].step(instances[index].nodes[n].kind) else { return nil }
        instances[index].nodes[n].attempt = key.attempt
        instances[index].nodes[n].inFlight = true
        instances[index].nodes[n].retryAt = nil
        let timeout = step.timeout.map { min($0, config.handlerTimeout) } ?? config.handlerTimeout
        instances[index].nodes[n].deadline = now + timeout
        instances[index].stepsExecuted += 1
        inFlightCount += 1
        markChanged(index)
        return HandlerInvocation(key: key, instanceID: instances[index].instanceID, step: step, context: instances[index].data)
    }

    /// Grants the keys instance `index`'s walk just queued (from `position` on), as the grant
    /// at the end of the tick would, and says whether granting right away can go on.
    ///
    /// It stops (leaving this key and every later one to that grant) at the first key it
    /// cannot simply grant: no slot free, the instance paused, the step limit reached, a
    /// key the grant would drop, or an instance that can start children (a child that
    /// finishes later in the tick writes its output into the parent's context, which the
    /// invocation carries). Until then the outcome is the grant's: the queue was empty
    /// when the tick began, so these keys are the oldest, and a slot free now is free
    /// then (a walk only frees slots). The invocations are held back and released after
    /// the walks, where the grant would have put them among the callbacks.
    mutating func grantRightAway(_ index: Int, from position: Int, now: Instant) -> Bool {
        while dispatchQueue.count > position {
            let key = dispatchQueue[position]
            // The walk queues only its own instance's keys: no lookup by number.
            guard key.instance == instances[index].sequenceNumber, !programOf[index].startsChildren,
                  verdict(on: key, at: index) == .grant else { return false }
            dispatchQueue.remove(at: position)
            if let invocation = dispatch(index, key, now: now) { grantedRightAway.append(.invoke(invocation)) }
        }
        return true
    }

    /// Moves the invocations granted right away behind the walks' callbacks.
    mutating func releaseGrantedRightAway() {
        for position in grantedRightAway.indices {
            var effect = Self.moved
            swap(&effect, &grantedRightAway[position])
            pendingCallbacks.append(effect)
        }
        grantedRightAway.removeAll(keepingCapacity: true)
    }
}
