public import LabKernel

extension MobileEngine {
    /// What a store hands back after an app restart.
    public struct StoredState: Sendable {
        public var sequences: [String]
        public var instances: [WorkflowInstance]
        public init(sequences: [String], instances: [WorkflowInstance]) {
            self.sequences = sequences
            self.instances = instances
        }
    }

    /// Rebuilds the engine from stored sequences and instance snapshots (a relaunch).
    ///
    /// Handlers that were in flight when the app died are forgotten by the driver, so
    /// their nodes are set back to "ready" with the attempt they were on: the re-dispatch
    /// carries the same invocation key, and a driver that journaled the result returns it
    /// instead of running the handler again. Sequences that no longer validate (a handler
    /// was unregistered) are dropped, and the instances that used them fail.
    public mutating func restore(_ stored: StoredState, now: Instant, into effects: inout [EngineEffect]) -> [String] {
        lastNow = now
        var problems: [String] = []
        let loader = SequenceLoader(registeredHandlers: handlers, maxSizeBytes: Int(config.maxSequenceSizeBytes))
        for json in stored.sequences {
            do {
                let program = Program(sequence: try loader.load(json).sequence, json: json)
                if programs[program.key] == nil { programOrder.append(program.key) }
                programs[program.key] = program
            } catch {
                problems.append("a stored sequence no longer loads: \(error)")
            }
        }
        instances = stored.instances.sorted { $0.sequenceNumber < $1.sequenceNumber }
        indexByID = Dictionary(uniqueKeysWithValues: instances.enumerated().map { ($1.id, $0) })
        nextSequenceNumber = (instances.map(\.sequenceNumber).max() ?? 0) + 1
        activeCount = instances.filter { !$0.state.isTerminal }.count
        inFlight = []
        queued = []
        dispatchQueue = []
        for index in instances.indices where !instances[index].state.isTerminal {
            for n in instances[index].nodes.indices where instances[index].nodes[n].inFlight {
                instances[index].nodes[n].inFlight = false
                instances[index].nodes[n].attempt -= 1
                instances[index].nodes[n].deadline = nil
                instances[index].stepsExecuted -= 1
            }
            if program(of: instances[index]) == nil {
                problems.append("instance \(instances[index].id) uses \(instances[index].sequenceName) v\(instances[index].sequenceVersion), which is not loaded")
                abort(index, "its sequence is no longer loaded", now: now, into: &effects)
                continue
            }
            dirty.insert(instances[index].id)
        }
        flush(now: now, into: &effects)
        return problems
    }
}
