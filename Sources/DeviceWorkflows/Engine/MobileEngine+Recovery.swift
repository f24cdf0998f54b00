public import LabKernel
import Orch8Wire

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
    /// was unregistered) are dropped, and so are the instances that used them.
    ///
    /// `compiled` holds sequences compiled earlier, by their JSON: a stored sequence found
    /// there is not parsed again.
    public mutating func restore(_ stored: StoredState, compiled: [String: CompiledSequence] = [:], now: Instant,
                                 into effects: inout [EngineEffect]) -> [String] {
        lastNow = now
        var problems: [String] = []
        let loader = SequenceLoader(registeredHandlers: handlers, maxSizeBytes: Int(config.maxSequenceSizeBytes))
        for json in stored.sequences {
            do {
                let program: Program
                if let known = compiled[json], known.program.sequence.handlers.allSatisfy(handlers.contains) {
                    program = known.program
                } else {
                    program = Program(sequence: try loader.load(json).sequence, json: json)
                }
                if programs[program.key] == nil { programOrder.append(program.key) }
                programs[program.key] = program
            } catch {
                problems.append("a stored sequence no longer loads: \(error)")
            }
        }
        instances = []
        programOf = []
        flags = []
        timers = []
        estimatedSizes = []
        estimatedTotal = 0
        nextCollection = nil
        indexByID = [:]
        indexByNumber = NumberedSlots()
        dirtyList = []
        changedList = []
        inFlightCount = 0
        queued = []
        dispatchQueue = []
        activeCount = 0
        for var instance in stored.instances.sorted(by: { $0.sequenceNumber < $1.sequenceNumber }) {
            guard let program = program(named: instance.sequenceName, version: instance.sequenceVersion) else {
                problems.append("instance \(instance.id) uses \(instance.sequenceName) v\(instance.sequenceVersion), which is not loaded; it is dropped")
                effects.append(.delete(instanceID: instance.instanceID, number: instance.sequenceNumber))
                continue
            }
            if !instance.state.isTerminal {
                for n in instance.nodes.indices where instance.nodes[n].inFlight {
                    instance.nodes[n].inFlight = false
                    instance.nodes[n].attempt -= 1
                    instance.nodes[n].deadline = nil
                    instance.stepsExecuted -= 1
                }
                activeCount += 1
            }
            let index = append(instance, program: program)
            if !instance.state.isTerminal { markDirty(index) }
        }
        nextSequenceNumber = instances.map(\.sequenceNumber).max().map { $0 + 1 } ?? 0
        for index in instances.indices { updateEstimatedSize(index) }
        flush(now: now, into: &effects)
        return problems
    }
}
