public import LabKernel
import Orch8Wire

extension MobileEngine {
    /// One engine tick (the seed's `tickOnce`): fire due timers, collect garbage, advance
    /// every dirty instance, grant dispatches up to `maxConcurrentSteps`, then persist.
    ///
    /// `shouldYield` is asked between instances; a driver returns true once the tick has
    /// used `maxTickDurationMs` (of wall time live, of modelled time in simulation), and
    /// the instances not reached stay dirty for the next tick.
    ///
    /// While nothing is left waiting for a handler slot, an instance's steps are granted
    /// and its snapshot taken right after its walk, while its tree is still in cache (see
    /// `grantRightAway` and `persistRightAway`); on a busy device, doing each in a pass of
    /// its own over every instance read every tree from memory three times a tick. Both
    /// happen only where the outcome is the one the passes would give, and the effects
    /// come out in the same order.
    public mutating func tick(now: Instant, into effects: inout [EngineEffect], shouldYield: () -> Bool = { false }) {
        guard !isShutdown else { return }
        lastNow = now
        fireTimers(now: now)
        collectGarbage(now: now, into: &effects)
        let order = dirtyList.sorted()
        dirtyList.removeAll(keepingCapacity: true)
        var granting = grantsRightAway && dispatchQueue.isEmpty
        for (position, index) in order.enumerated() {
            if shouldYield() {
                for rest in order[position...] { dirtyList.append(rest) }
                break
            }
            flags[index] &= ~1
            let queuedBefore = dispatchQueue.count
            drive(index, now: now)
            guard granting else { continue }
            granting = grantRightAway(index, from: queuedBefore, now: now)
            if granting { persistRightAway(index, now: now) }
        }
        releaseGrantedRightAway()
        grantDispatches(now: now)
        flush(now: now, into: &effects)
    }

    /// Runs the interpreter on one instance and acts on what it asks for.
    mutating func drive(_ index: Int, now: Instant) {
        guard !instances[index].state.isTerminal, instances[index].state != .paused else { return }
        // One interpreter serves every walk: the instance is swapped into it and back, and
        // its output buffers keep their capacity, so a walk copies and allocates nothing of
        // its own (most walks emit something; fresh buffers were allocations per walk). Nothing
        // below walks again before the outputs are read (the recursive `drive` comes last).
        walker.prepare(program: programOf[index], now: now, inputGate: config.inputGate,
                       timestamp: config.telemetryEnabled ? stamp(now) : nil)
        swap(&walker.instance, &instances[index])
        swap(&walker.telemetry, &recordedTelemetry)
        let progress = walker.run()
        swap(&walker.telemetry, &recordedTelemetry)
        swap(&walker.instance, &instances[index])
        markChanged(index)
        inFlightCount -= walker.cancelledInFlight
        for position in walker.effects.indices {
            var effect = Self.moved
            swap(&effect, &walker.effects[position])
            pendingCallbacks.append(effect)
        }
        let number = instances[index].sequenceNumber
        for n in walker.dispatch {
            let key = InvocationKey(instance: number, node: n, attempt: instances[index].nodes[Int(n)].attempt + 1)
            if queued.isEmpty || !queued.contains(key) { dispatchQueue.append(key) }
        }
        let childStarts = walker.childStarts
        for start in childStarts { startChild(of: index, start, now: now) }
        switch progress {
        case .done: finishInstance(index, .completed, error: nil, now: now)
        case .failed(let error): finishInstance(index, .failed, error: error, now: now)
        case .cancelled: finishInstance(index, .cancelled, error: nil, now: now)
        case .blocked:
            if instances[index].pendingUpdate != nil {
                switchIfUpdateReady(index, now: now)
                if instances[index].pendingUpdate == nil {
                    drive(index, now: now)
                    return
                }
            }
            let waiting = instances[index].nodes.contains { $0.state == .waiting }
            if instances[index].cancelRequested && !instances[index].nodes.contains(where: { isActive($0, programOf[index]) }) {
                finishInstance(index, .cancelled, error: nil, now: now)
            } else {
                setState(index, waiting ? .waiting : .running, now: now)
            }
        }
    }

    /// An unfinished step or sub-sequence: work of its own, queued, in flight or waiting
    /// (containers only wait on such nodes).
    func isActive(_ node: ExecNode, _ program: Program) -> Bool {
        guard !node.state.isFinished, case .block(let b) = node.kind else { return false }
        switch program.kinds[Int(b)] {
        case .step, .subSequence: return true
        case .router, .parallel, .race, .loop, .forEach, .tryCatch, .abSplit, .cancellationScope: return false
        }
    }

    /// What an effect slot holds after its effect was moved out.
    package static let moved = EngineEffect.removeSequence(name: "", version: 0)

    /// What a snapshot slot holds after its snapshot was moved out.
    package static let placeholderSnapshot = InstanceSnapshot(placeholder)

    /// What an instance slot holds while its instance is in the interpreter.
    static let placeholder = WorkflowInstance(
        id: .zero, sequenceName: "", sequenceVersion: 0, state: .scheduled, data: [:], nodes: [], dedupKey: nil, createdAt: .zero,
        updatedAt: .zero, finishedAt: nil, sequenceNumber: 0, stepsExecuted: 0, error: nil, parent: nil,
        generator: SeededGenerator(seed: 0))

    // MARK: Timers and garbage

    /// Deletes terminal instances older than `maxInstanceLifetimeSecs`.
    mutating func collectGarbage(now: Instant, into effects: inout [EngineEffect]) {
        // Looking at every instance on every tick read each one's state, a cache miss an
        // instance on a busy device, to find nothing to collect nearly always.
        guard let due = nextCollection, due <= now else { return }
        nextCollection = nil
        var expired: [Int] = []
        for index in instances.indices where instances[index].state.isTerminal {
            guard let finished = instances[index].finishedAt else { continue }
            if finished + config.instanceLifetime <= now { expired.append(index) } else { collectionDue(finished) }
        }
        guard !expired.isEmpty else { return }
        let gone = Set(expired)
        for index in expired { effects.append(.delete(instanceID: instances[index].instanceID, number: instances[index].sequenceNumber)) }
        let keep = instances.indices.filter { !gone.contains($0) }
        instances = keep.map { instances[$0] }
        programOf = keep.map { programOf[$0] }
        flags = keep.map { flags[$0] }
        timers = keep.map { timers[$0] }
        estimatedSizes = keep.map { estimatedSizes[$0] }
        var newIndex: [Int: Int] = [:]
        for (new, old) in keep.enumerated() { newIndex[old] = new }
        dirtyList = dirtyList.compactMap { newIndex[$0] }
        changedList = changedList.compactMap { newIndex[$0] }
        indexByID = Dictionary(uniqueKeysWithValues: instances.enumerated().map { ($1.instanceID, $0) })
        indexByNumber = NumberedSlots(indexing: instances.map(\.sequenceNumber))
    }

    /// Notes that a terminal instance that finished at `finished` expires in time.
    mutating func collectionDue(_ finished: Instant) {
        let due = finished + config.instanceLifetime
        if nextCollection.map({ due < $0 }) ?? true { nextCollection = due }
    }

    // MARK: Flushing

    /// Takes instance `index`'s snapshot, as of now, and marks it unchanged.
    mutating func snapshot(_ index: Int, now: Instant) -> InstanceSnapshot {
        flags[index] &= ~2
        updateEstimatedSize(index)
        instances[index].updatedAt = now
        timers[index] = summarizeTimers(index)
        // A spare snapshot (see `SpareSnapshots`) gets a copy of the tree, and the instance
        // keeps its own where it is: the trees stay where the walks last read them. (Giving
        // the instance the copy moved every busy tree to another buffer every tick, which
        // measured 1.05-1.17x slower.) Spares grow to the program's largest tree
        // (`Program.treeBound`) at once. Without a spare, the snapshot shares the tree and
        // the instance gets a copy with that room, so its walks do not copy it to grow.
        if let spare = spareSnapshots.pop() {
            spare.reuse(for: &instances[index], capacity: programOf[index].treeCapacity(for: instances[index].nodes.count))
            reusedSnapshots += 1
            return spare
        }
        let snapshot = InstanceSnapshot(instances[index])
        if !instances[index].state.isTerminal {
            instances[index].nodes.reserveCapacity(programOf[index].treeCapacity(for: instances[index].nodes.count))
        }
        return snapshot
    }

    /// Takes the snapshot of an instance just walked (and granted), when nothing else in
    /// this tick can change it any more: it starts no child instances (a finishing child
    /// changes its parent), and its steps are granted. A parent's cancel reaches its
    /// children before their walks, since children come later in the order.
    mutating func persistRightAway(_ index: Int, now: Instant) {
        guard flags[index] & 2 != 0, !programOf[index].startsChildren else { return }
        persistedRightAway.append((index, snapshot(index, now: now)))
        snapshotsTakenRightAway += 1
    }

    /// Persists every changed instance, then releases invocations and callbacks, so what
    /// the driver acts on is always already stored.
    mutating func flush(now: Instant, into effects: inout [EngineEffect]) {
        if !recordedTelemetry.isEmpty {
            // The batch leaves with its buffer; the next one starts at the size of this one
            // rather than growing to it again by doubling (a tick records tens of thousands).
            let recorded = recordedTelemetry.count
            effects.append(.telemetry(recordedTelemetry))
            recordedTelemetry = []
            recordedTelemetry.reserveCapacity(recorded)
        }
        if !changedList.isEmpty || !persistedRightAway.isEmpty {
            // In index order, merged with the snapshots taken right after walks.
            var early = 0
            changedList.sort()
            for index in changedList where flags[index] & 2 != 0 {
                while early < persistedRightAway.count, persistedRightAway[early].index <= index {
                    effects.append(.persist(persistedRightAway[early].snapshot))
                    early += 1
                }
                effects.append(.persist(snapshot(index, now: now)))
            }
            for position in early..<persistedRightAway.count { effects.append(.persist(persistedRightAway[position].snapshot)) }
            persistedRightAway.removeAll(keepingCapacity: true)
            changedList.removeAll(keepingCapacity: true)
        }
        if !pendingCallbacks.isEmpty {
            // Moved one by one: appending the array would retain and release every payload.
            for index in pendingCallbacks.indices {
                var effect = Self.moved
                swap(&effect, &pendingCallbacks[index])
                effects.append(effect)
            }
            pendingCallbacks.removeAll(keepingCapacity: true)
        }
    }
}
