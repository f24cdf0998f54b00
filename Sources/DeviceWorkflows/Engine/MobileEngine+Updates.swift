public import LabKernel
public import Orch8Wire

extension MobileEngine {
    /// `update_sequence` with its rollout policy (the seed's Update Policies table). The
    /// target is the newest loaded version of `sequenceName` (default: the instance's own
    /// sequence), typically just brought in by a manifest sync.
    ///
    /// - `restart`: cancel the instance and start a new one with `input` (default `{}`).
    /// - `skip_executed`: the same, but the new instance keeps the old one's context (with
    ///   `input` merged over it) and its completed steps complete at once instead of
    ///   running again. (The real SDK restarts without skipping.)
    /// - `graceful`: let the step(s) running or waiting finish, start nothing new, then
    ///   move the instance in place (same id, same context) to the new version, skipping
    ///   the steps it already completed. (The real SDK ignores this policy.)
    /// - `fail`: stop it and mark it Failed. `cancel`: cancel it, as `cancelInstance`.
    ///
    /// Returns the new instance's id for `restart` and `skip_executed`. Restarting a
    /// finished instance is allowed (the dashboard's Restart); the other policies need a
    /// live one.
    @discardableResult
    public mutating func updateInstance(
        _ instanceID: String, policy: UpdatePolicy, sequenceName: String? = nil, input: JSONValue? = nil,
        now: Instant, into effects: inout [EngineEffect]
    ) throws(MobileEngineError) -> String? {
        guard !isShutdown else { throw .shutdown }
        lastNow = now
        guard let index = index(of: instanceID) else { throw .notFound("instance \(instanceID)") }
        let target = sequenceName ?? instances[index].sequenceName
        guard let program = program(named: target) else { throw .notFound("sequence '\(target)' is not loaded") }
        var inputData: [String: JSONValue] = [:]
        switch input {
        case .object(let fields)?: inputData = fields
        case nil, .null?: break
        case let other?: throw .invalidInput("the input of an update is a JSON object, not \(other.canonicalText)")
        }
        let active = !instances[index].state.isTerminal
        switch policy {
        case .restart, .skipExecuted:
            var data = inputData
            var skip: Set<String> = []
            if policy == .skipExecuted {
                data = instances[index].data.dictionary.merging(inputData) { _, new in new }
                skip = completedSteps(index)
            }
            if active {
                requestCancel(index, now: now)
                drive(index, now: now)
            }
            guard activeCount < Int(config.maxConcurrentInstances) else {
                flush(now: now, into: &effects)
                throw .resourceLimit("\(activeCount) instances are active (maxConcurrentInstances is \(config.maxConcurrentInstances))")
            }
            let created = createInstance(program, data: data, dedupKey: nil, parent: nil, now: now)
            instances[created].skipSteps = skip
            flush(now: now, into: &effects)
            return instances[created].id
        case .graceful:
            guard active else { throw .invalidInput("instance \(instanceID) is already \(instances[index].state.rawValue)") }
            instances[index].pendingUpdate = WorkflowInstance.PendingUpdate(sequenceName: program.sequence.name, version: program.sequence.version)
            if instances[index].state == .paused { setState(index, .running, now: now) }
            markDirty(index)
            markChanged(index)
            drive(index, now: now)
            flush(now: now, into: &effects)
            return nil
        case .fail:
            guard active else { throw .invalidInput("instance \(instanceID) is already \(instances[index].state.rawValue)") }
            requestCancel(index, now: now)
            finishInstance(index, .failed, error: "failed by update_sequence", now: now)
            flush(now: now, into: &effects)
            return nil
        case .cancel:
            try cancelInstance(instanceID, now: now, into: &effects)
            return nil
        }
    }

    /// Ids of the steps an instance has completed (and those it skipped as completed).
    func completedSteps(_ index: Int) -> Set<String> {
        var done = instances[index].skipSteps
        for node in instances[index].nodes where node.state == .completed {
            if let step = programOf[index].step(node.kind) { done.insert(step.id) }
        }
        return done
    }

    /// A graceful update switches once no step of the instance is running or waiting: the
    /// tree is rebuilt for the new version and the completed steps are skipped.
    mutating func switchIfUpdateReady(_ index: Int, now: Instant) {
        guard let update = instances[index].pendingUpdate, !instances[index].state.isTerminal else { return }
        let busy = instances[index].nodes.contains { node in
            guard programOf[index].step(node.kind) != nil else { return false }
            return node.inFlight || node.state == .waiting || (node.state == .running && node.retryAt == nil)
        }
        guard !busy, let program = program(named: update.sequenceName, version: update.version) else { return }
        let skip = completedSteps(index)
        instances[index].skipSteps = skip
        instances[index].pendingUpdate = nil
        instances[index].sequenceName = program.sequence.name
        instances[index].sequenceVersion = program.sequence.version
        instances[index].nodes = [ExecNode(kind: .list(owner: -1, list: 0), parent: -1, state: .pending)]
        // Snapshots copy the tree and leave it here, so it gets its room now, once.
        instances[index].nodes.reserveCapacity(program.treeCapacity(for: 1))
        instances[index].nodeErrors = [:]
        instances[index].forEachItems = [:]
        programOf[index] = program
        markDirty(index)
        markChanged(index)
    }
}
